"""The `.ndf` row-file format: header layout, constants and validation.

Binary layout (all integers and floats little-endian)::

    offset  size        field
    0       4           magic b"NDF1"
    4       8           n: u64, number of rows
    12      8           d: u64, features per row (>= 1)
    20      8           l: u64, labels per row (may be 0)
    28      n*(d+l)*8   rows, each d float64 features then l float64 labels

The file size is exactly ``28 + n * (d + l) * 8`` bytes; there is no
padding, so rows start at byte 28 and are not 8-byte aligned.  This is the
format of the data.nu seed (``__NDF_HDR 28``), byte for byte.
"""

from __future__ import annotations

import struct

import numpy as np

__all__ = [
    "MMAP_AUTO_MAX_BYTES",
    "NDF_HEADER",
    "NDF_HEADER_BYTES",
    "NDF_MAGIC",
    "NDF_MAX_FILE_BYTES",
    "WRITE_CHUNK_BYTES",
    "as_real_array",
    "pack_header",
    "parse_header",
]

# Header: magic, n, d, l (the seed's format; see the module docstring).
NDF_HEADER = struct.Struct("<4sQQQ")
NDF_MAGIC = b"NDF1"
NDF_HEADER_BYTES = NDF_HEADER.size  # 28
ROW_ITEM_BYTES = 8  # one float64

# Largest file the reader accepts: byte offsets are off_t (signed 64 bit).
NDF_MAX_FILE_BYTES = 2**63 - 1

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


def pack_header(n: int, d: int, l: int) -> bytes:
    """The 28 header bytes for n rows of d features and l labels."""
    return NDF_HEADER.pack(NDF_MAGIC, n, d, l)


def parse_header(header: bytes, file_bytes: int, name: str) -> tuple[int, int, int]:
    """Validate a header against the file size and return (n, d, l).

    Args:
        header: the file's first bytes (up to NDF_HEADER_BYTES).
        file_bytes: the file size in bytes.
        name: file name for the messages.

    Raises:
        ValueError: wrong magic, header shorter than 28 bytes, d == 0, a row
            table whose size overflows 63 bits, or a file size that does not
            match the header.
    """
    if len(header) >= len(NDF_MAGIC) and header[: len(NDF_MAGIC)] != NDF_MAGIC:
        raise ValueError(
            f"{name!r} is not an .ndf file: magic {header[:4]!r} != {NDF_MAGIC!r}"
        )
    if len(header) < NDF_HEADER_BYTES:
        raise ValueError(
            f"{name!r}: header is {len(header)} bytes, shorter than {NDF_HEADER_BYTES}"
        )
    _, n, d, l = NDF_HEADER.unpack(header[:NDF_HEADER_BYTES])
    if d == 0:
        raise ValueError(f"{name!r}: header has d=0 features per row (must be >= 1)")
    row_bytes = (d + l) * ROW_ITEM_BYTES
    expected = NDF_HEADER_BYTES + n * row_bytes
    if row_bytes > NDF_MAX_FILE_BYTES or expected > NDF_MAX_FILE_BYTES:
        raise ValueError(
            f"{name!r}: header {n=} {d=} {l=} describes n*(d+l)*8 bytes, "
            f"which overflows 63 bits"
        )
    if expected != file_bytes:
        raise ValueError(
            f"{name!r}: file is {file_bytes} bytes but header {n=} {d=} {l=} "
            f"needs {expected} bytes"
        )
    return n, d, l


def as_real_array(a: object, name: str) -> np.ndarray:
    """``a`` as an ndarray of a real dtype (bool, int, uint or float), no copy.

    The caller converts to float64 block by block (NdfWriter), so a large
    input is never copied whole.

    Raises:
        TypeError: complex, object, string, datetime or other non-real dtypes.
    """
    arr = np.asarray(a)
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must hold real numbers (bool/int/uint/float), got dtype={arr.dtype}"
        )
    return arr
