"""W1 in-memory rows: ``ArrayDataset``'s native gather vs NumPy's fancy index, per batch.

Commands (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m benchmarks.bench_array             # one JSON line: us a batch and ratios
    python -m pytest benchmarks/bench_array.py --benchmark-only \\
        --benchmark-columns=median,iqr,rounds

W1: 1,000,000 x 32 float64 (256 MB), batch 256, shuffled.  An epoch is 3,907 batches
of a fresh permutation, drawn inside the epoch as the loader draws its own (as in
benchmarks/compare.py).  The contenders run one epoch each in turn, and the round
repeats ``rounds`` times (median), so that load from other processes hits all alike:

* ``numpy``: the plain loop ``x[perm[i:i + 256]]`` (issue 12's baseline, compare.py's);
* ``getitems``: ``ArrayDataset(x).__getitems__(perm[i:i + 256])`` (the native row
  gather of ``_native/_rowcopy.pyx`` plus ``BatchedItems``);
* ``getitems_out``: the same into one reused ``out=`` buffer (no allocation);
* ``loader_0w``: ``DataLoader(ArrayDataset(x), batch_size=256, shuffle=True)``, 0 workers.

Machine caveats: 2 shared cores, and a batch is memory-latency bound: figures move by
+-30% with other load (print the load average beside them); compare ratios of one run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader

ROWS, D, BATCH = 1_000_000, 32, 256


def w1_methods(rows: int = ROWS) -> dict[str, Callable[[], None]]:
    """Name -> callable running one epoch (each draws its permutation)."""
    x = np.random.default_rng(0).standard_normal((rows, D))
    rng = np.random.default_rng(1)
    ds = ArrayDataset(x)
    loader = DataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=0, seed=0)
    out = (np.empty((BATCH, D)),)

    def numpy() -> None:
        perm = rng.permutation(rows)
        for i in range(0, rows, BATCH):
            x[perm[i : i + BATCH]]

    def getitems() -> None:
        perm = rng.permutation(rows)
        for i in range(0, rows, BATCH):
            ds.__getitems__(perm[i : i + BATCH])

    def getitems_out() -> None:
        perm = rng.permutation(rows)
        for i in range(0, rows - BATCH + 1, BATCH):  # full batches: one buffer shape
            ds.__getitems__(perm[i : i + BATCH], out=out)

    def loader_0w() -> None:
        for _ in loader:
            pass

    return {"numpy": numpy, "getitems": getitems, "getitems_out": getitems_out,
            "loader_0w": loader_0w}


def run_w1(rounds: int = 5, rows: int = ROWS) -> dict[str, float]:
    """Microseconds a batch per method (median over ``rounds`` interleaved epochs)."""
    methods = w1_methods(rows)
    times: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(rounds + 1):  # the first round warms up
        for name, epoch in methods.items():
            start = time.perf_counter()
            epoch()
            times[name].append(time.perf_counter() - start)
    batches = rows / BATCH
    return {name: statistics.median(t[1:]) / batches * 1e6 for name, t in times.items()}


@pytest.fixture(scope="module")
def w1():
    return w1_methods()


@pytest.mark.benchmark(group="W1 ArrayDataset 1M x 32 float64, batch 256, one epoch")
@pytest.mark.parametrize("name", ["numpy", "getitems", "getitems_out", "loader_0w"])
def test_w1(benchmark, w1, name):
    benchmark.pedantic(w1[name], rounds=3, warmup_rounds=1)


if __name__ == "__main__":
    load = os.getloadavg()[0]
    us = run_w1()
    print(json.dumps({
        "python": sys.version.split()[0],
        "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
        "load_average_1min_at_start": round(load, 2),
        "w1_us_per_batch": {k: round(v, 1) for k, v in us.items()},
        "w1_ratio_to_numpy": {k: round(us["numpy"] / v, 2) for k, v in us.items()},
    }))
