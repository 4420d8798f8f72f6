"""PyTorch's index samplers: Sequential, Random, SubsetRandom and WeightedRandom.

Public through :mod:`dataloader.sampler`; see its docstring for laziness, the loader's
index-chunk fast path and thread-safety.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Sized

import numpy as np

from dataloader._constants import INDEX_CHUNK_ROWS
from dataloader._rng import EpochRng
from dataloader._sampling.base import (
    ChunkedSampler,
    Sampler,
    SeededMixin,
    arange_chunks,
    bool_arg,
    positive_int_arg,
    readonly,
)
from dataloader._sampling.permute import Permutation, PermutationSpan, permutation_chunks, permutation_from
from dataloader._sampling.state import ResumableMixin, skip_chunks

__all__ = [
    "RandomSampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


class SequentialSampler(ResumableMixin, ChunkedSampler, native=True):
    """Yields ``0, 1, ..., len(data_source) - 1`` in order.

    Args:
        data_source: anything with ``__len__``; its length is read at every ``__iter__``.

    Memory is constant for any length (10**9 rows start instantly).
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._take_start(), len(self.data_source)))

    def _index_chunks(self) -> Iterator[np.ndarray]:
        return arange_chunks(len(self.data_source), self._take_start())

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(ResumableMixin, SeededMixin, ChunkedSampler, native=True):
    """Yields indices in random order, without (default) or with replacement.

    Without replacement each pass over ``len(data_source)`` rows is one permutation; when
    ``num_samples > len(data_source)`` whole permutations follow each other, the last one cut
    short (PyTorch's rule).  With replacement, ``num_samples`` independent uniform draws.

    Args:
        data_source: anything with ``__len__`` (read at every ``__iter__``).
        replacement: draw with replacement.
        num_samples: indices per epoch; ``None`` means ``len(data_source)``.
        generator: ``None`` (fresh OS entropy each epoch), an int seed (epoch ``e`` draws from
            ``SeedSequence([seed, e])``; ``e`` counts up per ``__iter__``, see ``set_epoch``), or
            a ``numpy.random.Generator`` (drawn from; its state advances).

    Without replacement a pass is a keyed Feistel permutation
    (:mod:`dataloader._sampling.permute`) whose 8 round keys are the epoch generator's next
    draws; its indices are computed chunk by chunk as the loader asks for them.

    Raises:
        TypeError: ``replacement`` is not a bool, or ``generator`` has a bad type.
        ValueError: ``num_samples`` (or the dataset length when it is None) is not a positive
            int; in particular an empty dataset, as in PyTorch.

    Memory: constant in ``len(data_source)`` (one chunk of ``INDEX_CHUNK_ROWS`` int64 indices
    at a time), with or without replacement; 10**12 rows start at once.
    """

    def __init__(
        self,
        data_source: Sized,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: None | int | np.random.Generator = None,
    ) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self._rng = EpochRng(generator)
        bool_arg(replacement, "replacement", TypeError)
        positive_int_arg(len(data_source) if num_samples is None else num_samples, "num_samples")

    @property
    def num_samples(self) -> int:
        """Indices per epoch: ``num_samples`` if given, else ``len(data_source)``."""
        if self._num_samples is None:
            return len(self.data_source)
        return int(self._num_samples)

    def _index_chunks(self) -> Iterator[np.ndarray]:
        n = len(self.data_source)
        if n <= 0:
            raise ValueError(f"RandomSampler cannot sample from an empty data_source ({n=})")
        skip = self._take_start()
        return self._draws(self._rng.next_rng(), n, self.num_samples, skip)

    def _index_spans(self) -> Iterator[PermutationSpan]:
        """``_index_chunks`` without replacement, each pass as one span of its permutation
        (``dataloader._sampling.spans``): the same positions, drawn from the generator alike.
        Checks and starts the epoch at the call, as ``_index_chunks`` does."""
        n = len(self.data_source)
        if n <= 0:
            raise ValueError(f"RandomSampler cannot sample from an empty data_source ({n=})")
        skip = self._take_start()
        passes = self._passes(self._rng.next_rng(), n, self.num_samples, skip)
        return (PermutationSpan(perm, first, stop - first) for perm, first, stop in passes)

    def _draws(self, rng: np.random.Generator, n: int, k: int, skip: int) -> Iterator[np.ndarray]:
        if self.replacement:
            yield from skip_chunks(self._uniform(rng, n, k), skip)
            return
        for perm, first, stop in self._passes(rng, n, k, skip):
            yield from permutation_chunks(perm, first, stop)

    @staticmethod
    def _passes(rng: np.random.Generator, n: int, k: int, skip: int) -> Iterator[tuple[Permutation, int, int]]:
        # Pass j covers epoch positions [j * n, j * n + its length); every pass draws its keys
        # (the generator advances as without a skip), then starts at the skipped position.
        passes, rest = divmod(k, n)
        for j in range(passes + (rest > 0)):
            perm = permutation_from(n, rng)
            stop = n if j < passes else rest
            first = min(max(skip - j * n, 0), stop)
            if first < stop:
                yield perm, first, stop

    @staticmethod
    def _uniform(rng: np.random.Generator, n: int, k: int) -> Iterator[np.ndarray]:
        for start in range(0, k, INDEX_CHUNK_ROWS):
            size = min(INDEX_CHUNK_ROWS, k - start)
            yield rng.integers(0, n, size=size, dtype=np.int64)

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(ResumableMixin, SeededMixin, Sampler[int]):
    """Yields the given ``indices`` in random order, without replacement.

    Args:
        indices: a sequence of indices; ``indices[i]`` is yielded as it is (any type).
        generator: as for :class:`RandomSampler`.

    The positions ``0 .. len(indices) - 1`` are permuted as in :class:`RandomSampler` (a keyed
    Feistel permutation, computed chunk by chunk); memory is constant beyond ``indices``.
    """

    def __init__(
        self, indices: Sequence[int], generator: None | int | np.random.Generator = None
    ) -> None:
        self.indices = indices
        self._rng = EpochRng(generator)

    def __iter__(self) -> Iterator[int]:
        rng = self._rng.next_rng()
        start = self._take_start()
        indices = self.indices
        n = len(indices)
        if n == 0:
            return iter(())
        perm = permutation_from(n, rng)
        return _subset(indices, permutation_chunks(perm, min(start, n)))

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(ResumableMixin, SeededMixin, ChunkedSampler, native=True):
    """Yields ``num_samples`` indices in ``[0, len(weights))`` drawn with probability ~ weight.

    Args:
        weights: 1-D sequence of finite, non-negative floats, not all zero (need not sum to 1).
            Copied at construction.
        num_samples: indices per epoch, a positive int.
        replacement: with replacement (default); without it, an index is drawn at most once
            per epoch, in the order of sequential weighted draws (like ``torch.multinomial``).
        generator: as for :class:`RandomSampler`.

    Raises:
        ValueError: bad ``num_samples``, non-bool ``replacement`` (ValueError, as in PyTorch),
            weights not 1-D / not finite / negative / all zero, or ``replacement=False`` with
            ``num_samples`` larger than the number of non-zero weights.
        TypeError: bad ``generator`` type.
    """

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: None | int | np.random.Generator = None,
    ) -> None:
        num_samples = positive_int_arg(num_samples, "num_samples")
        bool_arg(replacement, "replacement")
        self._rng = EpochRng(generator)
        w = _check_weights(weights)
        nonzero = int(np.count_nonzero(w))
        if not replacement and num_samples > nonzero:
            raise ValueError(
                f"num_samples={num_samples} > {nonzero} non-zero weights: cannot draw that "
                "many distinct indices with replacement=False"
            )
        self.weights = readonly(w)
        self.num_samples = int(num_samples)
        self.replacement = replacement
        cdf = np.cumsum(w)
        self._cdf = readonly(cdf / cdf[-1])

    def _index_chunks(self) -> Iterator[np.ndarray]:
        skip = self._take_start()
        return skip_chunks(self._draws(self._rng.next_rng()), skip)

    def _draws(self, rng: np.random.Generator) -> Iterator[np.ndarray]:
        k = self.num_samples
        if self.replacement:
            for start in range(0, k, INDEX_CHUNK_ROWS):
                u = rng.random(min(INDEX_CHUNK_ROWS, k - start))
                yield np.searchsorted(self._cdf, u, side="right").astype(np.int64)
            return
        # Sequential draws without replacement == the k smallest of Exp(1) / w (Efraimidis &
        # Spirakis); zero weights get key inf and are never among the k smallest.
        with np.errstate(divide="ignore"):
            keys = rng.exponential(size=len(self.weights)) / self.weights
        if k < len(keys):
            part = np.argpartition(keys, k - 1)[:k]
            yield part[np.argsort(keys[part], kind="stable")].astype(np.int64)
        else:
            yield np.argsort(keys, kind="stable").astype(np.int64)

    def __len__(self) -> int:
        return self.num_samples


def _subset(indices: Sequence[int], chunks: Iterator[np.ndarray]) -> Iterator[int]:
    for chunk in chunks:
        for i in chunk.tolist():
            yield indices[i]


def _check_weights(weights: object) -> np.ndarray:
    try:
        w = np.array(weights, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"weights must be a 1-D sequence of numbers: {e}") from None
    if w.ndim != 1:
        raise ValueError(
            f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}"
        )
    if not np.isfinite(w).all():
        bad = int(np.flatnonzero(~np.isfinite(w))[0])
        raise ValueError(f"weights must be finite, got weights[{bad}]={w[bad]}")
    if (w < 0).any():
        bad = int(np.flatnonzero(w < 0)[0])
        raise ValueError(f"weights must be non-negative, got weights[{bad}]={w[bad]}")
    if not (w > 0).any():
        raise ValueError(f"weights must not be all zero (got {len(w)} weights)")
    return w
