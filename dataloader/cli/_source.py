"""A table being read chunk by chunk: what ``convert`` needs from every input format."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from dataloader.cli._common import CliError

__all__ = [
    "NAME_PREFIX",
    "Chunk",
    "Source",
    "check_numeric_dtype",
    "feature_columns",
    "resolve_columns",
    "take_columns",
]

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
        names: the column names (CSV header, or positions as strings).
        notes: what the reader decided on its own (header or not, which column
            a token picked), printed by ``convert`` unless ``--quiet``.
        feature_names, label_names: the names of the d feature and l label
            columns from a CSV header (kept in the .ndf file), or None.
    """

    path: str
    d: int
    l: int  # noqa: E741
    progress_total: int | None
    progress_unit: str
    chunks: Callable[[], Iterator[Chunk]]
    close: Callable[[], None] = field(default=lambda: None)
    names: Sequence[str] = ()
    notes: list[str] = field(default_factory=list)
    feature_names: Sequence[str] | None = None
    label_names: Sequence[str] | None = None


def check_numeric_dtype(dtype: np.dtype, path: str, what: str) -> None:
    """Accept booleans, integers and floats; reject anything else with a one-line error."""
    if dtype.kind not in "biuf" or dtype.fields is not None:
        raise CliError(
            f"{path}: {what} has dtype {dtype} which is not numeric "
            "(expected booleans, integers or floats)"
        )


#: ``--label-columns name:4`` names the column "4"; a bare ``4`` is always position 4.
NAME_PREFIX = "name:"


def resolve_columns(
    tokens: Sequence[str],
    names: Sequence[str] | None,
    ncols: int,
    path: str,
    what: str = "label column",
    notes: list[str] | None = None,
) -> list[int]:
    """Column positions for ``--label-columns`` (or ``--columns``) tokens.

    A token that parses as an integer is a position (negative from the end),
    even when a header column has that name; ``name:X`` is the column named
    ``X``; any other token is a name.  When a bare integer is also a header
    name at another position, a line saying which was taken goes to ``notes``.

    Raises:
        CliError: an unknown name (or a name without a header line), a name
            that several header columns have (their positions named), an index
            outside ``[-ncols, ncols)``, or a duplicate.
    """
    header = list(names) if names is not None else None
    out: list[int] = []
    for tok in tokens:
        name = tok[len(NAME_PREFIX) :] if tok.startswith(NAME_PREFIX) else None
        position = None
        if name is None:
            try:
                position = int(tok)
            except ValueError:
                name = tok
        if name is not None:
            if header is None or name not in header:
                raise CliError(_no_such_column(path, name, header, ncols))
            j = _named_column(header, name, path, what)
        else:
            assert position is not None
            if not -ncols <= position < ncols:
                hint = (
                    f" (write {NAME_PREFIX}{tok} for the column named {tok!r})"
                    if header is not None and tok in header
                    else ""
                )
                raise CliError(
                    f"{path}: {what} {position} is out of range for {ncols} columns{hint}"
                )
            j = position % ncols
            if notes is not None and header is not None and tok in header:
                if header.index(tok) != j:
                    notes.append(
                        f"{what} {tok} is position {tok} ({header[j]!r}), not the column named "
                        f"{tok!r} (position {header.index(tok)}); write {NAME_PREFIX}{tok} for that"
                    )
        if j in out:
            raise CliError(f"{path}: {what} {tok!r} is given twice")
        out.append(j)
    return out


def _named_column(header: list[str], name: str, path: str, what: str) -> int:
    """The position of the only header column named ``name``.

    Raises:
        CliError: several columns have that name (a header such as ``a,a,label``);
            taking the first would pick a column silently.
    """
    positions = [j for j, h in enumerate(header) if h == name]
    if len(positions) > 1:
        shown = ", ".join(str(j) for j in positions)
        raise CliError(
            f"{path}: {what} {name!r} is ambiguous: columns {shown} are all named {name!r}; "
            "give the position instead"
        )
    return positions[0]


def _no_such_column(path: str, name: str, header: list[str] | None, ncols: int) -> str:
    if header is None:
        return (
            f"{path}: no column named {name!r}: the file has no header line "
            f"(columns are positions 0..{ncols - 1})"
        )
    known = ", ".join(repr(n) for n in header[:12])
    more = "" if len(header) <= 12 else f", ... ({len(header)} columns)"
    return f"{path}: no column named {name!r} (columns: {known}{more})"


def feature_columns(
    ncols: int, labels: list[int], path: str, keep: list[int] | None = None
) -> list[int]:
    """Positions of the feature columns: ``keep`` (default: every column) minus ``labels``.

    Raises:
        CliError: no feature column left.
    """
    kept = list(range(ncols)) if keep is None else keep
    features = [j for j in kept if j not in labels]
    if not features:
        raise CliError(
            f"{path}: every column is a label column; at least one feature column is needed"
        )
    return features


def take_columns(
    rows: np.ndarray, features: list[int], labels: list[int]
) -> tuple[np.ndarray, np.ndarray | None]:
    """Features and labels of a ``(k, ncols)`` block, each in the order given."""
    ncols = rows.shape[1]
    nx = len(features)
    if features + labels == list(range(ncols)):  # the usual case: labels last, or none
        return rows[:, :nx], (rows[:, nx:] if labels else None)
    return rows[:, features], (rows[:, labels] if labels else None)

