"""Datasets with PyTorch's names and rules (``torch.utils.data.dataset``), over NumPy arrays.

A map-style dataset implements ``__getitem__(index)`` and usually ``__len__``; it may add a
batched ``__getitems__(indices) -> sequence of items`` that the loader calls instead of one
``__getitem__`` per index.  Two extensions over PyTorch:

* ``__getitems__`` may return :class:`BatchedItems` (columns already stacked); the default
  collate then does no per-row work.
* a class attribute ``accepts_index_arrays = True`` tells the loader it may pass
  ``__getitems__`` a 1-D int64 NumPy array instead of a list of ints.
* ``__batch_rows__(self) -> BatchRows | None`` opts in to native batches: the loader gathers
  the rows it describes with no Python (see :class:`BatchRows`).

Thread-safety: the loader's workers are threads that call ``__getitem__`` / ``__getitems__``
concurrently on the SAME dataset object, so both must be thread-safe (read-only state is).
Every dataset in this module is read-only after construction.
"""

from __future__ import annotations

from dataloader._datasets.array import ArrayDataset
from dataloader._datasets.base import ChainDataset, ConcatDataset, Dataset, IterableDataset
from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.rows import BatchRows
from dataloader._datasets.stack import StackDataset
from dataloader._datasets.subset import Subset, random_split

__all__ = [
    "ArrayDataset",
    "BatchRows",
    "BatchedItems",
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "StackDataset",
    "Subset",
    "random_split",
]

# Defined in private modules; shown (and pickled) under their public home.
for _obj in (ArrayDataset, BatchRows, BatchedItems, ChainDataset, ConcatDataset, Dataset, IterableDataset,
             StackDataset, Subset, random_split):
    _obj.__module__ = __name__
del _obj
