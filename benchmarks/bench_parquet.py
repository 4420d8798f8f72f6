"""Rows/s reading a Parquet file: ``ParquetDataset`` + ``DataLoader`` against pyarrow's own
``ParquetFile.iter_batches`` (+ a NumPy shuffle) and torch's ``DataLoader`` over a naive
per-row ``__getitem__``.

Command (repository root)::

    python -m benchmarks.bench_parquet               # 10^6 rows x 32 float64 + 1 string
    python -m benchmarks.bench_parquet --rows 50000  # CI size

The file: ``--rows`` rows, 32 float64 columns and one string column, row groups of 65,536
rows (at least 16 row groups in a smaller file; pyarrow's writer, snappy).  Batches of 256 rows, one epoch per measure, every contender
starting from the file (cold row-group cache), rounds interleaved, medians printed:

* ``ours seq|shuf Nw``: ``DataLoader(ParquetDataset(path), batch_size=256, shuffle=...,
  num_workers=N)``: dicts of NumPy columns, the string column a list of ``str``; the shuffle
  is an exact global permutation (each row group decoded once into the cache, default 64).
* ``ours shuf cache=2``: the same shuffled epoch with ``cache_row_groups=2``, fewer than the
  file's row groups: each batch re-reads most row groups (the thrash the cache prevents);
  timed over ``--thrash-batches`` batches only.
* ``pyarrow seq``: ``iter_batches(batch_size=256)``, each batch's columns ``to_numpy``.
* ``pyarrow+numpy shuf``: ``iter_batches`` into NumPy columns for the whole file, then a
  ``numpy`` permutation, each batch gathered by fancy indexing (one thread, all in memory).
* ``torch naive Nw``: torch ``DataLoader(batch_size=256, num_workers=N)`` over a dataset whose
  ``__getitem__`` returns ``{column: column_array[i]}`` of the file's NumPy columns, torch's
  ``default_collate`` (where torch imports; the first ``--torch-rows`` rows, loaded into
  memory before the timing, so torch pays no reading at all).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks._rates import measure
from dataloader import DataLoader, ParquetDataset

BATCH = 256
FLOATS = 32
ROW_GROUP = 65_536


def write_file(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    cols = {f"f{k}": rng.standard_normal(rows) for k in range(FLOATS)}
    cols["s"] = pa.array([f"row-{i}" for i in range(rows)])
    pq.write_table(pa.table(cols), path, row_group_size=max(1, min(ROW_GROUP, rows // 16)))


def ours(path: Path, shuffle: bool, workers: int, cache: int = 64, batches: int | None = None) -> Callable[[], int]:
    def run() -> int:
        loader = DataLoader(ParquetDataset(path, cache_row_groups=cache), batch_size=BATCH,
                            shuffle=shuffle, num_workers=workers, seed=1)
        rows = 0
        with loader:
            for k, batch in enumerate(loader):
                rows += len(batch["s"])
                if batches is not None and k + 1 == batches:
                    break
        return rows
    return run


def pyarrow_seq(path: Path) -> int:
    rows = 0
    for rb in pq.ParquetFile(path).iter_batches(batch_size=BATCH):
        batch = {name: rb.column(name).to_numpy(zero_copy_only=False) for name in rb.schema.names}
        rows += len(batch["s"])
    return rows


def _numpy_columns(path: Path) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {}
    for rb in pq.ParquetFile(path).iter_batches(batch_size=ROW_GROUP):
        for name in rb.schema.names:
            parts.setdefault(name, []).append(rb.column(name).to_numpy(zero_copy_only=False))
    return {name: np.concatenate(p) for name, p in parts.items()}


def pyarrow_numpy_shuffled(path: Path) -> int:
    cols = _numpy_columns(path)
    n = len(cols["s"])
    perm = np.random.default_rng(1).permutation(n)
    rows = 0
    for start in range(0, n, BATCH):
        idx = perm[start:start + BATCH]
        batch = {name: c[idx] for name, c in cols.items()}
        rows += len(batch["s"])
    return rows


def torch_naive(path: Path, workers: int, limit: int) -> Callable[[], int] | None:
    try:
        import torch.utils.data as tud  # lazy: optional (absent on 3.13t)
    except ImportError:
        return None

    class Naive(tud.Dataset):
        def __init__(self) -> None:
            self.cols = {k: v[:limit] for k, v in _numpy_columns(path).items()}

        def __len__(self) -> int:
            return len(self.cols["s"])

        def __getitem__(self, i: int) -> dict[str, Any]:
            return {k: c[i] for k, c in self.cols.items()}

    naive = Naive()  # loaded once, outside the timing: torch's best case

    def run() -> int:
        rows = 0
        for batch in tud.DataLoader(naive, batch_size=BATCH, shuffle=True, num_workers=workers):
            rows += len(batch["s"])
        return rows
    return run


def contenders(path: Path, args: argparse.Namespace) -> dict[str, Callable[[], int]]:
    out: dict[str, Callable[[], int]] = {}
    for workers in (0, 2):
        out[f"ours seq {workers}w"] = ours(path, False, workers)
        out[f"ours shuf {workers}w"] = ours(path, True, workers)
    out["ours shuf cache=2 0w"] = ours(path, True, 0, cache=2, batches=args.thrash_batches)
    out["pyarrow seq"] = lambda: pyarrow_seq(path)
    out["pyarrow+numpy shuf"] = lambda: pyarrow_numpy_shuffled(path)
    for workers in (0, 2):
        run = torch_naive(path, workers, min(args.torch_rows, args.rows))
        if run is not None:
            out[f"torch naive {workers}w"] = run
    return out



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--torch-rows", type=int, default=100_000)
    parser.add_argument("--thrash-batches", type=int, default=20)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.parquet"
        write_file(path, args.rows)
        rates = measure(contenders(path, args), args.rounds)
    print(json.dumps({
        "python": sys.version.split()[0],
        "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
        "rows": args.rows, "rounds": args.rounds,
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "rows_per_s": {k: round(v) for k, v in rates.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
