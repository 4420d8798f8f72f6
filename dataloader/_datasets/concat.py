"""``ConcatDataset``: datasets one after another (PyTorch's rules), with a batched ``__getitems__``.

``__getitems__`` splits the batch by member dataset (``searchsorted`` over the cumulative
sizes), fetches each group with one call (the member's own ``__getitems__`` where it has one)
and puts the rows back in the requested order.  When every group answers with
:class:`BatchedItems` of matching columns, the answer is a ``BatchedItems`` whose columns are
the groups' columns concatenated and re-ordered, so collating it gives exactly what collating
the rows one by one would (NumPy promotes dtypes the same way in both).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.base import Dataset, IterableDataset, fetch_items
from dataloader._indices import as_index_array

__all__ = ["ConcatDataset"]

T_co = TypeVar("T_co", covariant=True)


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

    def __getitem__(self, idx):
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
        """Items ``indices`` (list of ints or 1-D int64 array) in order; see the module doc."""
        idx = as_index_array(indices)
        if idx.size == 0:
            return []
        n = len(self)
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n:
            raise ValueError(
                f"absolute value of index should not exceed dataset length (index {lo}, length {n})"
            )
        if hi >= n:
            raise IndexError(f"index {hi} is out of range for ConcatDataset of length {n}")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
        member = np.searchsorted(self._ends, idx, side="right")
        counts = np.bincount(member, minlength=len(self.datasets)).tolist()
        first = int(member[0])
        if counts[first] == len(idx):  # one member: no regrouping
            return fetch_items(self.datasets[first], idx - self._starts[first])
        local = idx - self._starts[member]
        order = np.argsort(member, kind="stable")
        parts = []
        start = 0
        for d, count in enumerate(counts):
            if not count:
                continue
            positions = order[start : start + count]
            start += count
            items = fetch_items(self.datasets[d], local[positions])
            if len(items) != len(positions):
                raise ValueError(
                    f"datasets[{d}].__getitems__ returned {len(items)} items for "
                    f"{len(positions)} indices"
                )
            parts.append((positions, items))
        return _assemble(parts, len(idx))


def _stackable(parts: list[tuple[np.ndarray, Any]]) -> bool:
    """True when all parts are BatchedItems whose columns concatenate like their rows stack."""
    if not all(isinstance(items, BatchedItems) for _, items in parts):
        return False
    columns = [items.columns for _, items in parts]
    if len({len(c) for c in columns}) != 1:
        return False
    for k in range(len(columns[0])):
        cols = [c[k] for c in columns]
        if not all(isinstance(c, np.ndarray) for c in cols):
            return False
        if len({c.shape[1:] for c in cols}) != 1:
            return False
        dtypes = {c.dtype for c in cols}
        if len(dtypes) > 1 and any(dt.kind not in "biufc" for dt in dtypes):
            return False  # only numbers promote the same way row by row (str + int would not)
    return True


def _assemble(parts: list[tuple[np.ndarray, Any]], size: int) -> Sequence[Any]:
    """Rows of ``parts`` (positions, items) put back in position order."""
    if _stackable(parts):
        out = []
        for k in range(len(parts[0][1].columns)):
            cols = [items.columns[k] for _, items in parts]
            # Numeric dtypes (checked above): np.result_type promotes as np.stack of the rows.
            col = np.empty((size, *cols[0].shape[1:]), dtype=np.result_type(*cols))
            for (positions, _), c in zip(parts, cols, strict=True):
                col[positions] = c
            out.append(col)
        return BatchedItems(tuple(out))
    return _rows(parts, size)


def _rows(parts: list[tuple[np.ndarray, Any]], size: int) -> list[Any]:
    rows: list[Any] = [None] * size
    for positions, items in parts:
        for p, item in zip(positions.tolist(), items, strict=True):
            rows[p] = item
    return rows
