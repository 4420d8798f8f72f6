"""The batched ``__getitems__`` of ``ConcatDataset``: one batch across member datasets.

:func:`concat_items` splits the batch by member dataset (``searchsorted`` over the cumulative
sizes) and :func:`grouped_items` (also ``MixDataset``'s, which knows each item's member) fetches each group with one call (the member's own ``__getitems__`` where it has one)
and puts the rows back in the requested order.  When every group answers with
:class:`BatchedItems` of matching columns, the answer is a ``BatchedItems`` whose columns are
the groups' columns concatenated and re-ordered, so collating it gives exactly what collating
the rows one by one would (NumPy promotes dtypes the same way in both).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.fetch import check_item_count, fetch_items
from dataloader._indices import as_index_array

__all__ = ["concat_items", "grouped_items"]


def concat_items(
    datasets: Sequence[Any],
    starts: np.ndarray,
    ends: np.ndarray,
    indices: Sequence[int] | np.ndarray,
) -> Sequence[Any]:
    """Items ``indices`` (list of ints or 1-D int64 array) of the concatenation, in order.

    ``starts`` / ``ends`` (int64, one per member) are where each member's rows begin and end in
    the concatenation.  Indexing follows ``ConcatDataset.__getitem__`` (PyTorch's rules).

    Raises:
        ValueError: an index below ``-len``, or a member returning the wrong number of items.
        IndexError: an index ``>= len``.
    """
    idx = as_index_array(indices)
    if idx.size == 0:
        return []
    n = int(ends[-1])
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -n:
        raise ValueError(
            f"absolute value of index should not exceed dataset length (index {lo}, length {n})"
        )
    if hi >= n:
        raise IndexError(f"index {hi} is out of range for ConcatDataset of length {n}")
    if lo < 0:
        idx = np.where(idx < 0, idx + n, idx)
    member = np.searchsorted(ends, idx, side="right")
    return grouped_items(datasets, member, idx - starts[member])


def grouped_items(datasets: Sequence[Any], member: np.ndarray, local: np.ndarray) -> Sequence[Any]:
    """Items ``datasets[member[j]][local[j]]`` for every ``j``, in order (both int64, 1-D, one
    entry per item, already in range): one fetch per member (its ``__getitems__`` where it has
    one), the rows put back in order, ``BatchedItems`` columns kept as columns.

    Raises:
        ValueError: a member returning the wrong number of items.
    """
    counts = np.bincount(member, minlength=len(datasets)).tolist()
    first = int(member[0])
    if counts[first] == len(member):  # one member: no regrouping
        return fetch_items(datasets[first], local)
    order = np.argsort(member, kind="stable")
    parts: list[tuple[np.ndarray, Any]] = []
    start = 0
    for d, count in enumerate(counts):
        if not count:
            continue
        positions = order[start : start + count]
        start += count
        items = fetch_items(datasets[d], local[positions])
        parts.append((positions, check_item_count(items, count, f"datasets[{d}].__getitems__")))
    return _assemble(parts, len(member))


def _stackable(parts: list[tuple[np.ndarray, Any]]) -> bool:
    """True when all parts are BatchedItems whose columns concatenate like their rows stack."""
    if not all(isinstance(items, BatchedItems) for _, items in parts):
        return False
    columns = [items.columns for _, items in parts]
    if len({len(c) for c in columns}) != 1 or len({items.names for _, items in parts}) != 1:
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
        return BatchedItems(tuple(out), parts[0][1].names)
    return _rows(parts, size)


def _rows(parts: list[tuple[np.ndarray, Any]], size: int) -> list[Any]:
    rows: list[Any] = [None] * size
    for positions, items in parts:
        for p, item in zip(positions.tolist(), items, strict=True):
            rows[p] = item
    return rows
