"""A table being read chunk by chunk: what ``convert`` needs from every input format."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from dataloader.cli._common import CliError

__all__ = ["Chunk", "Source", "check_numeric_dtype", "resolve_columns"]

# (x rows (k, d) float64, y rows (k, l) float64 or None, progress units consumed)
Chunk = tuple[np.ndarray, "np.ndarray | None", int]


@dataclass
class Source:
    """An input table.

    Attributes:
        path: the input file (for messages).
        d: feature columns.
        l: label columns (0 = none).
        progress_total: units of the progress bar (rows or bytes), or None.
        progress_unit: ``"rows"`` or ``"B"``.
        chunks: a callable returning an iterator of ``(x, y, advance)``; it
            raises :class:`CliError` naming the file, row and column of bad data.
        close: releases open files.
    """

    path: str
    d: int
    l: int  # noqa: E741
    progress_total: int | None
    progress_unit: str
    chunks: Callable[[], Iterator[Chunk]]
    close: Callable[[], None] = field(default=lambda: None)
    names: Sequence[str] = ()


def check_numeric_dtype(dtype: np.dtype, path: str, what: str) -> None:
    """Accept booleans, integers and floats; reject anything else with a one-line error."""
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise CliError(
            f"{path}: {what} has dtype {dtype} which is not numeric "
            "(expected booleans, integers or floats)"
        )


def resolve_columns(
    tokens: Sequence[str], names: Sequence[str] | None, ncols: int, path: str
) -> list[int]:
    """Column positions for ``--label-columns`` tokens: header names first, then integers.

    Raises:
        CliError: an unknown name, an index outside ``[-ncols, ncols)``, a
            duplicate, or no feature column left.
    """
    out: list[int] = []
    for tok in tokens:
        if names is not None and tok in names:
            j = list(names).index(tok)
        else:
            try:
                j = int(tok)
            except ValueError:
                known = ", ".join(repr(n) for n in list(names or [])[:12])
                more = "" if names is None or len(names) <= 12 else f", ... ({len(names)} columns)"
                raise CliError(
                    f"{path}: no column named {tok!r} (columns: {known}{more})"
                ) from None
            if not -ncols <= j < ncols:
                raise CliError(f"{path}: label column {j} is out of range for {ncols} columns")
            j %= ncols
        if j in out:
            raise CliError(f"{path}: label column {tok!r} is given twice")
        out.append(j)
    if len(out) >= ncols:
        raise CliError(
            f"{path}: every column is a label column; at least one feature column is needed"
        )
    return out


def split_columns(rows: np.ndarray, labels: list[int]) -> tuple[np.ndarray, np.ndarray | None]:
    """Split a (k, ncols) block into features and labels (label columns in ``labels`` order)."""
    if not labels:
        return rows, None
    ncols = rows.shape[1]
    if labels == list(range(ncols - len(labels), ncols)):  # the usual case: labels last
        return rows[:, : ncols - len(labels)], rows[:, ncols - len(labels) :]
    keep = np.ones(ncols, dtype=bool)
    keep[labels] = False
    return rows[:, keep], rows[:, labels]
