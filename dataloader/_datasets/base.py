"""Dataset base classes (PyTorch's ``Dataset``, ``IterableDataset``, ``ChainDataset``).

Public through :mod:`dataloader.dataset`; see its docstring for the dataset protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from dataloader._indices import as_index_array

if TYPE_CHECKING:
    from dataloader._datasets.concat import ConcatDataset

__all__ = ["ChainDataset", "Dataset", "IterableDataset", "fetch_items"]

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

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must implement __getitem__")

    def __iter__(self) -> Iterator[T_co]:
        """Yield ``self[0], ..., self[len(self) - 1]``.

        Raises:
            TypeError: the dataset has no ``__len__`` (at the ``iter()`` call).
            Whatever ``__getitem__`` raises, ``IndexError`` included, propagates unchanged.
        """
        if not hasattr(type(self), "__len__"):
            raise TypeError(
                f"{type(self).__name__} has no __len__, so it cannot be iterated: index it, "
                "or make it an IterableDataset"
            )
        return self._items(len(self))  # type: ignore[arg-type]

    def _items(self, n: int) -> Iterator[T_co]:
        for i in range(n):
            yield self[i]

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        from dataloader._datasets.concat import ConcatDataset

        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """Iterable-style dataset base: ``__iter__`` yields samples (a stream).

    Inside loader worker threads, :func:`dataloader.get_worker_info` tells ``__iter__`` which
    share of the stream to produce.  ``a + b`` chains two iterable datasets (:class:`ChainDataset`).
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

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
        return sum(len(d) for d in self._members())  # type: ignore[arg-type]


def fetch_items(dataset: Any, keys: np.ndarray | list[Any]) -> Sequence[Any]:
    """Items ``keys`` of ``dataset``, via ``__getitems__`` where it has one.

    ``keys`` is a 1-D int64 array or a list; the dataset gets an array only when it declares
    ``accepts_index_arrays`` (and the keys are integers), else a list.
    """
    getitems = getattr(dataset, "__getitems__", None)
    if callable(getitems) and getattr(dataset, "accepts_index_arrays", False):
        if not isinstance(keys, np.ndarray):
            try:
                keys = as_index_array(keys)
            except TypeError:  # non-integer keys: the dataset gets the list
                return getitems(keys)
        return getitems(keys)
    if isinstance(keys, np.ndarray):
        keys = keys.tolist()
    if callable(getitems):
        return getitems(keys)
    return [dataset[k] for k in keys]
