"""`.ndf` row files: n rows of d float64 features and l float64 labels.

Binary layout (little-endian; header = the ``NDF_HEADER`` struct, 28 bytes)::

    b"NDF1" | u64 n | u64 d | u64 l | n rows of (d + l) float64: x[0:d], y[0:l]

The file size is exactly ``28 + n * (d + l) * 8``; d >= 1, l may be 0.

Writing: `save_ndf` for arrays in memory, `NdfWriter` chunk by chunk for
files larger than RAM; both are atomic (temporary file + fsync + rename).

Reading: `open_ndf` / `NdfFile` validate the header against the file size
and gather rows into C-contiguous float64 arrays in native code that runs
without the GIL, so many threads read one file at once.  Two access paths
(``access=``):

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
map-style dataset whose ``__getitems__`` is one native gather.
"""

from __future__ import annotations

from dataloader._ndf.format import NDF_HEADER
from dataloader._ndf.read import NdfDataset, NdfFile, _reopen_dataset, _reopen_file, open_ndf
from dataloader._ndf.write import NdfWriter, save_ndf

__all__ = [
    "NDF_HEADER",
    "NdfDataset",
    "NdfFile",
    "NdfWriter",
    "open_ndf",
    "save_ndf",
]

# Defined in private modules; shown (and pickled) under their public home.
for _obj in (NdfDataset, NdfFile, NdfWriter, open_ndf, save_ndf, _reopen_dataset, _reopen_file):
    _obj.__module__ = __name__
del _obj
