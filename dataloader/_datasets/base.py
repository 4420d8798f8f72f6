"""Dataset base classes: PyTorch's ``Dataset``, ``IterableDataset``, ``ChainDataset`` and
``ConcatDataset``.

``ConcatDataset`` is here because ``Dataset.__add__`` makes one; its batched ``__getitems__``
(regrouping a batch by member) is :func:`dataloader._datasets.concat.concat_items`.

Public through :mod:`dataloader.dataset`; see its docstring for the dataset protocol.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar, cast

import numpy as np

from dataloader._datasets.concat import concat_items

__all__ = ["ChainDataset", "ConcatDataset", "Dataset", "IterableDataset", "is_iterable_dataset"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """Map-style dataset base: ``__getitem__(index)``, optional ``__len__`` / ``__getitems__``.

    ``dataset_a + dataset_b`` is ``ConcatDataset([dataset_a, dataset_b])``.  No default
    ``__len__`` and no default ``__getitems__`` (as in PyTorch, so the loader can tell whether a
    subclass provides them).

    ``iter(dataset)`` yields ``dataset[i]`` for ``i`` in ``range(len(dataset))`` (the length
    taken once, at the start).  Without this, Python would fall back to its legacy protocol
    (call ``__getitem__(0), (1), ...`` until an ``IndexError``), as it does for PyTorch's
    ``Dataset``: a bug that raises ``IndexError`` inside ``__getitem__`` would then end
    ``list(dataset)`` early and silently.  Here that ``IndexError`` propagates, and a dataset
    without ``__len__`` is not iterable (``TypeError``).
    """

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __iter__(self) -> Iterator[T_co]:
        """Yield ``self[0], ..., self[len(self) - 1]``.

        Raises:
            TypeError: the dataset has no ``__len__`` (at the ``iter()`` call).
            Whatever ``__getitem__`` raises, ``IndexError`` included, propagates unchanged.
        """
        if not isinstance(self, Sized):
            raise TypeError(
                f"{type(self).__name__} has no __len__, so it cannot be iterated: index it, "
                "or make it an IterableDataset"
            )
        return self._items(len(self))

    def _items(self, n: int) -> Iterator[T_co]:
        for i in range(n):
            yield self[i]

    def __add__(self, other: Dataset[T_co]) -> Dataset[T_co]:
        """``self`` then ``other``: a :class:`ConcatDataset` here, a :class:`ChainDataset` for
        an :class:`IterableDataset` (hence the return type is the common base)."""
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """Iterable-style dataset base: ``__iter__`` yields samples (a stream).

    Inside loader worker threads, :func:`dataloader.get_worker_info` tells ``__iter__`` which
    share of the stream to produce.  ``a + b`` chains two iterable datasets (:class:`ChainDataset`).
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    # PyTorch's API: iterable + iterable chains them (not a ConcatDataset, hence the override).
    def __add__(self, other: Dataset[T_co]) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Chains iterable datasets one after another, lazily.

    Raises:
        TypeError: (when iterated or measured) a member is not an :class:`IterableDataset`.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def _members(self) -> Iterator[IterableDataset]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(
                    f"ChainDataset only supports IterableDataset, got {type(d).__name__}"
                )
            yield d

    def __iter__(self) -> Iterator[Any]:
        for d in self._members():
            yield from d

    def __len__(self) -> int:
        return sum(len(cast(Sized, d)) for d in self._members())  # TypeError without __len__


class ConcatDataset(Dataset[T_co]):
    """The concatenation of map-style datasets.

    Args:
        datasets: a non-empty iterable of map-style datasets with ``__len__`` (read once, at
            construction, into :attr:`cumulative_sizes`).

    Indexing follows PyTorch: ``-len(self) <= index < 0`` counts from the end, an index below
    ``-len(self)`` raises ``ValueError``, one ``>= len(self)`` raises ``IndexError``.

    Raises:
        ValueError: ``datasets`` is empty (PyTorch raises AssertionError).
        TypeError: a member is an :class:`IterableDataset` (PyTorch raises AssertionError).
    """

    accepts_index_arrays = True

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        """Running totals of ``len(e)`` over ``sequence``."""
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for k, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(
                    f"ConcatDataset does not support IterableDataset (datasets[{k}] is "
                    f"{type(d).__name__})"
                )
        self.cumulative_sizes = self.cumsum(self.datasets)
        self._ends = np.asarray(self.cumulative_sizes, dtype=np.int64)
        self._starts = np.concatenate([[0], self._ends[:-1]]).astype(np.int64)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        n = len(self)
        if idx < 0:
            if -idx > n:
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = n + idx
        elif idx >= n:
            raise IndexError(f"index {idx} is out of range for ConcatDataset of length {n}")
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        local = idx if d == 0 else idx - self.cumulative_sizes[d - 1]
        return self.datasets[d][local]

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> Sequence[Any]:
        """Items ``indices`` (list of ints or 1-D int64 array) in order; see ``concat_items``."""
        return concat_items(self.datasets, self._starts, self._ends, indices)


def is_iterable_dataset(dataset: Any) -> bool:
    """Ours or torch's ``IterableDataset`` (torch's only if torch is imported already)."""
    if isinstance(dataset, IterableDataset):
        return True
    tud = sys.modules.get("torch.utils.data")
    return tud is not None and isinstance(dataset, tud.IterableDataset)
