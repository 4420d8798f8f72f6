"""``Subset`` and ``random_split`` (PyTorch's), with an index-mapping batched ``__getitems__``."""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence, Sized
from typing import Any, TypeVar

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.fetch import fetch_items
from dataloader._indices import as_index_array
from dataloader._rng import check_generator, rng_for

__all__ = ["Subset", "random_split"]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class Subset(Dataset[T_co]):
    """The items of ``dataset`` at ``indices``: ``subset[i] == dataset[indices[i]]``.

    Args:
        dataset: a map-style dataset.
        indices: a sequence of indices into ``dataset`` (list, range, 1-D int array, ...).

    ``__getitems__`` maps the indices (vectorised when ``indices`` is an integer array or a
    ``range``) and forwards them to ``dataset.__getitems__`` when it has one, so a
    :class:`BatchedItems` from the inner dataset comes through unchanged.

    Raises:
        NotImplementedError: a subclass overrides ``__getitem__`` but not ``__getitems__``
            (PyTorch's rule, so the loader's batched path cannot bypass the override).
    """

    accepts_index_arrays = True

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int] | np.ndarray) -> None:
        self.dataset = dataset
        self.indices = indices
        cls = type(self)
        if cls.__getitem__ is not Subset.__getitem__ and cls.__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{cls.__name__} overrides __getitem__ but not __getitems__. When subclassing "
                "Subset and overriding __getitem__, you must also override __getitems__, e.g.\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]"
            )

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def _map(self, indices: Sequence[int] | np.ndarray) -> np.ndarray | list[Any]:
        sub = self.indices
        if isinstance(sub, range):
            idx = as_index_array(indices)
            n = len(sub)
            bad = (idx >= n) | (idx < -n)
            if bad.any():
                raise IndexError(
                    f"index {int(idx[bad][0])} is out of range for Subset of length {n}"
                )
            return sub.start + sub.step * np.where(idx < 0, idx + n, idx)
        if isinstance(sub, np.ndarray) and sub.ndim == 1 and sub.dtype.kind in "iu":
            return as_index_array(sub[as_index_array(indices)])
        if isinstance(indices, np.ndarray):
            indices = indices.tolist()
        return [sub[i] for i in indices]

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> Sequence[T_co]:
        return fetch_items(self.dataset, self._map(indices))

    def __len__(self) -> int:
        return len(self.indices)


def random_split(
    dataset: Dataset[T],
    lengths: Sequence[int | float],
    generator: None | int | np.random.Generator = None,
) -> list[Subset[T]]:
    """Split ``dataset`` at random into non-overlapping :class:`Subset` s of the given lengths.

    Args:
        dataset: a map-style dataset with ``__len__``.
        lengths: item counts summing to ``len(dataset)``, or fractions summing to 1: each
            becomes ``floor(frac * len(dataset))`` and the remainder is handed out one by one,
            round-robin from the first split (PyTorch's rule; a 0-length split warns).
        generator: ``None`` (OS entropy), an int seed (the permutation is a pure function of it:
            ``SeedSequence([seed, 0])``), or a ``numpy.random.Generator`` (drawn from).

    Returns:
        One ``Subset`` per length; its ``indices`` is a 1-D int64 array (PyTorch: a list).

    Raises:
        ValueError: a fraction outside [0, 1], a negative length, or lengths not summing to
            ``len(dataset)`` (fractions not summing to 1 included, as in PyTorch).
        TypeError: a non-integer length whose lengths do sum to ``len(dataset)``, or a bad
            ``generator`` type.
    """
    rng = rng_for(check_generator(generator), 0)
    if not isinstance(dataset, Sized):  # a map-style dataset need not define __len__
        raise TypeError(f"object of type {type(dataset).__name__!r} has no len()")
    n = len(dataset)
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _fraction_counts(lengths, n)
    sizes = _checked_sizes(lengths, n)
    perm = rng.permutation(n)
    return [
        Subset(dataset, perm[offset - size : offset])
        for offset, size in zip(itertools.accumulate(sizes), sizes, strict=True)
    ]


def _fraction_counts(fractions: list[Any], n: int) -> list[int]:
    """PyTorch's rule: ``floor(frac * n)`` each, the remainder handed out one by one round-robin
    from the first split; a 0-length split warns.

    Raises:
        ValueError: a fraction outside [0, 1].
    """
    counts = []
    for i, frac in enumerate(fractions):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1 (got {frac})")
        counts.append(math.floor(n * frac))
    for i in range(n - sum(counts)):
        counts[i % len(counts)] += 1
    for i, c in enumerate(counts):
        if c == 0:
            warnings.warn(
                f"Length of split at index {i} is 0. This might result in an empty dataset.",
                stacklevel=3,
            )
    return counts


def _checked_sizes(lengths: list[Any], n: int) -> list[int]:
    """``lengths`` as ints, checked against ``n`` (PyTorch checks the sum first: fractions that
    do not sum to 1, ``[0.1]`` or ``[1.1]``, are a ValueError, as are counts not summing to ``n``).

    Raises:
        ValueError: the sum is not ``n``, or a negative length.
        TypeError: a length that is not an int.
    """
    if sum(lengths) != n:
        raise ValueError(
            "Sum of input lengths does not equal the length of the input dataset! "
            f"({sum(lengths)} != {n})"
        )
    for i, length in enumerate(lengths):
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"lengths[{i}]={length!r} must be an int (or all lengths fractions)")
        if length < 0:
            raise ValueError(f"lengths[{i}]={length} must be >= 0")
    return [int(length) for length in lengths]
