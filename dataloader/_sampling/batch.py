"""``BatchSampler`` (PyTorch's) plus its int64 index-array fast path for the loader."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np

from dataloader._indices import as_index_array
from dataloader._sampling.base import Sampler, bool_arg, native_index_chunks, positive_int_arg
from dataloader._sampling.state import ResumableMixin, check_state
from dataloader._validate import check_int

__all__ = ["BatchSampler", "iter_index_arrays", "starts_late"]


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

    _start = 0  # batches the next iteration drops from an inner sampler that cannot start late

    def __iter__(self) -> Iterator[list[int]]:
        # iter(sampler) runs now, so the sampler's epoch is claimed by this call.
        it = iter(self.sampler)
        skip, self._start = self._start * self.batch_size, 0
        if skip:
            next(itertools.islice(it, skip, skip), None)  # fast-forward: draw and drop
        return self._batches(it)

    def state_dict(self) -> dict[str, Any]:
        """``{"sampler": the sampler's state_dict() (None if it has none), "start": 0}``: the
        state the next ``__iter__`` starts from (``dataloader._sampling.state``)."""
        inner = getattr(self.sampler, "state_dict", None)
        return {"sampler": inner() if inner is not None else None, "start": self._start}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Make the next ``__iter__`` start at batch ``state_dict["start"]``.

        Over a built-in sampler the sampler itself starts ``start * batch_size`` positions in
        (O(1) for the permutation samplers).  Over another sampler its own state is loaded (when
        saved), then the next ``__iter__`` draws and drops ``start * batch_size`` indices: the
        cost of drawing them, without fetching any item.

        Raises:
            TypeError, ValueError: a malformed state, naming the key.
        """
        if isinstance(state_dict, dict) and "torch_generators" in state_dict:
            raise ValueError(
                "this sampler state was saved by dataloader.torch.DataLoader (torch's samplers and "
                "draws), not by dataloader.DataLoader: a state loads into a loader of the face that saved it"
            )
        sd = check_state(state_dict, "BatchSampler", ("sampler", "start"))
        start = check_int(sd["start"], "BatchSampler state 'start'", minimum=0)
        inner_sd = sd["sampler"]
        if inner_sd is not None:
            if not hasattr(self.sampler, "load_state_dict"):
                raise ValueError(
                    f"BatchSampler state has a sampler state, but {type(self.sampler).__name__} "
                    "has no load_state_dict"
                )
            self.sampler.load_state_dict(inner_sd)
        inner = self.sampler
        if isinstance(inner, ResumableMixin) and starts_late(inner):
            inner._start += start * self.batch_size  # the sampler starts late itself, in O(1)
            start = 0
        self._start = start

    def _batches(self, it: Iterator[int]) -> Iterator[list[int]]:
        size = self.batch_size
        while batch := list(itertools.islice(it, size)):
            if len(batch) < size and self.drop_last:
                return
            yield batch

    def __len__(self) -> int:
        if not isinstance(self.sampler, Sized):  # an iterable of indices may have no length
            raise TypeError(f"object of type {type(self.sampler).__name__!r} has no len()")
        n = len(self.sampler)
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
        if chunks is None or self._start or type(self).__iter__ is not BatchSampler.__iter__:
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


def starts_late(sampler: object) -> bool:
    """True for a built-in (batch) sampler, not a subclass, that honours a loaded ``start``
    itself (a ``BatchSampler`` always does: over another sampler it draws and drops)."""
    if type(sampler) is BatchSampler:
        return True
    return isinstance(sampler, ResumableMixin) and type(sampler).__module__.startswith("dataloader.")


def iter_index_arrays(batch_sampler: Iterable[Sequence[int]]) -> Iterator[np.ndarray]:
    """Batches of any batch sampler as 1-D int64 arrays (fast for :class:`BatchSampler`).

    Internal, for the loader; not exported.  Claims one epoch of the underlying sampler.
    """
    if isinstance(batch_sampler, BatchSampler):
        return batch_sampler._index_arrays()
    return (as_index_array(b) for b in batch_sampler)
