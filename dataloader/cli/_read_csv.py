"""Reading a numeric CSV file in blocks of lines (``.csv`` or gzip-compressed ``.csv.gz``).

The first line names the columns (``--no-header``: columns are numbered from
0).  Blocks of ``CSV_CHUNK_ROWS`` lines are parsed by ``numpy.loadtxt`` (C
code); only when a block fails is it scanned again line by line with the
``csv`` module, to name the exact line and column of the first bad value.
Memory holds one block, whatever the file size.
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import os
import zlib
from collections.abc import Iterator, Sequence

import numpy as np

from dataloader.cli._common import CliError
from dataloader.cli._constants import CSV_CHUNK_ROWS
from dataloader.cli._source import Chunk, Source, resolve_columns, split_columns

__all__ = ["open_csv"]


def _open_text(path: str) -> tuple[io.BufferedReader, io.TextIOWrapper]:
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by Source.close
    except OSError as exc:
        raise CliError(f"cannot open {path}: {exc.strerror or exc}") from None
    stream: io.BufferedReader | gzip.GzipFile = raw
    if path.endswith(".gz"):
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    return raw, io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")


def _fields(line: str, delimiter: str, where: str) -> list[str]:
    """Split one line; ``where`` (file and line) names it in the error.

    Raises:
        CliError: the csv module cannot split it (e.g. a field over its 128 KiB limit).
    """
    try:
        return next(csv.reader([line], delimiter=delimiter), [])
    except csv.Error as exc:
        raise CliError(f"{where}: {exc}") from None


def open_csv(
    path: str,
    label_tokens: Sequence[str],
    header: bool = True,
    delimiter: str = ",",
    chunk_rows: int = CSV_CHUNK_ROWS,
) -> Source:
    """Open a CSV table for ``convert``.

    Args:
        path: ``.csv`` file, or ``.csv.gz`` (gzip).
        label_tokens: label columns, by header name or integer position
            (negative counts from the end).
        header: the first line names the columns.
        delimiter: one character.
        chunk_rows: lines parsed per block.

    Raises:
        CliError: unreadable file, no header, unknown label column; while
            iterating: a ragged or non-numeric line (file, line and column named).
    """
    raw, text = _open_text(path)
    try:
        try:
            first = text.readline()
        except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:
            raise CliError(f"{path}: cannot read: {exc}") from None
        if not first.strip():
            raise CliError(
                f"{path}: is empty (expected a header line)" if header else f"{path}: is empty"
            )
        first_fields = _fields(first.rstrip("\r\n"), delimiter, f"{path}: line 1")
        first_fields = [f.strip() for f in first_fields]
        ncols = len(first_fields)
        names = first_fields if header else [str(j) for j in range(ncols)]
        labels = resolve_columns(label_tokens, names if header else None, ncols, path)
    except BaseException:
        text.close()
        raw.close()
        raise
    size = os.fstat(raw.fileno()).st_size
    pending = [] if header else [first]

    def chunks() -> Iterator[Chunk]:
        line_no = 2 if header else 1  # 1-based number of the block's first line
        last_pos = 0
        lines = pending
        while True:
            try:
                lines = lines + list(itertools.islice(text, chunk_rows - len(lines)))
            except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:
                raise CliError(f"{path}: cannot read after line {line_no - 1}: {exc}") from None
            if not lines:
                return
            rows = _parse_block(lines, path, line_no, delimiter, names)
            if rows.shape[0]:
                x, y = split_columns(rows, labels)
                pos = raw.tell()
                yield x, y, pos - last_pos
                last_pos = pos
            line_no += len(lines)
            lines = []

    def close() -> None:
        text.close()
        raw.close()  # a GzipFile does not close the file it was given

    return Source(path, ncols - len(labels), len(labels), size, "B", chunks, close, names)


def _parse_block(
    lines: list[str], path: str, line_no: int, delimiter: str, names: list[str]
) -> np.ndarray:
    ncols = len(names)
    if not any(line.strip() for line in lines):  # only blank lines: loadtxt would warn
        return np.empty((0, ncols))
    try:
        rows = np.loadtxt(
            lines, delimiter=delimiter, dtype=np.float64, ndmin=2, comments=None, quotechar='"'
        )
    except ValueError as exc:
        _locate_error(lines, path, line_no, delimiter, names)
        raise CliError(f"{path}: lines {line_no}-{line_no + len(lines) - 1}: {exc}") from None
    if rows.shape[0] and rows.shape[1] != ncols:
        _locate_error(lines, path, line_no, delimiter, names)
        raise CliError(
            f"{path}: lines {line_no}-{line_no + len(lines) - 1}: "
            f"{rows.shape[1]} columns, expected {ncols}"
        )
    return rows


def _locate_error(
    lines: list[str], path: str, line_no: int, delimiter: str, names: list[str]
) -> None:
    """Raise a CliError naming the first ragged or non-numeric line of a failed block."""
    ncols = len(names)
    for i, line in enumerate(lines):
        where = f"{path}: line {line_no + i}"
        fields = _fields(line.rstrip("\r\n"), delimiter, where)
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue  # blank line: loadtxt skips it too
        if len(fields) != ncols:
            raise CliError(f"{where}: {len(fields)} columns, expected {ncols} (ragged row)")
        for j, value in enumerate(fields):
            try:
                float(value)
            except ValueError:
                shown = repr(value) if value.strip() else "an empty value"
                raise CliError(
                    f"{where}, column {j + 1} ({names[j]!r}): {shown} is not a number"
                ) from None
