"""Sampler base classes and the int64 index-chunk machinery behind the loader's fast path.

``ChunkedSampler`` subclasses describe an epoch as a stream of 1-D int64 index arrays
(``_index_chunks()``); ``__iter__`` flattens it to Python ints, and
:meth:`dataloader.sampler.BatchSampler._index_arrays` slices it into batches without per-index
Python work.  Users subclass :class:`Sampler`; the rest is internal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

import numpy as np

from dataloader._constants import INDEX_CHUNK_ROWS
from dataloader._rng import EpochRng, check_generator

__all__ = [
    "ChunkedSampler",
    "Sampler",
    "SeededMixin",
    "arange_chunks",
    "flatten_chunks",
    "native_index_chunks",
    "readonly",
]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """Base class of all samplers: ``__iter__`` yields indices (or batches of indices).

    Subclasses must implement ``__iter__`` and may implement ``__len__`` (the number of items
    ``__iter__`` yields); the loader needs ``__len__`` only for ``len(loader)``.
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")


class ChunkedSampler(Sampler[int]):
    """A sampler whose epoch is a stream of int64 index arrays (``_index_chunks``).

    ``__iter__`` flattens the chunks into Python ints.  ``_native_iter`` / ``_native_chunks``
    record the implementations known to agree; a subclass overriding either loses the fast path.
    """

    def _index_chunks(self) -> Iterator[np.ndarray]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        return flatten_chunks(self._index_chunks())

    _native_iter = __iter__
    _native_chunks = _index_chunks


def flatten_chunks(chunks: Iterator[np.ndarray]) -> Iterator[int]:
    for chunk in chunks:
        for start in range(0, len(chunk), INDEX_CHUNK_ROWS):
            yield from chunk[start : start + INDEX_CHUNK_ROWS].tolist()


def arange_chunks(n: int) -> Iterator[np.ndarray]:
    for start in range(0, n, INDEX_CHUNK_ROWS):
        yield np.arange(start, min(start + INDEX_CHUNK_ROWS, n), dtype=np.int64)


def readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def native_index_chunks(sampler: object):
    """``sampler._index_chunks`` if it is one of ours and agrees with ``__iter__``, else None."""
    cls = type(sampler)
    if not isinstance(sampler, ChunkedSampler):
        return None
    if cls.__iter__ is not cls._native_iter or cls._index_chunks is not cls._native_chunks:
        return None
    return sampler._index_chunks


class SeededMixin:
    """``generator`` / ``epoch`` / ``set_epoch`` for samplers drawing random numbers."""

    _rng: EpochRng

    @property
    def generator(self) -> None | int | np.random.Generator:
        """``None`` (OS entropy each epoch), an int seed, or a ``numpy.random.Generator``."""
        return self._rng.generator

    @generator.setter
    def generator(self, value: object) -> None:
        self._rng.generator = check_generator(value)

    @property
    def epoch(self) -> int:
        """Epoch of the next ``__iter__`` (matters only with an int seed)."""
        return self._rng.epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``__iter__`` use epoch ``epoch`` (int >= 0); later ones count up."""
        self._rng.set_epoch(epoch)
