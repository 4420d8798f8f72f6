"""Datasets with PyTorch's names and rules (``torch.utils.data.dataset``), over NumPy arrays.

A map-style dataset implements ``__getitem__(index)`` and usually ``__len__``; it may add a
batched ``__getitems__(indices) -> sequence of items`` that the loader calls instead of one
``__getitem__`` per index.  Two extensions over PyTorch:

* ``__getitems__`` may return :class:`BatchedItems` (columns already stacked); the default
  collate then does no per-row work.
* a class attribute ``accepts_index_arrays = True`` tells the loader it may pass
  ``__getitems__`` a 1-D int64 NumPy array instead of a list of ints.

Thread-safety: the loader's workers are threads that call ``__getitem__`` / ``__getitems__``
concurrently on the SAME dataset object, so both must be thread-safe (read-only state is).
Every dataset in this module is read-only after construction.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from dataloader._batched import BatchedItems
from dataloader._concat import ConcatDataset
from dataloader._dataset_base import ChainDataset, Dataset, IterableDataset, fetch_items
from dataloader._generator import check_generator, rng_for
from dataloader._indices import as_index_array

__all__ = [
    "ArrayDataset",
    "BatchedItems",
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "Subset",
    "random_split",
]

# Defined in private modules; shown (and pickled) under their public home.
for _cls in (BatchedItems, ChainDataset, ConcatDataset, Dataset, IterableDataset):
    _cls.__module__ = __name__
del _cls

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class ArrayDataset(Dataset[tuple]):
    """PyTorch's ``TensorDataset`` for NumPy arrays: item ``i`` is ``tuple(a[i] for a in arrays)``.

    Args:
        *arrays: arrays of shape ``(N, ...)``, any dtype, sharing the first dimension ``N``.
            Not copied (a ``numpy.memmap`` stays on disk); anything without ``shape`` goes
            through ``numpy.asarray``.

    Raises:
        ValueError: no arrays, a 0-d array, or first dimensions that differ (all named).

    ``__getitems__(indices)`` (list of ints or 1-D int64 array) does one fancy-index per array and
    returns ``BatchedItems(tuple(a[indices] for a in arrays))``; negative indices count from the
    end; out-of-range ones raise ``IndexError``.  Thread-safe (read-only).
    """

    accepts_index_arrays = True

    def __init__(self, *arrays: Any) -> None:
        if not arrays:
            raise ValueError("ArrayDataset needs at least one array")
        arrays = tuple(a if hasattr(a, "shape") else np.asarray(a) for a in arrays)
        for k, a in enumerate(arrays):
            if len(a.shape) == 0:
                raise ValueError(f"array {k} is 0-d (shape ()); arrays need a first dimension")
        sizes = [a.shape[0] for a in arrays]
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"Size mismatch between arrays: first dimensions are {sizes}")
        self.arrays = arrays

    @property
    def tensors(self) -> tuple[Any, ...]:
        """Alias of :attr:`arrays` (the name PyTorch's ``TensorDataset`` uses)."""
        return self.arrays

    def __getitem__(self, index) -> tuple:
        return tuple(a[index] for a in self.arrays)

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> BatchedItems:
        idx = as_index_array(indices)
        return BatchedItems(tuple(np.asarray(a[idx]) for a in self.arrays))

    def __len__(self) -> int:
        return self.arrays[0].shape[0]


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

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
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

    def __getitem__(self, idx):
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
            ``len(dataset)``.
        TypeError: a non-integer length (when not fractions) or a bad ``generator`` type.
    """
    rng = rng_for(check_generator(generator), 0)
    n = len(dataset)  # type: ignore[arg-type]
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1 (got {frac})")
            counts.append(math.floor(n * frac))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        for i, c in enumerate(counts):
            if c == 0:
                warnings.warn(
                    f"Length of split at index {i} is 0. This might result in an empty dataset.",
                    stacklevel=2,
                )
        lengths = counts
    for i, length in enumerate(lengths):
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)):
            raise TypeError(f"lengths[{i}]={length!r} must be an int (or all lengths fractions)")
        if length < 0:
            raise ValueError(f"lengths[{i}]={length} must be >= 0")
    if sum(lengths) != n:
        raise ValueError(
            "Sum of input lengths does not equal the length of the input dataset! "
            f"({sum(lengths)} != {n})"
        )
    perm = rng.permutation(n)
    return [
        Subset(dataset, perm[offset - length : offset])
        for offset, length in zip(itertools.accumulate(lengths), lengths, strict=True)
    ]
