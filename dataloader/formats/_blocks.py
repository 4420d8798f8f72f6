"""``Blocks``: a row group's NumPy columns stacked by dtype, so that a batch gathers each block
(e.g. all float64 columns) with one ``take`` per row group instead of one per column."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Blocks", "gather", "stack_columns"]

_STACKED_KINDS = "biufcmM"  # fixed-width: columns of one dtype and row shape stack into a block


@dataclass(frozen=True)
class Blocks:
    """Columns ``0..n-1`` of one row group: block ``b`` is ``arrays[b]`` of shape
    ``(len(layout[b]), rows, *row_shape)`` holding the columns ``layout[b]`` (in that order);
    ``signature`` is equal for two row groups whose blocks line up (same layout and dtypes).
    Immutable; read by many threads."""

    layout: tuple[tuple[int, ...], ...]
    arrays: tuple[np.ndarray, ...]
    signature: tuple[Any, ...]

    def column(self, k: int) -> np.ndarray:
        """Column ``k``, shape ``(rows, *row_shape)`` (a view of its block)."""
        for ks, a in zip(self.layout, self.arrays, strict=True):
            if k in ks:
                return a[ks.index(k)]
        raise IndexError(k)


def stack_columns(columns: tuple[np.ndarray, ...]) -> Blocks:
    """``columns`` (each ``(rows, ...)``) as ``Blocks``: fixed-width columns of one dtype and
    row shape stacked (a copy, made once per row group); any other column a block of its own
    (a view)."""
    groups: dict[Any, list[int]] = {}
    for k, c in enumerate(columns):
        key = (c.dtype, c.shape[1:]) if c.dtype.kind in _STACKED_KINDS else k
        groups.setdefault(key, []).append(k)
    layout = tuple(tuple(ks) for ks in groups.values())
    arrays = tuple(
        np.stack([columns[k] for k in ks]) if len(ks) > 1 else columns[ks[0]][None] for ks in layout
    )
    signature = (layout, tuple((a.dtype, a.shape[2:]) for a in arrays))
    return Blocks(layout, arrays, signature)


def gather(pieces: list[tuple[np.ndarray, Blocks, np.ndarray]], size: int, ncols: int) -> tuple[np.ndarray, ...]:
    """The ``ncols`` columns of a batch of ``size`` rows: each piece ``(positions, blocks,
    local)`` puts rows ``local`` of its row group at ``positions`` of the batch.  Columns are
    C-contiguous ``(size, ...)`` (rows of a shared block); row groups whose blocks differ
    (a column ``object`` in one, ``int64`` in another) are gathered column by column, their
    dtypes promoted as NumPy stacks them."""
    first = pieces[0][1]
    if any(blocks.signature != first.signature for _, blocks, _ in pieces):
        return _by_column(pieces, size, ncols)
    out: list[np.ndarray] = [np.empty(0)] * ncols
    whole = len(pieces) == 1 and np.array_equal(pieces[0][0], np.arange(size))
    for b, ks in enumerate(first.layout):
        if whole:
            block = first.arrays[b][:, pieces[0][2]]
        else:
            a = first.arrays[b]
            block = np.empty((a.shape[0], size, *a.shape[2:]), dtype=a.dtype)
            for positions, blocks, local in pieces:
                block[:, positions] = blocks.arrays[b][:, local]
        for j, k in enumerate(ks):
            out[k] = block[j]
    return tuple(out)


def _by_column(pieces: list[tuple[np.ndarray, Blocks, np.ndarray]], size: int, ncols: int) -> tuple[np.ndarray, ...]:
    out = []
    for k in range(ncols):
        cols = [blocks.column(k)[local] for _, blocks, local in pieces]
        col = np.empty((size, *cols[0].shape[1:]), dtype=np.result_type(*cols))
        for (positions, _, _), c in zip(pieces, cols, strict=True):
            col[positions] = c
        out.append(col)
    return tuple(out)
