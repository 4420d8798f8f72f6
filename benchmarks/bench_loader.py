"""W1/W2: the loader over in-memory rows and over a page-cached .ndf, as ratios to NumPy.

Command (repository root, after ``python -m pip install -e '.[test]'``)::

    python -m pytest benchmarks/bench_loader.py --benchmark-only -s

or ``python -m benchmarks.bench_loader [--rows N]`` for the ratio table alone.

Workloads (issue 2 and 3): 1,000,000 rows x 32 float64 (+ one label column), batch 256,
shuffled, one epoch:

* ``numpy_loop`` (the reference): draw the epoch's permutation, then ``x[idx], y[idx]`` per batch;
* ``W1 ours wN``: ``DataLoader(ArrayDataset(x, y), batch_size=256, shuffle=True, num_workers=N)``;
* ``W2 memmap``: the same batches by ``numpy.memmap`` fancy indexing of the .ndf file;
* ``W2 ours wN``: ``DataLoader(NdfDataset(file), ...)`` over the page-cached .ndf.

Each figure is the median of 3 epochs in one process; ratios compare figures from the same
run.  Machine caveats: the reference machine has 2 shared cores, so absolute figures move
with other load; targets: W1 >= 0.9x the NumPy loop, W2 >= 1.0x memmap.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, NdfDataset, save_ndf

ROWS = 1_000_000
FEATURES = 32
BATCH = 256


def make_rows(n: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, FEATURES)), rng.standard_normal((n, 1))


def epoch_seconds(run_epoch: Callable[[], int], epochs: int = 3) -> float:
    """Median seconds of ``epochs`` calls; each returns the rows it produced."""
    times = []
    for _ in range(epochs):
        t = time.perf_counter()
        run_epoch()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def numpy_loop(x: np.ndarray, y: np.ndarray) -> Callable[[], int]:
    rng = np.random.default_rng(1)

    def run() -> int:
        perm = rng.permutation(len(x))
        rows = 0
        for i in range(0, len(x), BATCH):
            idx = perm[i : i + BATCH]
            rows += len(x[idx]) + 0 * len(y[idx])
        return rows

    return run


def loader_epoch(loader: DataLoader) -> Callable[[], int]:
    def run() -> int:
        return sum(len(xb) for xb, _ in loader)

    return run


def memmap_loop(path: str, n: int) -> Callable[[], int]:
    mm = np.memmap(path, dtype="<f8", mode="r", offset=28, shape=(n, FEATURES + 1))
    rng = np.random.default_rng(1)

    def run() -> int:
        perm = rng.permutation(n)
        rows = 0
        for i in range(0, n, BATCH):
            batch = mm[perm[i : i + BATCH]]
            rows += len(batch[:, :FEATURES]) + 0 * len(batch[:, FEATURES:])
        return rows

    return run


def measure(rows: int = ROWS, workers: tuple[int, ...] = (0, 1, 2)) -> list[tuple[str, float, str, float]]:
    """Run W1 and W2; return (name, rows/s, reference name, ratio) rows."""
    x, y = make_rows(rows)
    out = []
    ref = rows / epoch_seconds(numpy_loop(x, y))
    out.append(("W1 numpy_loop", ref, "numpy_loop", 1.0))
    for nw in workers:
        loader = DataLoader(ArrayDataset(x, y), batch_size=BATCH, shuffle=True, seed=0, num_workers=nw)
        r = rows / epoch_seconds(loader_epoch(loader))
        loader.close()
        out.append((f"W1 ours w{nw}", r, "numpy_loop", r / ref))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rows.ndf")
        save_ndf(path, x, y)
        del x, y
        mm = rows / epoch_seconds(memmap_loop(path, rows))
        out.append(("W2 memmap", mm, "memmap", 1.0))
        for nw in workers:
            ds = NdfDataset(path)
            loader = DataLoader(ds, batch_size=BATCH, shuffle=True, seed=0, num_workers=nw)
            r = rows / epoch_seconds(loader_epoch(loader))
            loader.close()
            ds.close()
            out.append((f"W2 ours w{nw}", r, "memmap", r / mm))
    return out


@pytest.mark.benchmark(group="loader")
def test_w1_w2_ratios(benchmark):
    table = benchmark.pedantic(measure, kwargs={"rows": ROWS}, rounds=1, iterations=1)
    print()
    for name, rate, ref, ratio in table:
        benchmark.extra_info[name] = ratio
        print(f"{name:16s} {rate / 1e6:7.2f} M rows/s  {ratio:5.2f}x {ref}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    args = parser.parse_args()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"# Python {sys.version.split()[0]} gil={gil} cores={os.cpu_count()} rows={args.rows}")
    for name, rate, ref, ratio in measure(args.rows):
        print(f"{name:16s} {rate / 1e6:7.2f} M rows/s  {ratio:5.2f}x {ref}")


if __name__ == "__main__":
    main()
