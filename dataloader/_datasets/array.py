"""``ArrayDataset``: PyTorch's ``TensorDataset`` over NumPy arrays, with a batched
``__getitems__``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.batched import BatchedItems
from dataloader._indices import as_index_array

__all__ = ["ArrayDataset"]


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

    def __getitem__(self, index: Any) -> tuple[Any, ...]:
        return tuple(a[index] for a in self.arrays)

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> BatchedItems:
        idx = as_index_array(indices)
        return BatchedItems(tuple(np.asarray(a[idx]) for a in self.arrays))

    def __len__(self) -> int:
        return self.arrays[0].shape[0]
