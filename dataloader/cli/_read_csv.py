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

import csv
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


def _fields(line: str, delimiter: str | None, where: str) -> list[str]:
    """Split one line (``delimiter=None``: on runs of whitespace); ``where`` names it in errors.

    Raises:
        CliError: the csv module cannot split it (e.g. a field over its 128 KiB limit).
    """
    if delimiter is None:
        return _split_whitespace(line) if '"' in line else line.split()
    try:
        return next(csv.reader([line], delimiter=delimiter), [])
    except csv.Error as exc:
        raise CliError(f"{where}: {exc}") from None


def _split_whitespace(line: str) -> list[str]:
    """``line`` split on runs of white space as ``numpy.loadtxt(delimiter=None, quotechar='"')``
    splits it: a field that starts with ``"`` is quoted up to the next lone ``"`` (``""`` is a
    ``"``; white space inside belongs to it; unterminated: to the end of the line), and what
    follows the closing quote up to white space is appended (``"5"x``: ``5x``).  ``line.split()``
    split ``" 5 " 9007199254740993`` into four fields, and the exact int64 reading took ``5`` as
    the second column's value."""
    fields: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i].isspace():
            i += 1
        if i >= n:
            return fields
        chars: list[str] = []
        if line[i] == '"':
            i += 1
            while i < n:
                if line[i] == '"':
                    if i + 1 < n and line[i + 1] == '"':
                        chars.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                chars.append(line[i])
                i += 1
        while i < n and not line[i].isspace():
            chars.append(line[i])
            i += 1
        fields.append("".join(chars))


def _is_number(field: str) -> bool:
    """Whether ``numpy.loadtxt`` parses ``field`` as a float: ``float()`` less what it alone
    takes, ``_`` between digits and non-ASCII digits (``'1_0'``, ``'١٢'``, ``'１'``).  Otherwise
    a block failing on such a value named no line (numpy's message: 1-based column)."""
    if "_" in field or not field.isascii() and any(ch.isdecimal() and not ch.isascii() for ch in field):
        return False
    try:
        float(field)
    except ValueError:
        return False
    return True


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
    try:
        first = _read_first_line(text, path, skip_rows, header)
        first_line_no = skip_rows + 1
        where = f"{path}: line {first_line_no}"
        first_fields = [f.strip() for f in _fields(first.rstrip("\r\n"), delimiter, where)]
        notes: list[str] = []
        header = _decide_header(path, first_fields, first_line_no, header, notes)
        names = first_fields if header else [str(j) for j in range(len(first_fields))]
        labels, features = _pick_columns(path, names, header, label_tokens, columns, drop_columns, notes)
        if labels:
            picked = ", ".join(f"{j} ({names[j]!r})" if header else str(j) for j in labels)
            notes.append(f"label columns: {picked}")
    except BaseException:
        text.close()
        raw.close()
        raise
    dialect, cols = _block_layout(path, delimiter, names, features, labels, x_dtype, y_dtype)
    start = (first_line_no + (1 if header else 0), [] if header else [first])

    def chunks() -> Iterator[Chunk]:
        return _chunks(text, raw, dialect, cols, start, chunk_rows, chunk_chars)

    def close() -> None:
        text.close()
        raw.close()  # a GzipFile does not close the file it was given

    feature_names = [names[j] for j in features] if header else None
    label_names = [names[j] for j in labels] if header else None
    size = os.fstat(raw.fileno()).st_size
    return Source(path, len(features), len(labels), size, "B", chunks, close, names, notes,
                  feature_names, label_names)


def _block_layout(
    path: str, delimiter: str | None, names: list[str], features: list[int], labels: list[int],
    x_dtype: str, y_dtype: str,
) -> tuple[_Dialect, _Columns]:
    """How each block of lines is parsed (only the used columns, when some are not) and cut
    into features and labels."""
    used = sorted(features + labels)
    block_pos = {j: i for i, j in enumerate(used)}  # a file column's place in a parsed block
    cols = _Columns(
        features=features, labels=labels, x_dtype=x_dtype, y_dtype=y_dtype,
        exact_x=needs_exact_ints(x_dtype), exact_y=bool(labels) and needs_exact_ints(y_dtype),
        block_features=[block_pos[j] for j in features], block_labels=[block_pos[j] for j in labels],
    )
    return _Dialect(path, delimiter, names, None if len(used) == len(names) else used), cols


def _decide_header(path: str, fields: list[str], line_no: int, header: bool | None, notes: list[str]) -> bool:
    """``header`` as given, or decided from the first line (``fields``): a header unless every
    field is a number; the decision is noted (a numeric first row is never dropped silently)."""
    if header is not None:
        return header
    ncols = len(fields)
    header = not all(f and _is_number(f) for f in fields)
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
    text: Any, raw: Any, dialect: _Dialect, cols: _Columns, start: tuple[int, list[str]],
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
            fields = _LazyFields(dialect, lines, line_no, rows.shape[0])  # int64: past 2**53, from text
            if cols.exact_x:
                x = exact_int_part(x, lambda i, j: fields(i)[cols.features[j]], cols.x_dtype, done, "x_rows", path)
            if cols.exact_y and y is not None:
                y = exact_int_part(y, lambda i, j: fields(i)[cols.labels[j]], cols.y_dtype, done, "y_rows", path)
            done += rows.shape[0]
            pos = raw.tell()
            yield x, y, pos - last_pos
            last_pos = pos
        line_no += len(lines)


