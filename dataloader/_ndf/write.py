"""Writing `.ndf` row files: save_ndf and the chunked, atomic NdfWriter.

A file is written under a temporary name in the destination directory
(``.<name>.<random>.tmp``), with a placeholder header (n = 0).  On a
successful close the real n is patched into the header, the file is
fsync'ed and renamed over ``path`` with ``os.replace`` (atomic on POSIX),
then the directory is fsync'ed.  Any failure (or leaving the ``with`` block
by an exception) removes the temporary file, so ``path`` is either absent,
its previous version, or a complete file: never a half-written one.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._ndf.format import (
    NDF_MAX_FILE_BYTES,
    WRITE_CHUNK_BYTES,
    ConversionError,
    Layout,
    as_dtype,
    as_real_array,
    pack_header,
    version_for,
)

__all__ = ["NdfWriter", "save_ndf"]


def _discard(file: Any, tmp_path: str) -> None:
    """Close and delete an unfinished temporary file (errors ignored)."""
    try:
        file.close()
    except OSError:
        pass
    try:
        os.unlink(tmp_path)
    except OSError:
        pass


class NdfWriter:
    """Write an `.ndf` file chunk by chunk, so it may be larger than RAM.

    Use as a context manager; rows appear under ``path`` only after a
    successful close::

        with NdfWriter("train.ndf", d=32, l=1) as w:
            for x_chunk, y_chunk in chunks:
                w.append(x_chunk, y_chunk)

    Rows are converted to the file's little-endian dtypes in blocks of at most
    WRITE_CHUNK_BYTES (16 MiB), so memory use does not grow with the file.
    Thread-safety: append/close/abort take an internal lock, so calls from
    several threads are serialised (rows of one append stay together).

    Args:
        path: destination file; its directory must exist.  An existing file
            is replaced atomically on close.
        d: features per row, >= 1.
        l: labels per row, >= 0 (0 = no labels).
        x_dtype, y_dtype: the dtypes the features and the labels are stored
            (and read back) as: float64 (default), float32, float16, int64,
            int32, int16, int8 or uint8.  ``x_dtype=np.float32,
            y_dtype=np.int64`` is what a torch model and ``CrossEntropyLoss``
            take.
        feature_names, label_names: d and l column names kept in the file
            (``NdfFile.feature_names``), or None.

    The file is format version 1 (the seed's) when both dtypes are float64 and
    no names are given, version 2 otherwise (see ``dataloader.ndf``).

    Attributes:
        path, d, l, x_dtype, y_dtype, feature_names, label_names: as given
        (names as tuples).  n: rows appended so far.

    Raises:
        TypeError: d or l not an integer, a dtype not in the list above, names
            that are not strings.
        ValueError: d < 1, l < 0, names not d (l) of them, or one row does not
            fit 63-bit file offsets.
        OSError: the temporary file cannot be created.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        d: int,
        l: int = 0,  # noqa: E741
        *,
        x_dtype: Any = np.float64,
        y_dtype: Any = np.float64,
        feature_names: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
    ) -> None:
        self.d = _as_count(d, "d", minimum=1)
        self.l = _as_count(l, "l", minimum=0)
        self.x_dtype = as_dtype(x_dtype, "x_dtype")
        self.y_dtype = as_dtype(y_dtype, "y_dtype")
        self.feature_names = _as_names(feature_names, self.d, "feature_names")
        self.label_names = _as_names(label_names, self.l, "label_names")
        version = version_for(self.x_dtype, self.y_dtype, feature_names, label_names)
        layout = Layout(version, 0, self.d, self.l, self.x_dtype, self.y_dtype,
                        self.feature_names, self.label_names)
        if layout.row_bytes > NDF_MAX_FILE_BYTES - 2**40:  # any header is far below 2**40 bytes
            # Also keeps d and l inside the header's u64 fields.
            raise ValueError(
                f"rows of d={self.d} {self.x_dtype} + l={self.l} {self.y_dtype} "
                "overflow 63-bit file offsets"
            )
        header = pack_header(layout)
        self._layout = dataclasses.replace(layout, data_offset=len(header))
        self._row_bytes = layout.row_bytes
        self._rows_dtype = _rows_dtype(self._layout)
        self.path = os.fspath(path)
        self.n = 0
        self._lock = threading.Lock()
        head, tail = os.path.split(os.path.abspath(self.path))
        self._tmp_path = os.path.join(head, f".{tail}.{secrets.token_hex(8)}.tmp")
        fd = os.open(self._tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        self._file = os.fdopen(fd, "wb")
        # Removes the temporary file if the writer is dropped or the
        # interpreter exits without close().
        self._finalizer = weakref.finalize(self, _discard, self._file, self._tmp_path)
        try:
            self._file.write(header)
        except BaseException:
            self._finalizer()
            raise

    def __enter__(self) -> NdfWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    @property
    def closed(self) -> bool:
        """True after close() or abort()."""
        return not self._finalizer.alive

    def append(self, x_rows: Any, y_rows: Any = None) -> None:
        """Append k rows.

        Args:
            x_rows: array-like of shape (k, d), any real dtype (converted to
                x_dtype).  k may be 0.
            y_rows: array-like of shape (k, l), or (k,) when l == 1; None (or
                shape (k, 0)) when l == 0.  Converted to y_dtype.

        A conversion that would change a value is refused: to an integer dtype,
        a value that is not a whole number or is out of the dtype's range (NaN
        included); to a float dtype, a finite value that overflows to inf
        (rounding to float32/float16 is the conversion asked for).

        Raises:
            TypeError: a non-real dtype (complex, object, str, ...).
            ValueError: shapes that do not match (k, d) / (k, l), missing
                y_rows when l > 0, or a writer already closed.
            ConversionError (a ValueError): a value the conversion would
                change (its row in the file and its column named); the writer
                is then aborted.
            OSError: the write failed; the writer is then aborted.
        """
        x = as_real_array(x_rows, "x_rows")
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValueError(f"x_rows must have shape (k, {self.d}), got shape={x.shape}")
        k = x.shape[0]
        y = _label_rows(y_rows, k, self.l, "y_rows")
        with self._lock:
            if self.closed:
                raise ValueError(f"append to a closed NdfWriter for {self.path!r}")
            if self._layout.data_offset + (self.n + k) * self._row_bytes > NDF_MAX_FILE_BYTES:
                raise ValueError(f"{self.path!r}: {self.n + k} rows would overflow 63-bit offsets")
            try:
                self._write_rows(x, y)
            except BaseException:
                self._finalizer()
                raise
            self.n += k

    def _write_rows(self, x: np.ndarray, y: np.ndarray | None) -> None:
        k = x.shape[0]
        block = max(1, WRITE_CHUNK_BYTES // max(self._row_bytes, 1))
        x_le = self.x_dtype.newbyteorder("<")
        direct = y is None and x.dtype == x_le and x.flags.c_contiguous
        buf = None if direct else np.empty(min(k, block), dtype=self._rows_dtype)
        for start in range(0, k, block):
            stop = min(k, start + block)
            if buf is None:
                self._file.write(x[start:stop].data.cast("B"))
                continue
            rows = buf[: stop - start]
            _convert_into(rows["x"], x[start:stop], self.n + start, "x_rows", self.path)
            if y is not None:
                _convert_into(rows["y"], y[start:stop], self.n + start, "y_rows", self.path)
            self._file.write(rows.view(np.uint8).data)

    def close(self) -> None:
        """Finish the file: patch n into the header, fsync, rename to path.

        Idempotent.  Raises OSError if finishing fails (the temporary file is
        then removed and ``path`` is left untouched).
        """
        with self._lock:
            if self.closed:
                return
            try:
                self._file.flush()
                fd = self._file.fileno()
                os.pwrite(fd, pack_header(dataclasses.replace(self._layout, n=self.n)), 0)
                os.fsync(fd)
                self._file.close()
                os.replace(self._tmp_path, self.path)
            except BaseException:
                self._finalizer()
                raise
            self._finalizer.detach()
        fsync_directory(os.path.dirname(os.path.abspath(self.path)))

    def abort(self) -> None:
        """Discard everything written; ``path`` is left untouched. Idempotent."""
        with self._lock:
            self._finalizer()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        dtypes = "" if self._layout.version == 1 else f", x_dtype={self.x_dtype}, y_dtype={self.y_dtype}"
        return f"NdfWriter({self.path!r}, d={self.d}, l={self.l}{dtypes}, n={self.n}, {state})"


def save_ndf(
    path: str | os.PathLike[str],
    x: Any,
    y: Any = None,
    *,
    x_dtype: Any = np.float64,
    y_dtype: Any = np.float64,
    feature_names: Sequence[str] | None = None,
    label_names: Sequence[str] | None = None,
) -> None:
    """Write arrays to an `.ndf` file atomically (see NdfWriter).

    Args:
        path: destination file; its directory must exist.
        x: array-like of shape (n, d), d >= 1, any real dtype (converted to
            x_dtype, little-endian).
        y: labels of shape (n, l) or (n,) (then l = 1), or None (l = 0);
            converted to y_dtype.
        x_dtype, y_dtype, feature_names, label_names: as for NdfWriter
            (default float64 and no names: a version-1 file).

    Raises:
        TypeError: complex, object, str or other non-real dtypes; a dtype an
            .ndf file cannot hold.
        ValueError: x not 2-D, d == 0, y's length differing from x's, names of
            the wrong count, or a value the conversion would change.
        OSError: the file cannot be written.
    """
    xa = as_real_array(x, "x")
    if xa.ndim != 2 or xa.shape[1] == 0:
        raise ValueError(f"x must have shape (n, d) with d >= 1, got shape={xa.shape}")
    if y is None:
        l = 0  # noqa: E741
    else:
        y = as_real_array(y, "y")
        if y.ndim not in (1, 2) or y.shape[0] != xa.shape[0]:
            raise ValueError(
                f"y must have shape ({xa.shape[0]}, l) or ({xa.shape[0]},), got shape={y.shape}"
            )
        l = 1 if y.ndim == 1 else y.shape[1]  # noqa: E741
    with NdfWriter(path, xa.shape[1], l, x_dtype=x_dtype, y_dtype=y_dtype,
                   feature_names=feature_names, label_names=label_names) as writer:
        writer.append(xa, y)


def _as_count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name}={value} must be >= {minimum}")
    return int(value)


def _label_rows(y_rows: Any, k: int, l: int, name: str) -> np.ndarray | None:  # noqa: E741
    """Validate labels for k rows of l labels; None when there are none."""
    if y_rows is None:
        if l > 0:
            raise ValueError(f"{name} is required: this file has l={l} labels per row")
        return None
    y = as_real_array(y_rows, name)
    if l == 1 and y.ndim == 1:
        y = y.reshape(-1, 1)
    if y.ndim != 2 or y.shape != (k, l):
        raise ValueError(f"{name} must have shape ({k}, {l}), got shape={np.shape(y_rows)}")
    return None if l == 0 else y


def _as_names(names: Sequence[str] | None, count: int, what: str) -> tuple[str, ...] | None:
    """``names`` as a tuple of ``count`` strings, or None."""
    if names is None:
        return None
    if isinstance(names, str):
        raise TypeError(f"{what} must be a sequence of strings, not one string {names!r}")
    out = tuple(names)
    bad = next((v for v in out if not isinstance(v, str)), None)
    if bad is not None:
        raise TypeError(f"{what} must be strings, got {type(bad).__name__} {bad!r}")
    if len(out) != count:
        raise ValueError(f"{what} has {len(out)} names for {count} columns")
    return out


def _rows_dtype(layout: Layout) -> np.dtype:
    """One row as a packed record: ``x`` (d little-endian x_dtype), ``y`` (l y_dtype)."""
    fields: list[tuple[str, Any, tuple[int]]] = [("x", layout.x_dtype.newbyteorder("<"), (layout.d,))]
    if layout.l:
        fields.append(("y", layout.y_dtype.newbyteorder("<"), (layout.l,)))
    return np.dtype(fields)


def _convert_into(out: np.ndarray, src: np.ndarray, first_row: int, what: str, path: str) -> None:
    """``out[...] = src``, refusing a value the conversion changes (see NdfWriter.append).

    Raises:
        ConversionError: the first such value, with its row in the file and its column.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        out[...] = src
    if np.can_cast(src.dtype, out.dtype, "safe"):
        return
    if out.dtype.kind in "iu":
        with np.errstate(invalid="ignore"):
            bad = out != src
    elif src.dtype.kind == "f":
        bad = np.isinf(out) & np.isfinite(src)
    else:
        bad = np.isinf(out)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ConversionError(path, what, first_row + i, j, src[i, j].item(), out.dtype)


def fsync_directory(directory: str) -> None:
    """Make a rename durable (best effort: not all filesystems allow it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
