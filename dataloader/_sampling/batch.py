"""``BatchSampler`` (PyTorch's) plus its int64 index-array fast path for the loader."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from dataloader._indices import as_index_array
from dataloader._sampling.base import Sampler, bool_arg, native_index_chunks, positive_int_arg

__all__ = ["BatchSampler", "iter_index_arrays"]


class BatchSampler(Sampler[list[int]]):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    Args:
        sampler: a sampler or any iterable of indices.
        batch_size: indices per batch, a positive int (not bool).
        drop_last: drop the last batch when it is shorter than ``batch_size``.

    Raises:
        ValueError: bad ``batch_size`` or non-bool ``drop_last`` (PyTorch's messages).

    ``len()`` is exact: ``len(sampler) // batch_size`` with ``drop_last`` else the ceiling.
    Iteration is lazy: batches are cut from the index stream as they are asked for.
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool):
        self.sampler = sampler
        self.batch_size = positive_int_arg(batch_size, "batch_size", (int,))
        self.drop_last = bool_arg(drop_last, "drop_last")

    def __iter__(self) -> Iterator[list[int]]:
        # iter(sampler) runs now, so the sampler's epoch is claimed by this call.
        return self._batches(iter(self.sampler))

    def _batches(self, it: Iterator[int]) -> Iterator[list[int]]:
        size = self.batch_size
        while batch := list(itertools.islice(it, size)):
            if len(batch) < size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        if self.drop_last:
            return n // self.batch_size
        return (n + self.batch_size - 1) // self.batch_size

    def _index_arrays(self) -> Iterator[np.ndarray]:
        """The batches of ``iter(self)``, as 1-D int64 arrays (possibly read-only views).

        Claims one sampler epoch, like ``iter(self)``.  No per-index Python work when the
        sampler is our Sequential/Random/WeightedRandom/DistributedSampler; else each list is
        converted.

        Raises:
            TypeError: (fallback path) a batch holds something other than integers.
        """
        chunks = native_index_chunks(self.sampler)
        if chunks is None or type(self).__iter__ is not BatchSampler.__iter__:
            return (as_index_array(b) for b in iter(self))
        return _rebatch(chunks(), self.batch_size, self.drop_last)


def _rebatch(chunks: Iterator[np.ndarray], size: int, drop_last: bool) -> Iterator[np.ndarray]:
    pending: list[np.ndarray] = []
    pending_n = 0
    for chunk in chunks:
        m = len(chunk)
        pos = 0
        if pending_n:
            head = chunk[: size - pending_n]
            pending.append(head)
            pending_n += len(head)
            pos = len(head)
            if pending_n < size:
                continue
            yield np.concatenate(pending)
            pending, pending_n = [], 0
        full_end = pos + (m - pos) // size * size
        for start in range(pos, full_end, size):
            yield chunk[start : start + size]
        if full_end < m:
            pending, pending_n = [chunk[full_end:]], m - full_end
    if pending_n and not drop_last:
        yield np.concatenate(pending)


def iter_index_arrays(batch_sampler: Iterable[Sequence[int]]) -> Iterator[np.ndarray]:
    """Batches of any batch sampler as 1-D int64 arrays (fast for :class:`BatchSampler`).

    Internal, for the loader; not exported.  Claims one epoch of the underlying sampler.
    """
    if isinstance(batch_sampler, BatchSampler):
        return batch_sampler._index_arrays()
    return (as_index_array(b) for b in batch_sampler)
