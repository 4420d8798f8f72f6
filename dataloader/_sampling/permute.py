"""Seeded constant-memory permutations of ``[0, n)`` and their lazy index chunks.

Every shuffling sampler draws its epoch order from :class:`dataloader._native._permute.
Permutation` (a keyed Feistel network with cycle-walking; the construction and why it is
statistically good enough is in ``_permute.pyx``'s docstring).  The ``KEY_WORDS`` round keys are
the first draws of the epoch's generator (:func:`dataloader._rng.rng_for`), so with an int
seed epoch ``e``'s order is a pure function of ``(seed, e)``: the keys come from
``numpy.random.Generator(PCG64(SeedSequence([seed, e])))``.

Nothing here is ``n``-sized: a permutation is 80 bytes and chunks are ``PERMUTATION_CHUNK_ROWS``
rows, so ``n = 10**12`` starts at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._constants import PERMUTATION_CHUNK_ROWS
from dataloader._native._permute import KEY_WORDS, Permutation
from dataloader._rng import check_seed, rng_for
from dataloader._sampling.base import readonly

__all__ = ["Permutation", "PermutationSpan", "permutation_chunks", "permutation_from", "seeded_permutation"]


def permutation_from(n: int, rng: np.random.Generator) -> Permutation:
    """A permutation of ``[0, n)`` keyed by ``KEY_WORDS`` 64-bit draws from ``rng``.

    Raises:
        TypeError: ``n`` is not an int.
        ValueError: ``n`` outside ``[1, 2**63 - 1]``.
    """
    keys = rng.integers(0, 1 << 64, size=KEY_WORDS, dtype=np.uint64, endpoint=False)
    return Permutation(n, keys.tolist())


def seeded_permutation(n: int, seed: int, epoch: int = 0) -> Permutation:
    """The permutation of ``[0, n)`` for ``(seed, epoch)``: a pure function of the three.

    Raises:
        TypeError: ``n``, ``seed`` or ``epoch`` is not an int (bool included).
        ValueError: ``n`` outside ``[1, 2**63 - 1]``, or a negative ``seed`` / ``epoch``.
    """
    seed = check_seed(seed)
    epoch = check_seed(epoch, "epoch")
    return permutation_from(n, rng_for(seed, epoch))


def permutation_chunks(
    perm: Permutation, start: int = 0, stop: int | None = None, offset: int = 0
) -> Iterator[np.ndarray]:
    """Yield ``perm``'s indices at positions ``[start, stop)`` plus ``offset``, lazily.

    Each chunk is a fresh read-only int64 array of at most ``PERMUTATION_CHUNK_ROWS`` rows
    (batches are views of it), computed when the consumer asks for it (without the GIL).
    """
    stop = len(perm) if stop is None else stop
    for begin in range(start, stop, PERMUTATION_CHUNK_ROWS):
        chunk = np.empty(min(PERMUTATION_CHUNK_ROWS, stop - begin), dtype=np.int64)
        perm.fill(begin, chunk)
        if offset:
            chunk += offset
        yield readonly(chunk)


class PermutationSpan:
    """The rows at positions ``[start, start + count)`` of ``perm``, computed on demand.

    ``rows()`` (or ``numpy.asarray(span)``) gives them as a read-only int64 array of shape
    ``(count,)``.  Thread-safety: immutable.
    """

    __slots__ = ("perm", "start", "count")

    def __init__(self, perm: Permutation, start: int, count: int) -> None:
        self.perm = perm
        self.start = start
        self.count = count

    def rows(self) -> np.ndarray:
        return readonly(self.perm.fill(self.start, np.empty(self.count, dtype=np.int64)))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        rows = self.rows()
        return rows if dtype is None else rows.astype(dtype)

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows().tolist())

    def __repr__(self) -> str:
        return f"PermutationSpan({self.perm!r}, start={self.start}, count={self.count})"
