"""Reading a numeric CSV file in blocks of lines (``.csv`` or gzip-compressed ``.csv.gz``).

After ``skip_rows`` lines (skipped unread), the first line is either a header
of column names or the first row of data.  ``header=None`` decides from the
line itself: all numbers means data (columns are then positions 0..), anything
else a header; the decision goes to ``Source.notes`` so that ``convert`` prints
it, and no numeric row is ever dropped silently.  Blocks of at most
``CSV_CHUNK_ROWS`` lines and about ``CSV_CHUNK_CHARS`` characters (whichever
comes first; one line when a line is longer) are parsed by ``numpy.loadtxt`` (C
code), only the columns kept; only when a block fails is it scanned again line
by line with the ``csv`` module (or ``str.split`` for whitespace-separated
input), to name the exact line and column of the first bad value.  Memory holds
one block, whatever the file's size or the width of its rows.  Values are
parsed as float64, except that a part stored as int64 reads its integers past
2**53 exactly from their text (``dataloader.cli._exact_ints``).
"""

from __future__ import annotations

import functools
import gzip
import io
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataloader.cli._common import CliError
from dataloader.cli._constants import CSV_CHUNK_CHARS, CSV_CHUNK_ROWS
from dataloader.cli._csv_lines import Dialect, LazyFields, is_number, split_line
from dataloader.cli._exact_ints import exact_int_part, needs_exact_ints
from dataloader.cli._source import Chunk, Source, feature_columns, resolve_columns, take_columns

__all__ = ["open_csv"]

_READ_ERRORS = (OSError, UnicodeDecodeError, EOFError, zlib.error)


def _open_text(path: str) -> tuple[io.BufferedReader, io.TextIOWrapper]:
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by Source.close
    except OSError as exc:
        raise CliError(f"cannot open {path}: {exc.strerror or exc}") from None
    stream: io.BufferedReader | gzip.GzipFile = raw
    if path.endswith(".gz"):
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    return raw, io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")


def _read_first_line(
    text: io.TextIOWrapper, path: str, skip_rows: int, header: bool | None
) -> str:
    """Skip ``skip_rows`` lines and return the next one (the header or first data line)."""
    try:
        for skipped in range(skip_rows):
            if not text.readline():
                raise CliError(
                    f"{path}: has only {skipped} lines; --skip-rows {skip_rows} skips them all"
                )
        first = text.readline()
    except _READ_ERRORS as exc:
        raise CliError(f"{path}: cannot read: {exc}") from None
    if not first.strip():
        after = f" after --skip-rows {skip_rows}" if skip_rows else ""
        if header is not False:
            raise CliError(f"{path}: is empty{after} (expected a header line or data)")
        raise CliError(f"{path}: is empty{after}")
    return first


