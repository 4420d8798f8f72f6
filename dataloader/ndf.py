"""`.ndf` row files: n rows of d features and l labels (float64 unless written otherwise).

Binary layout, version 1 (little-endian; header = the ``NDF_HEADER`` struct, 28 bytes)::

    b"NDF1" | u64 n | u64 d | u64 l | n rows of (d + l) float64: x[0:d], y[0:l]

The file size is exactly ``28 + n * (d + l) * 8``; d >= 1, l may be 0.
Version 2 (``b"NDF2"``) adds the dtypes of x and of y (float64/32/16,
int64/32/16/8, uint8) and a JSON object of metadata (the column names) after
the header; see ``dataloader._ndf.format`` for its bytes.  Files written with
float64 and no names are version 1; every reader opens both.

Writing: `save_ndf` for arrays in memory, `NdfWriter` chunk by chunk for
files larger than RAM; both are atomic (temporary file + fsync + rename).
``x_dtype=np.float32, y_dtype=np.int64`` stores what a torch model and
``CrossEntropyLoss`` take; ``feature_names`` / ``label_names`` keep names.

Reading: `open_ndf` / `NdfFile` validate the header against the file size
and gather rows into C-contiguous arrays of the file's dtypes in native code
that runs without the GIL, so many threads read one file at once.  Two access
paths (``access=``):

* ``"mmap"``: the file is mapped read-only and each row is one ``memcpy``
  from the mapping (no system call per row).  Fastest for page-cached
  files: ≈2.3-2.9x ``numpy.memmap`` fancy indexing on shuffled batches of
  256 rows of 33 float64 (benchmarks/bench_ndf.py).  Touched pages count
  in the process's RSS (they remain reclaimable page cache).
* ``"pread"``: one ``pread``/``preadv(2)`` per run of consecutive indices;
  RSS stays flat however large the file.  About 1 µs per isolated row (a
  system call): ≈0.15x memmap on shuffled rows, about memmap's speed on
  sequential (unshuffled) batches.
* ``"auto"`` (default): ``"mmap"`` for files up to MMAP_AUTO_MAX_BYTES
  (512 MiB), ``"pread"`` above.

Neither path ever loads the whole file.  `NdfDataset` wraps a file as a
map-style dataset whose ``__getitems__`` is one native gather;
``NdfDataset(path, scalar_labels=True)`` gives the one label column as
batches of shape (B,) (class ids for ``CrossEntropyLoss``).

Caching: `CachedDataset(dataset, path)` writes a dataset's (transformed, fixed-shape) items
to an `.ndf` file during the first epoch that sees them all, and reads them from it afterwards.
"""

from __future__ import annotations

from dataloader._ndf.cache import CachedDataset
from dataloader._ndf.format import NDF_HEADER
from dataloader._ndf.read import NdfDataset, NdfFile, _reopen_dataset, _reopen_file, open_ndf
from dataloader._ndf.write import NdfWriter, save_ndf

__all__ = [
    "CachedDataset",
    "NDF_HEADER",
    "NdfDataset",
    "NdfFile",
    "NdfWriter",
    "open_ndf",
    "save_ndf",
]

# Defined in private modules; shown (and pickled) under their public home.
for _obj in (CachedDataset, NdfDataset, NdfFile, NdfWriter, open_ndf, save_ndf, _reopen_dataset, _reopen_file):
    _obj.__module__ = __name__
del _obj