class _Dialect:
    """How the lines of one file are parsed: delimiter, column names, columns kept."""

    def __init__(
        self, path: str, delimiter: str | None, names: list[str], usecols: list[int] | None
    ) -> None:
        self.path = path
        self.delimiter = delimiter
        self.names = names
        self.usecols = usecols

    def parse_block(self, lines: list[str], line_no: int) -> np.ndarray:
        """Parse a block of lines (first one numbered ``line_no``) into float64 rows."""
        path, ncols = self.path, len(self.names)
        width = ncols if self.usecols is None else len(self.usecols)
        if not any(line.strip() for line in lines):  # only blank lines: loadtxt would warn
            return np.empty((0, width))
        span = f"{path}: lines {line_no}-{line_no + len(lines) - 1}"
        try:
            rows = np.loadtxt(
                lines,
                delimiter=self.delimiter,
                dtype=np.float64,
                ndmin=2,
                comments=None,
                quotechar='"',
                usecols=self.usecols,
            )
        except ValueError as exc:
            # loadtxt skips empty lines only; one of white space ("  ", "\t", NBSP) is blank
            # here too (row_fields, locate_error): parse again with those emptied.
            blanked = [line if line.strip() else "" for line in lines]
            if blanked != lines:
                return self.parse_block(blanked, line_no)
            self.locate_error(lines, line_no)
            raise CliError(f"{span}: {exc}") from None
        if rows.shape[0] and rows.shape[1] != width:
            self.locate_error(lines, line_no)
            raise CliError(f"{span}: {rows.shape[1]} columns, expected {ncols}")
        if self.usecols is not None:  # loadtxt does not see extra columns it does not use
            self.check_widths(lines, line_no)
        return rows

    def row_fields(self, lines: list[str], line_no: int) -> list[list[str]]:
        """The fields of each data row of a parsed block (blank lines skipped, as loadtxt does)."""
        rows = []
        for i, line in enumerate(lines):
            fields = _fields(line.rstrip("\r\n"), self.delimiter, f"{self.path}: line {line_no + i}")
            if fields and not (len(fields) == 1 and not fields[0].strip()):
                rows.append(fields)
        return rows

    def check_widths(self, lines: list[str], line_no: int) -> None:
        """Raise a CliError naming the first line whose number of fields is not ``ncols``."""
        ncols, delimiter = len(self.names), self.delimiter
        for i, line in enumerate(lines):
            if delimiter is not None and '"' not in line:
                count = line.count(delimiter) + 1  # fast path: no quoted delimiter possible
            else:
                where = f"{self.path}: line {line_no + i}"
                count = len(_fields(line.rstrip("\r\n"), delimiter, where))
            if count != ncols and line.strip():
                raise CliError(
                    f"{self.path}: line {line_no + i}: {count} columns, expected {ncols} "
                    "(ragged row)"
                )

    def locate_error(self, lines: list[str], line_no: int) -> None:
        """Raise a CliError naming the first ragged or non-numeric line of a failed block."""
        ncols, names = len(self.names), self.names
        used = range(ncols) if self.usecols is None else self.usecols
        for i, line in enumerate(lines):
            where = f"{self.path}: line {line_no + i}"
            fields = _fields(line.rstrip("\r\n"), self.delimiter, where)
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line: loadtxt skips it too
            if len(fields) != ncols:
                raise CliError(f"{where}: {len(fields)} columns, expected {ncols} (ragged row)")
            for j in used:
                value = fields[j]
                if not _is_number(value):
                    shown = repr(value) if value.strip() else "an empty value"
                    raise CliError(
                        f"{where}, column {j} ({names[j]!r}): {shown} is not a number"
                    )


class _LazyFields:
    """``fields(i)``: the fields of a block's data row ``i``, split on first use."""

    def __init__(self, dialect: _Dialect, lines: list[str], line_no: int, nrows: int) -> None:
        self.dialect, self.lines, self.line_no, self.nrows = dialect, lines, line_no, nrows
        self.rows: list[list[str]] | None = None

    def __call__(self, i: int) -> list[str]:
        if self.rows is None:
            self.rows = self.dialect.row_fields(self.lines, self.line_no)
            last = self.line_no + len(self.lines) - 1
            if len(self.rows) != self.nrows:  # loadtxt skipped what row_fields kept, or the reverse
                raise CliError(f"{self.dialect.path}: lines {self.line_no}-{last}: {len(self.rows)} rows of "
                               f"text for {self.nrows} parsed: cannot read its integers past 2**53 exactly")
            ncols = len(self.dialect.names)
            for k, fields in enumerate(self.rows):  # split otherwise than loadtxt: a column's text is another's
                if len(fields) != ncols:
                    raise CliError(f"{self.dialect.path}: lines {self.line_no}-{last}: data row {k} of the block "
                                   f"splits into {len(fields)} fields, not {ncols}: cannot read its integers "
                                   "past 2**53 exactly")
        return self.rows[i]