def _read_block(
    text: io.TextIOWrapper, carry: list[str], max_lines: int, max_chars: int
) -> tuple[list[str], list[str]]:
    """The next block of lines, and the lines read past it (the next block's first).

    A block ends at ``max_lines`` lines or once it holds ``max_chars`` characters,
    whichever comes first (it holds at least one line, however long).  The lines
    are read by ``readlines(hint)`` (C code) with the hint capped at the lines still
    wanted times the mean length so far, so few lines are read past the block.
    """
    lines = list(carry)
    if not lines:
        first = text.readline()
        if not first:
            return [], []
        lines.append(first)
    size = sum(map(len, lines))
    while len(lines) < max_lines and size < max_chars:
        want = min(max_chars - size, (max_lines - len(lines)) * max(1, size // len(lines)))
        more = text.readlines(want)
        if not more:
            break
        lines += more
        size += sum(map(len, more))
    return lines[:max_lines], lines[max_lines:]


def open_csv(
    path: str,
    label_tokens: Sequence[str],
    header: bool | None = None,
    delimiter: str | None = ",",
    chunk_rows: int = CSV_CHUNK_ROWS,
    skip_rows: int = 0,
    columns: Sequence[str] | None = None,
    drop_columns: Sequence[str] | None = None,
    chunk_chars: int = CSV_CHUNK_CHARS,
    x_dtype: str = "float64",
    y_dtype: str = "float64",
) -> Source:
    """Open a CSV table for ``convert``.

    Args:
        path: ``.csv`` file, or ``.csv.gz`` (gzip).
        label_tokens: label columns: an integer is a position (negative counts
            from the end), ``name:X`` the header column ``X``, another token a name.
        header: the first line (after ``skip_rows``) names the columns (True), is
            data (False), or ``None``: data when every field is a number.
        delimiter: one character, or ``None`` for runs of whitespace.
        chunk_rows: lines parsed per block, at most.
        skip_rows: lines skipped at the start of the file, before the header.
        columns: tokens of the feature columns to keep, in this order (the label
            columns are kept too); ``None`` keeps all.  Columns not kept are never
            parsed.
        drop_columns: tokens of columns to leave out (not label columns); not
            with ``columns``.
        chunk_chars: characters of text parsed per block, about (a block ends
            at the line that reaches it): bounds memory for wide rows.
        x_dtype, y_dtype: the dtypes the features and labels will be stored as:
            for int64, integers past 2**53 are read exactly (else through float64).

    Raises:
        CliError: unreadable file, no header line where names are used, an
            unknown column, a label column also dropped; while iterating: a ragged or non-numeric
            line (file, line and column named).
        ConversionError: while iterating, a value of a part stored as int64 that is not a
            whole number in its range, past 2**53 (its data row and column named).
    """
    raw, text = _open_text(path)

    def close() -> None:
        text.close()
        raw.close()  # a GzipFile does not close the file it was given

    try:
        first, first_line_no, header, names, labels, features, notes = _read_header(
            text, path, skip_rows, header, delimiter, label_tokens, columns, drop_columns
        )
    except BaseException:
        close()
        raise
    dialect, cols = _block_layout(path, delimiter, names, features, labels, x_dtype, y_dtype)
    start = (first_line_no + (1 if header else 0), [] if header else [first])
    chunks = functools.partial(_chunks, text, raw, dialect, cols, start, chunk_rows, chunk_chars)
    feature_names, label_names = ([names[j] for j in features], [names[j] for j in labels]) if header else (None, None)
    return Source(path, len(features), len(labels), os.fstat(raw.fileno()).st_size, "B", chunks, close, names,
                  notes, feature_names, label_names)


def _read_header(
    text: Any, path: str, skip_rows: int, header: bool | None, delimiter: str | None,
    label_tokens: Sequence[str], columns: Sequence[str] | None, drop_columns: Sequence[str] | None,
) -> tuple[str, int, bool, list[str], list[int], list[int], list[str]]:
    """The first line (after ``skip_rows``) and what it decides: ``(first line, its number,
    header, column names, label columns, feature columns, notes)`` (``open_csv``'s rules).

    Raises:
        CliError: as ``open_csv``, for the first line and the columns.
    """
    first = _read_first_line(text, path, skip_rows, header)
    first_line_no = skip_rows + 1
    where = f"{path}: line {first_line_no}"
    first_fields = [f.strip() for f in split_line(first.rstrip("\r\n"), delimiter, where)]
    notes: list[str] = []
    header = _decide_header(path, first_fields, first_line_no, header, notes)
    names = first_fields if header else [str(j) for j in range(len(first_fields))]
    labels, features = _pick_columns(path, names, header, label_tokens, columns, drop_columns, notes)
    if labels:
        picked = ", ".join(f"{j} ({names[j]!r})" if header else str(j) for j in labels)
        notes.append(f"label columns: {picked}")
    return first, first_line_no, header, names, labels, features, notes


def _block_layout(
    path: str, delimiter: str | None, names: list[str], features: list[int], labels: list[int],
    x_dtype: str, y_dtype: str,
) -> tuple[Dialect, _Columns]:
    """How each block of lines is parsed (only the used columns, when some are not) and cut
    into features and labels."""
    used = sorted(features + labels)
    block_pos = {j: i for i, j in enumerate(used)}  # a file column's place in a parsed block
    cols = _Columns(
        features=features, labels=labels, x_dtype=x_dtype, y_dtype=y_dtype,
        exact_x=needs_exact_ints(x_dtype), exact_y=bool(labels) and needs_exact_ints(y_dtype),
        block_features=[block_pos[j] for j in features], block_labels=[block_pos[j] for j in labels],
    )
    return Dialect(path, delimiter, names, None if len(used) == len(names) else used), cols


def _decide_header(path: str, fields: list[str], line_no: int, header: bool | None, notes: list[str]) -> bool:
    """``header`` as given, or decided from the first line (``fields``): a header unless every
    field is a number; the decision is noted (a numeric first row is never dropped silently)."""
    if header is not None:
        return header
    ncols = len(fields)
    header = not all(f and is_number(f) for f in fields)
    if header:
        shown = ", ".join(repr(f) for f in fields[:8])
        more = "" if ncols <= 8 else f", ... ({ncols} columns)"
        notes.append(f"{path}: line {line_no} is a header ({shown}{more}); pass --no-header if it is data")
    else:
        notes.append(
            f"{path}: line {line_no} is all numbers, so it is data and there is no "
            f"header (columns are positions 0..{ncols - 1}); pass --header if it names them"
        )
    return header


def _pick_columns(
    path: str, names: list[str], header: bool, label_tokens: Sequence[str],
    columns: Sequence[str] | None, drop_columns: Sequence[str] | None, notes: list[str],
) -> tuple[list[int], list[int]]:
    """``(label positions, feature positions)`` from the options (see ``open_csv``).

    Raises:
        CliError: an unknown or ambiguous column, a label column also dropped.
    """
    ncols = len(names)
    header_names = names if header else None
    labels = resolve_columns(label_tokens, header_names, ncols, path, notes=notes)
    keep = None
    if columns is not None:
        keep = resolve_columns(columns, header_names, ncols, path, "column", notes)
    elif drop_columns is not None:
        dropped = resolve_columns(drop_columns, header_names, ncols, path, "column", notes)
        both = [j for j in labels if j in dropped]
        if both:
            raise CliError(
                f"{path}: column {both[0]} ({names[both[0]]!r}) is both a label column "
                "and dropped by --drop-columns"
            )
        keep = [j for j in range(ncols) if j not in dropped]
    return labels, feature_columns(ncols, labels, path, keep)


@dataclass(frozen=True)
class _Columns:
    """The columns a block's rows are cut into: file positions, positions in a parsed block
    (only the used columns are parsed), and whether each part reads int64 exactly."""

    features: list[int]
    labels: list[int]
    block_features: list[int]
    block_labels: list[int]
    x_dtype: str
    y_dtype: str
    exact_x: bool
    exact_y: bool


def _chunks(
    text: Any, raw: Any, dialect: Dialect, cols: _Columns, start: tuple[int, list[str]],
    chunk_rows: int, chunk_chars: int,
) -> Iterator[Chunk]:
    """The file's ``(x, y, bytes read)`` blocks; ``start``: the first data line's 1-based
    number and the lines already read from there (the first line, when it is data)."""
    path = dialect.path
    line_no, carry = start  # 1-based number of the block's first line
    last_pos = 0
    done = 0  # data rows yielded
    while True:
        try:
            lines, carry = _read_block(text, carry, chunk_rows, chunk_chars)
        except _READ_ERRORS as exc:
            raise CliError(f"{path}: cannot read after line {line_no - 1}: {exc}") from None
        if not lines:
            return
        rows = dialect.parse_block(lines, line_no)
        if rows.shape[0]:
            x, y = take_columns(rows, cols.block_features, cols.block_labels)
            fields = LazyFields(dialect, lines, line_no, rows.shape[0])  # int64: past 2**53, from text
            if cols.exact_x:
                x = exact_int_part(x, lambda i, j: fields(i)[cols.features[j]], cols.x_dtype, done, "x_rows", path)
            if cols.exact_y and y is not None:
                y = exact_int_part(y, lambda i, j: fields(i)[cols.labels[j]], cols.y_dtype, done, "y_rows", path)
            done += rows.shape[0]
            pos = raw.tell()
            yield x, y, pos - last_pos
            last_pos = pos
        line_no += len(lines)
