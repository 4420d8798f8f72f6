"""How the lines of one CSV file are split and parsed (``dataloader.cli._read_csv`` reads the
file in blocks): ``split_line`` splits one line as ``numpy.loadtxt`` does, ``Dialect`` parses a
block of lines with ``numpy.loadtxt`` and, when that fails, names the first bad line and
column, and ``LazyFields`` gives a parsed block's text fields (for int64 read past 2**53).
"""

from __future__ import annotations

import csv

import numpy as np

from dataloader.cli._common import CliError

__all__ = ["Dialect", "LazyFields", "is_number", "split_line", "split_whitespace"]


def split_line(line: str, delimiter: str | None, where: str) -> list[str]:
    """Split one line (``delimiter=None``: on runs of whitespace); ``where`` names it in errors.

    Raises:
        CliError: the csv module cannot split it (e.g. a field over its 128 KiB limit).
    """
    if delimiter is None:
        return split_whitespace(line) if '"' in line else line.split()
    try:
        return next(csv.reader([line], delimiter=delimiter), [])
    except csv.Error as exc:
        raise CliError(f"{where}: {exc}") from None


def split_whitespace(line: str) -> list[str]:
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


def is_number(field: str) -> bool:
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


class Dialect:
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
            fields = split_line(line.rstrip("\r\n"), self.delimiter, f"{self.path}: line {line_no + i}")
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
                count = len(split_line(line.rstrip("\r\n"), delimiter, where))
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
            fields = split_line(line.rstrip("\r\n"), self.delimiter, where)
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # blank line: loadtxt skips it too
            if len(fields) != ncols:
                raise CliError(f"{where}: {len(fields)} columns, expected {ncols} (ragged row)")
            for j in used:
                value = fields[j]
                if not is_number(value):
                    shown = repr(value) if value.strip() else "an empty value"
                    raise CliError(
                        f"{where}, column {j} ({names[j]!r}): {shown} is not a number"
                    )


class LazyFields:
    """``fields(i)``: the fields of a block's data row ``i``, split on first use."""

    def __init__(self, dialect: Dialect, lines: list[str], line_no: int, nrows: int) -> None:
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
