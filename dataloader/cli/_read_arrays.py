"""Reading NumPy ``.npy`` and ``.npz`` arrays in blocks of rows.

``.npy``: ``numpy.load(mmap_mode="r")`` maps the file; blocks of rows are
copied out one at a time, so the file is never loaded whole (the kernel can
drop mapped pages already read).  Features of shape ``(n,)`` become one
column, ``(n, a, b, ...)`` is flattened to ``a * b * ...`` columns.

``.npz``: the archive's members are streamed with ``zipfile`` (compressed or
not), reading the ``.npy`` header and then one block of rows at a time.  A
member stored in Fortran order cannot be streamed by rows and is loaded whole.
Which members are used: ``--features NAME`` (default: the first of ``x``,
``X``, ``features``, ``data`` present, or the only member) and ``--labels
NAME`` (default: the first of ``y``, ``Y``, ``labels``, ``target``, or none).
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Iterator, Sequence
from typing import IO, Any

import numpy as np

from dataloader.cli._common import CliError
from dataloader.cli._constants import CHUNK_BYTES
from dataloader.cli._source import (
    Chunk,
    Source,
    check_numeric_dtype,
    feature_columns,
    resolve_columns,
    take_columns,
)

__all__ = ["FEATURE_NAMES", "LABEL_NAMES", "open_npy", "open_npz"]

FEATURE_NAMES = ("x", "X", "features", "data")
LABEL_NAMES = ("y", "Y", "labels", "target")


def _load_npy(path: str, what: str) -> np.ndarray:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except OSError as exc:
        raise CliError(f"cannot open {path}: {exc.strerror or exc}") from None
    except (ValueError, EOFError) as exc:  # object arrays, bad magic, truncated, empty file
        raise CliError(f"{path}: not a numeric .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray):
        raise CliError(f"{path}: is an .npz archive, not an .npy array")
    check_numeric_dtype(arr.dtype, path, what)
    if arr.ndim == 0:
        raise CliError(f"{path}: {what} is a 0-d array; expected shape (n, ...)")
    return arr


def _columns(shape: Sequence[int]) -> int:
    return math.prod(shape[1:]) if len(shape) > 1 else 1


def _block_rows(row_cols: int) -> int:
    return max(1, CHUNK_BYTES // (8 * max(row_cols, 1)))


def open_npy(path: str, labels_path: str | None, label_tokens: Sequence[str]) -> Source:
    """Features from ``path`` (and labels from ``labels_path``, another ``.npy``).

    ``label_tokens`` (integer column positions) take label columns out of the
    features array instead.

    Raises:
        CliError: unreadable or non-numeric arrays, a 0-d array, labels whose
            length differs from the features', or bad label columns.
    """
    x = _load_npy(path, "features")
    y = _load_npy(labels_path, "labels") if labels_path is not None else None
    n = x.shape[0]
    if y is not None and y.shape[0] != n:
        raise CliError(f"{labels_path}: {y.shape[0]} labels for {n} feature rows in {path}")
    if y is not None and label_tokens:
        raise CliError("give labels either as --labels FILE or as --label-columns, not both")
    ncols = _columns(x.shape)
    if ncols == 0:
        raise CliError(f"{path}: features of shape {x.shape} have no columns")
    labels = resolve_columns(label_tokens, None, ncols, path)
    features = feature_columns(ncols, labels, path)
    l = len(labels) if labels else (_columns(y.shape) if y is not None else 0)  # noqa: E741
    block = _block_rows(ncols + l)

    def chunks() -> Iterator[Chunk]:
        for start in range(0, n, block):
            stop = min(n, start + block)
            rows = np.asarray(x[start:stop]).reshape(stop - start, ncols)
            xs, ys = take_columns(rows, features, labels)
            if y is not None:
                ys = np.asarray(y[start:stop]).reshape(stop - start, -1)
            yield xs, ys, stop - start

    return Source(path, ncols - len(labels), l, n, "rows", chunks)


class _Member:
    """One ``.npy`` member of an ``.npz`` archive, streamed in blocks of rows."""

    def __init__(self, archive: zipfile.ZipFile, name: str, path: str) -> None:
        self.path, self.name = path, name
        try:
            self.file: IO[bytes] = archive.open(name + ".npy")
            version = np.lib.format.read_magic(self.file)
            if version == (1, 0):
                header: Any = np.lib.format.read_array_header_1_0(self.file)
            else:
                header = np.lib.format.read_array_header_2_0(self.file)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise CliError(f"{path}: cannot read member {name!r}: {exc}") from None
        self.shape, self.fortran, self.dtype = header
        check_numeric_dtype(self.dtype, path, f"array {name!r}")
        if len(self.shape) == 0:
            raise CliError(f"{path}: array {name!r} is 0-d; expected shape (n, ...)")
        self.cols = _columns(self.shape)
        self.row_bytes = self.cols * self.dtype.itemsize
        self._whole: np.ndarray | None = None
        if self.fortran and len(self.shape) > 1:
            try:
                self._whole = np.lib.format.read_array(
                    archive.open(name + ".npy"), allow_pickle=False
                )
            except (OSError, ValueError) as exc:
                raise CliError(f"{path}: cannot read member {name!r}: {exc}") from None

    def rows(self, start: int, stop: int) -> np.ndarray:
        if self._whole is not None:
            return np.asarray(self._whole[start:stop]).reshape(stop - start, self.cols)
        want = (stop - start) * self.row_bytes
        try:
            data = self.file.read(want)
        except (OSError, EOFError, zipfile.BadZipFile) as exc:
            raise CliError(
                f"{self.path}: cannot read member {self.name!r} at row {start}: {exc}"
            ) from None
        if len(data) != want:
            raise CliError(f"{self.path}: member {self.name!r} is truncated at row {start}")
        return np.frombuffer(data, dtype=self.dtype).reshape(stop - start, self.cols)


def _pick(
    names: list[str], given: str | None, defaults: Sequence[str], path: str, what: str
) -> str | None:
    if given is not None:
        if given not in names:
            raise CliError(f"{path}: no array named {given!r} (arrays: {', '.join(names)})")
        return given
    return next((c for c in defaults if c in names), None)


def _array_names(
    path: str, names: list[str], features: str | None, labels: str | None, label_tokens: Sequence[str]
) -> tuple[str, str | None]:
    """The archive's features array and labels array (None: no labels array), as named or
    found by their usual names.

    Raises:
        CliError: no features array can be told, labels are given twice, or both are one array.
    """
    fname = _pick(names, features, FEATURE_NAMES, path, "features")
    if fname is None:
        if len(names) != 1:
            raise CliError(
                f"{path}: which array holds the features? pass --features NAME "
                f"(arrays: {', '.join(names) or 'none'})"
            )
        fname = names[0]
    lname = _pick(names, labels, LABEL_NAMES, path, "labels")
    if lname is not None and label_tokens:
        if labels is not None:
            raise CliError(
                "give labels either as --labels NAME or as --label-columns, not both"
            )
        lname = None  # --label-columns takes the labels out of the features instead
    if lname == fname:
        raise CliError(f"{path}: features and labels are the same array {fname!r}")
    return fname, lname


def open_npz(
    path: str, features: str | None, labels: str | None, label_tokens: Sequence[str]
) -> Source:
    """Features (and labels) from named arrays of an ``.npz`` archive; see the module docstring.

    Raises:
        CliError: unreadable archive, missing or non-numeric arrays, lengths
            that differ, or bad label columns.
    """
    try:
        archive = zipfile.ZipFile(path)
    except OSError as exc:
        raise CliError(f"cannot open {path}: {exc.strerror or exc}") from None
    except zipfile.BadZipFile:
        raise CliError(f"{path}: is not an .npz (zip) archive") from None
    try:
        names = [m[:-4] for m in archive.namelist() if m.endswith(".npy")]
        fname, lname = _array_names(path, names, features, labels, label_tokens)
        x = _Member(archive, fname, path)
        y = _Member(archive, lname, path) if lname is not None else None
        n = x.shape[0]
        if y is not None and y.shape[0] != n:
            raise CliError(f"{path}: {y.shape[0]} labels in {lname!r} for {n} rows in {fname!r}")
        if x.cols == 0:
            raise CliError(f"{path}: array {fname!r} of shape {x.shape} has no columns")
        label_cols = resolve_columns(label_tokens, None, x.cols, path)
        feature_cols = feature_columns(x.cols, label_cols, path)
    except BaseException:
        archive.close()
        raise
    l = len(label_cols) if label_cols else (y.cols if y is not None else 0)  # noqa: E741
    block = _block_rows(x.cols + l)

    def chunks() -> Iterator[Chunk]:
        for start in range(0, n, block):
            stop = min(n, start + block)
            xs, ys = take_columns(x.rows(start, stop), feature_cols, label_cols)
            if y is not None:
                ys = y.rows(start, stop)
            yield xs, ys, stop - start

    return Source(path, x.cols - len(label_cols), l, n, "rows", chunks, archive.close)
