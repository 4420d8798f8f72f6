"""Sampler base classes and the int64 index-chunk machinery behind the loader's fast path.

``ChunkedSampler`` subclasses describe an epoch as a stream of 1-D int64 index arrays
(``_index_chunks()``); ``__iter__`` flattens it to Python ints, and
:meth:`dataloader.sampler.BatchSampler._index_arrays` slices it into batches without per-index
Python work.  Users subclass :class:`Sampler`; the rest is internal.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any, Generic, SupportsIndex, TypeVar, cast

import numpy as np

from dataloader._constants import INDEX_CHUNK_ROWS
from dataloader._rng import EpochRng, check_generator

__all__ = [
    "ChunkedSampler",
    "Sampler",
    "SeededMixin",
    "arange_chunks",
    "bool_arg",
    "flatten_chunks",
    "native_index_chunks",
    "positive_int_arg",
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

    ``__iter__`` flattens the chunks into Python ints.  A subclass declared with
    ``native=True`` (``class S(ChunkedSampler, native=True)``) vouches that its ``__iter__`` and
    ``_index_chunks`` agree; the pair is recorded, and a further subclass overriding either one
    loses the fast path (:func:`native_index_chunks` returns None for it).
    """

    _agreeing: tuple[object, object]  # (__iter__, _index_chunks) known to yield the same

    def __init_subclass__(cls, *, native: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if native:
            cls._agreeing = (cls.__iter__, cls._index_chunks)

    def _index_chunks(self) -> Iterator[np.ndarray]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        return flatten_chunks(self._index_chunks())


ChunkedSampler._agreeing = (ChunkedSampler.__iter__, ChunkedSampler._index_chunks)


def flatten_chunks(chunks: Iterator[np.ndarray]) -> Iterator[int]:
    for chunk in chunks:
        for start in range(0, len(chunk), INDEX_CHUNK_ROWS):
            yield from chunk[start : start + INDEX_CHUNK_ROWS].tolist()


def arange_chunks(stop: int, start: int = 0) -> Iterator[np.ndarray]:
    """``start, start + 1, ..., stop - 1`` as int64 arrays of up to INDEX_CHUNK_ROWS."""
    for lo in range(start, stop, INDEX_CHUNK_ROWS):
        yield np.arange(lo, min(lo + INDEX_CHUNK_ROWS, stop), dtype=np.int64)


def readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def native_index_chunks(sampler: object) -> Callable[[], Iterator[np.ndarray]] | None:
    """``sampler._index_chunks`` if it is one of ours and agrees with ``__iter__``, else None."""
    if not isinstance(sampler, ChunkedSampler):
        return None
    cls = type(sampler)
    iter_fn, chunks_fn = cls._agreeing
    if cls.__iter__ is not iter_fn or cls._index_chunks is not chunks_fn:
        return None
    return sampler._index_chunks


def positive_int_arg(value: object, name: str, kinds: tuple[type, ...] = (int, np.integer)) -> int:
    """PyTorch's check of ``batch_size`` / ``num_samples``: a positive int of ``kinds``.

    Raises:
        ValueError: anything else (bools included), with PyTorch's message.
    """
    if not isinstance(value, bool) and isinstance(value, kinds):
        number = operator.index(cast(SupportsIndex, value))
        if number > 0:
            return number
    raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


def bool_arg(value: object, name: str, error: type[Exception] = ValueError) -> bool:
    """PyTorch's check of ``drop_last`` / ``replacement``: a bool, else ``error`` (its message)."""
    if not isinstance(value, bool):
        raise error(f"{name} should be a boolean value, but got {name}={value}")
    return value


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
