"""Per-column statistics of an ``.ndf`` file, computed by streaming blocks of rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dataloader.cli._constants import CHUNK_BYTES
from dataloader.ndf import NdfFile

__all__ = ["ColumnStats", "block_rows", "column_stats"]

# Distinct label values tracked before giving up (info reports "many").
MAX_DISTINCT = 1000


@dataclass
class ColumnStats:
    """min, mean, max and NaN count of every column (features then labels).

    Arrays have shape ``(d + l,)``; min/max/mean ignore NaNs (NaN for a column
    that is all NaN).  ``distinct`` holds the sorted distinct values of the
    single label column when ``l == 1`` and there are at most
    ``MAX_DISTINCT`` of them, else None.
    """

    rows: int
    minimum: np.ndarray
    mean: np.ndarray
    maximum: np.ndarray
    nan_count: np.ndarray
    distinct: np.ndarray | None


def block_rows(d: int, l: int) -> int:  # noqa: E741
    """Rows per block so that one block is about ``CHUNK_BYTES`` of float64."""
    return max(1, CHUNK_BYTES // (8 * (d + l)))


def column_stats(file: NdfFile, on_block: Callable[[int], None] | None = None) -> ColumnStats:
    """Stream ``file`` (an ``NdfFile``) once, in blocks, and summarise every column.

    Memory: one block of rows (in the file's dtypes and as float64) plus a few
    ``(d + l,)`` arrays.
    """
    n, d, l = file.n, file.d, file.l
    cols = d + l
    block = block_rows(d, l)
    lo = np.full(cols, np.inf)
    hi = np.full(cols, -np.inf)
    total = np.zeros(cols)
    count = np.zeros(cols, dtype=np.int64)
    nans = np.zeros(cols, dtype=np.int64)
    distinct: set[float] | None = set() if l == 1 else None
    out_x = np.empty((block, d), file.x_dtype)
    out_y = np.empty((block, l), file.y_dtype)
    for start in range(0, n, block):
        k = min(block, n - start)
        xr, yr = file.read_rows(np.arange(start, start + k), out_x[:k], out_y[:k])
        # float64 for the sums (float16 and small ints would overflow); a block is
        # about CHUNK_BYTES of float64 whatever the file's dtypes
        x, y = xr.astype(np.float64, copy=False), yr.astype(np.float64, copy=False)
        for part, offset in ((x, 0), (y, d)):
            if part.shape[1] == 0:
                continue
            sl = slice(offset, offset + part.shape[1])
            bad = np.isnan(part)
            nan_here = bad.sum(axis=0)
            nans[sl] += nan_here
            count[sl] += k - nan_here
            if nan_here.any():
                part = np.where(bad, 0.0, part)
                total[sl] += part.sum(axis=0)
                lo[sl] = np.minimum(lo[sl], np.where(bad, np.inf, part).min(axis=0))
                hi[sl] = np.maximum(hi[sl], np.where(bad, -np.inf, part).max(axis=0))
            else:
                total[sl] += part.sum(axis=0)
                lo[sl] = np.minimum(lo[sl], part.min(axis=0))
                hi[sl] = np.maximum(hi[sl], part.max(axis=0))
        if distinct is not None:
            distinct.update(np.unique(y[~np.isnan(y)]).tolist())
            if len(distinct) > MAX_DISTINCT:
                distinct = None
        if on_block is not None:
            on_block(k)
    empty = count == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(empty, np.nan, total / np.maximum(count, 1))
    lo[empty] = np.nan
    hi[empty] = np.nan
    values = None if distinct is None or not distinct else np.array(sorted(distinct))
    return ColumnStats(n, lo, mean, hi, nans, values)
