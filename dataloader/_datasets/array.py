"""``ArrayDataset``: PyTorch's ``TensorDataset`` over NumPy arrays, with a batched
``__getitems__``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.rows import BatchRows
from dataloader._indices import as_index_array
from dataloader._native._arrayrows import can_take, take_columns, take_rows
from dataloader._native._out import check_out_array

__all__ = ["ArrayDataset"]


class ArrayDataset(Dataset[tuple]):
    """PyTorch's ``TensorDataset`` for NumPy arrays: item ``i`` is ``tuple(a[i] for a in arrays)``.

    Args:
        *arrays: arrays of shape ``(N, ...)``, any dtype, sharing the first dimension ``N``.
            Not copied (a ``numpy.memmap`` stays on disk); anything without ``shape`` goes
            through ``numpy.asarray``.

    Raises:
        ValueError: no arrays, a 0-d array, or first dimensions that differ (all named).

    ``__getitems__(indices, out=None)`` returns ``BatchedItems(tuple(a[indices] for a in arrays))``
    (see there).  Thread-safe: the dataset is only read (concurrent calls need distinct ``out``).
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

    def __batch_rows__(self) -> BatchRows | None:
        """The arrays, for the loader's native batches (``BatchRows``, the protocol of
        ``dataloader._datasets.rows``); None for a subclass, whose items may differ: it opts in
        by defining its own ``__batch_rows__`` (``BatchRows(self.arrays)`` where its items are
        still ``tuple(a[i] for a in arrays)``)."""
        return BatchRows(self.arrays) if type(self) is ArrayDataset else None

    def __getitems__(
        self, indices: Sequence[int] | np.ndarray, out: Sequence[np.ndarray | None] | None = None
    ) -> BatchedItems:
        """Rows ``indices`` of every array, stacked: ``BatchedItems((a[indices] for a in arrays))``.

        A C-contiguous ``numpy.ndarray`` or ``numpy.memmap`` without Python objects is gathered
        by the native row kernel of ``.ndf`` files (one ``memcpy`` a row, prefetching rows ahead,
        the GIL released); any other array by NumPy's fancy indexing.  Same values either way.

        Args:
            indices: ``B`` row numbers, a list of ints or a 1-D integer array; negative ones
                count from the end, as in NumPy.
            out: ``None`` (new arrays), or a tuple or list with one entry per array: ``None``
                (a new array for that one) or an array to fill, of shape
                ``(B,) + arrays[k].shape[1:]``, dtype ``arrays[k].dtype``, C-contiguous,
                writeable and not overlapping ``arrays[k]``.  The batch's columns are then
                these very arrays.

        Raises:
            IndexError: an index outside ``[-N, N)`` (named; nothing is written to ``out``
                for a natively gathered array).
            OSError: a natively gathered array, or an ``out`` entry, maps a file (a
                ``numpy.memmap``, or any other exporter of mapped memory: ``mmap.mmap``,
                ctypes, ``__array_interface__``, pyarrow) that was truncated while mapped,
                and a row lies past its new end (EIO, naming the file; NumPy's indexing
                would end the process with SIGBUS).  Rows past the end but on the file's
                last page read as zeros (the kernel zero-fills it).
            TypeError: ``indices`` are not integers; ``out`` is not a tuple or list, or entry
                ``k`` is not an ndarray of its array's dtype (named).
            ValueError: ``indices`` are not 1-D; ``out`` has the wrong number of entries, or
                entry ``k`` the wrong shape or layout, or overlaps its array (named).
        """
        idx = as_index_array(indices)
        if out is None:
            native = take_columns(self.arrays, idx)  # None unless every array is native
            if native is not None:
                return BatchedItems._of(native, len(idx))
            return BatchedItems(tuple(_take(a, idx, None) for a in self.arrays))
        if not isinstance(out, (tuple, list)):
            raise TypeError(f"out must be a tuple or list of arrays, got {type(out).__name__}")
        if len(out) != len(self.arrays):
            raise ValueError(f"out has {len(out)} entries; expected one per array "
                             f"({len(self.arrays)})")
        columns = []
        for k, (a, o) in enumerate(zip(self.arrays, out, strict=True)):
            try:
                columns.append(_take(a, idx, o))
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"out[{k}]: {exc}") from None
        return BatchedItems(tuple(columns))

    def __len__(self) -> int:
        return self.arrays[0].shape[0]


def _take(array: Any, idx: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``array[idx]`` into ``out`` (or a new array): natively where the array allows it."""
    if can_take(array):
        return take_rows(array, idx, out)
    rows = np.asarray(array[idx])
    if out is None:
        return rows
    out = check_out_array(out, "out", rows.shape, rows.dtype)
    out[...] = rows
    return out
