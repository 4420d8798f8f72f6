"""The `.ndf` row-file format: header layout, constants and validation.

Two versions, told apart by the magic; readers open both.  Version 1 (the
data.nu seed's format, ``__NDF_HDR 28``, byte for byte; all integers and floats
little-endian)::

    offset  size        field
    0       4           magic b"NDF1"
    4       8           n: u64, number of rows
    12      8           d: u64, features per row (>= 1)
    20      8           l: u64, labels per row (may be 0)
    28      n*(d+l)*8   rows, each d float64 features then l float64 labels

Version 2 adds the dtypes of the features and of the labels, and metadata::

    0       4           magic b"NDF2"
    4       24          n, d, l: u64 each, as in version 1
    28      4           x dtype: NumPy's little-endian dtype string, NUL-padded (b"<f4\\0")
    32      4           y dtype: likewise (b"<i8\\0"), also when l == 0
    36      8           m: u64, bytes of metadata
    44      m           metadata: a UTF-8 JSON object, space-padded so that 44 + m
                        is a multiple of 8 (the rows start 8-byte aligned)
    44+m    n*row       rows, each d x-dtype features then l y-dtype labels,
                        row = d * x itemsize + l * y itemsize bytes

The dtypes are one of ``DTYPES`` (float64/32/16, int64/32/16/8, uint8).  The
metadata's keys ``"feature_names"`` and ``"label_names"``, when present, are
lists of d and l strings (a CSV's column names); readers ignore other keys.
There is no padding between or after rows: the file size is exactly
``data_offset + n * row``.  Writers write version 1 when the file is float64
with no metadata, so such files stay readable by every version-1 reader.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DTYPES",
    "ConversionError",
    "MMAP_AUTO_MAX_BYTES",
    "NDF_HEADER",
    "NDF_HEADER_BYTES",
    "NDF_MAGIC",
    "NDF_MAX_FILE_BYTES",
    "NDF_MAX_METADATA_BYTES",
    "WRITE_CHUNK_BYTES",
    "Layout",
    "as_dtype",
    "as_real_array",
    "pack_header",
    "read_layout",
    "version_for",
]

# Header of version 1: magic, n, d, l (the seed's format; see the module docstring).
NDF_HEADER = struct.Struct("<4sQQQ")
NDF_MAGIC = b"NDF1"
NDF_HEADER_BYTES = NDF_HEADER.size  # 28
# Version 2: the same, then the x and y dtypes and the metadata's size.
NDF2_HEADER = struct.Struct("<4sQQQ4s4sQ")
NDF2_MAGIC = b"NDF2"
NDF2_HEADER_BYTES = NDF2_HEADER.size  # 44
FLOAT64 = np.dtype(np.float64)

# The dtypes a file may hold: what torch makes tensors of without a copy, bool aside.
DTYPES = tuple(
    np.dtype(t) for t in ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8")
)

# Largest file the reader accepts: byte offsets are off_t (signed 64 bit).
NDF_MAX_FILE_BYTES = 2**63 - 1

# Metadata larger than this is taken for a corrupt header (the names of 100,000
# columns take ~1 MB).
NDF_MAX_METADATA_BYTES = 64 * 2**20

# access="auto" maps files up to this size and uses pread above it.  Mapped
# pages count in the process's RSS (as reclaimable page cache) once touched,
# so a shuffled epoch over a mapped file grows RSS to the file size; above
# 512 MiB we prefer a flat RSS over the ~5x faster mapped gather.  Chosen so
# the W2 benchmark file (1M x 33 float64 = 252 MiB) is mapped and the
# larger-than-budget streaming test (>= 1 GiB) is not.
MMAP_AUTO_MAX_BYTES = 512 * 2**20

# NdfWriter converts and writes rows in blocks of at most this many bytes,
# so save_ndf of a large array needs only this much extra memory.
WRITE_CHUNK_BYTES = 16 * 2**20


@dataclass(frozen=True)
class Layout:
    """An `.ndf` file's header: what its rows hold and where they start.

    Attributes:
        version: 1 or 2.  n, d, l: rows, features and labels per row.
        x_dtype, y_dtype: the features' and labels' dtypes, native byte order
            (the file holds them little-endian).
        feature_names, label_names: d and l names, or None (not recorded).
        data_offset: byte offset of row 0.
        extra: (version 2) the metadata's other keys, as read (JSON values), or None;
            written before the names (e.g. ``CachedDataset``'s key).
    """

    version: int
    n: int
    d: int
    l: int  # noqa: E741
    x_dtype: np.dtype
    y_dtype: np.dtype
    feature_names: tuple[str, ...] | None = None
    label_names: tuple[str, ...] | None = None
    data_offset: int = NDF_HEADER_BYTES
    extra: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def row_bytes(self) -> int:
        """Bytes of one row: d * x itemsize + l * y itemsize."""
        return self.d * self.x_dtype.itemsize + self.l * self.y_dtype.itemsize

    @property
    def metadata(self) -> dict[str, Any]:
        """The JSON object a version-2 header records (``extra``'s keys, then the names given)."""
        meta: dict[str, Any] = dict(self.extra or {})
        if self.feature_names is not None:
            meta["feature_names"] = list(self.feature_names)
        if self.label_names is not None:
            meta["label_names"] = list(self.label_names)
        return meta


class ConversionError(ValueError):
    """A value that storing as the file's dtype would change (NdfWriter.append).

    Attributes:
        path: the file being written.  part: "x_rows" or "y_rows".  row: the
        value's row in the file (0-based).  column: its column in x or y.
        value: the value (a Python number).  dtype: the file's dtype it does
        not fit.
    """

    def __init__(self, path: str, part: str, row: int, column: int, value: Any,
                 dtype: np.dtype) -> None:
        self.path, self.part, self.row, self.column, self.value = path, part, row, column, value
        self.dtype = dtype.newbyteorder("=")
        super().__init__(
            f"{path!r}: {part} value {value!r} (row {row} of the file, column {column}) "
            f"cannot be stored as {self.dtype}: {self.reason}"
        )

    @property
    def reason(self) -> str:
        """Why, e.g. ``it is not a whole number in int64's range`` or ``it is outside
        float32's range (it would become inf)``."""
        if self.dtype.kind in "iu":
            return f"it is not a whole number in {self.dtype}'s range"
        return f"it is outside {self.dtype}'s range (it would become inf)"


def as_dtype(value: Any, name: str) -> np.dtype:
    """``value`` as one of ``DTYPES`` (native byte order).

    Raises:
        TypeError: not a dtype NumPy knows, or not one of DTYPES.
    """
    try:
        dtype = np.dtype(value)
    except TypeError as exc:
        raise TypeError(f"{name}={value!r} is not a dtype: {exc}") from None
    if dtype.fields is None and dtype.newbyteorder("=") in DTYPES:
        return dtype.newbyteorder("=")
    allowed = ", ".join(str(t) for t in DTYPES)
    raise TypeError(f"{name}={value!r}: an .ndf file holds one of {allowed}")


def pack_header(layout: Layout) -> bytes:
    """The header of ``layout``: version 1's 28 bytes, or version 2's with its metadata
    (padded so that the rows start at ``layout.data_offset``)."""
    if layout.version == 1:
        return NDF_HEADER.pack(NDF_MAGIC, layout.n, layout.d, layout.l)
    meta = json.dumps(layout.metadata, ensure_ascii=False).encode()
    meta += b" " * (-(NDF2_HEADER_BYTES + len(meta)) % 8)
    head = NDF2_HEADER.pack(
        NDF2_MAGIC, layout.n, layout.d, layout.l,
        layout.x_dtype.newbyteorder("<").str.encode(), layout.y_dtype.newbyteorder("<").str.encode(),
        len(meta),
    )
    return head + meta


def version_for(
    x_dtype: np.dtype, y_dtype: np.dtype, feature_names: object, label_names: object
) -> int:
    """1 for float64 rows without names (the seed's format), else 2."""
    plain = x_dtype == FLOAT64 and y_dtype == FLOAT64
    return 1 if plain and feature_names is None and label_names is None else 2


def read_layout(fd: int, file_bytes: int, name: str) -> Layout:
    """Read and validate the header of the open file ``fd`` of ``file_bytes`` bytes.

    Raises:
        ValueError: wrong magic, a header shorter than its version's, d == 0, a
            dtype not in DTYPES, metadata that is not a JSON object of names of
            the right counts, a row table whose size overflows 63 bits, or a
            file size that does not match the header (``name`` in the message).
    """
    head = os.pread(fd, NDF2_HEADER_BYTES, 0)
    magic = head[:4]
    if len(magic) == 4 and magic not in (NDF_MAGIC, NDF2_MAGIC):
        raise ValueError(
            f"{name!r} is not an .ndf file: magic {magic!r} is neither {NDF_MAGIC!r} nor {NDF2_MAGIC!r}"
        )
    if magic != NDF2_MAGIC:
        if len(head) < NDF_HEADER_BYTES:
            raise ValueError(
                f"{name!r}: header is {len(head)} bytes, shorter than {NDF_HEADER_BYTES}"
            )
        _, n, d, l = NDF_HEADER.unpack(head[:NDF_HEADER_BYTES])  # noqa: E741
        layout = Layout(1, n, d, l, FLOAT64, FLOAT64)
    else:
        layout = _read_v2(fd, head, file_bytes, name)
    return _check_size(layout, file_bytes, name)


def _read_v2(fd: int, head: bytes, file_bytes: int, name: str) -> Layout:
    if len(head) < NDF2_HEADER_BYTES:
        raise ValueError(
            f"{name!r}: version-2 header is {len(head)} bytes, shorter than {NDF2_HEADER_BYTES}"
        )
    _, n, d, l, xcode, ycode, meta_bytes = NDF2_HEADER.unpack(head)  # noqa: E741
    x_dtype, y_dtype = _dtype_code(xcode, "x", name), _dtype_code(ycode, "y", name)
    if meta_bytes > min(NDF_MAX_METADATA_BYTES, file_bytes - NDF2_HEADER_BYTES):
        raise ValueError(
            f"{name!r}: header says {meta_bytes} bytes of metadata; the file is {file_bytes} bytes"
        )
    raw = os.pread(fd, meta_bytes, NDF2_HEADER_BYTES) if meta_bytes else b"{}"
    try:
        meta = json.loads(raw.decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{name!r}: metadata is not UTF-8 JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{name!r}: metadata is a JSON {type(meta).__name__}, not an object")
    features = _names(meta.get("feature_names"), d, "feature_names", name)
    labels = _names(meta.get("label_names"), l, "label_names", name)
    extra = {k: v for k, v in meta.items() if k not in ("feature_names", "label_names")}
    return Layout(2, n, d, l, x_dtype, y_dtype, features, labels, NDF2_HEADER_BYTES + meta_bytes,
                  extra or None)


def _dtype_code(code: bytes, which: str, name: str) -> np.dtype:
    text = code.rstrip(b"\0").decode("ascii", "replace")
    for dtype in DTYPES:
        if text == dtype.newbyteorder("<").str:
            return dtype
    raise ValueError(f"{name!r}: {which} dtype {code!r} is not one of {[t.name for t in DTYPES]}")


def _names(value: object, count: int, key: str, name: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name!r}: metadata {key!r} is not a list of strings")
    if len(value) != count:
        raise ValueError(f"{name!r}: metadata {key!r} has {len(value)} names for {count} columns")
    return tuple(value)


def _check_size(layout: Layout, file_bytes: int, name: str) -> Layout:
    n, d, l = layout.n, layout.d, layout.l  # noqa: E741
    if d == 0:
        raise ValueError(f"{name!r}: header has d=0 features per row (must be >= 1)")
    row_bytes = layout.row_bytes
    expected = layout.data_offset + n * row_bytes
    if row_bytes > NDF_MAX_FILE_BYTES or expected > NDF_MAX_FILE_BYTES:
        raise ValueError(
            f"{name!r}: header {n=} {d=} {l=} describes {n} rows of {row_bytes} bytes, "
            f"which overflows 63 bits"
        )
    if expected != file_bytes:
        raise ValueError(
            f"{name!r}: file is {file_bytes} bytes but header {n=} {d=} {l=} "
            f"needs {expected} bytes"
        )
    return layout


def as_real_array(a: object, name: str) -> np.ndarray:
    """``a`` as an ndarray of a real dtype (bool, int, uint or float), no copy.

    The caller converts to the file's dtypes block by block (NdfWriter), so a
    large input is never copied whole.

    Raises:
        TypeError: complex, object, string, datetime or other non-real dtypes.
    """
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold real numbers (bool/int/uint/float), got dtype={arr.dtype}"
        )
    return arr
