"""CachedDataset's cost and gain on a W3-style pure-Python transform (issue 24's goals:
epoch 1 overhead <= 10% over the uncached epoch; epoch 2 >= 0.9x the `.ndf` W2 rate).

The transform: item ``i`` runs the W3 loop (500 steps of pure Python, ~30 µs) and returns
``(x, label)``: x a float64 array of 32 values, the label a float: the W2 row (32 features and
one label, 264 bytes).  Two parts, each timed as interleaved contenders (every contender one
epoch per round, the order rotated each round, ``--rounds`` rounds (3x as many for the short
epochs 2+) after one warm-up timing each; the figure is the median), from ONE run, with 0 and 2
workers.  Wall and CPU time (``time.process_time``: this process, all threads) are both
reported: on a shared machine the CPU time is the steadier figure.

- epoch 1 (``--items`` items, batch 64, shuffled, as W3): the uncached loader over the
  transform against a fresh ``CachedDataset`` (a new file each round) whose epoch computes the
  same items and writes the cache (the file's fsync and rename included);
- epochs 2+ (``--rows`` rows, batch 256, shuffled, as W2): ``NdfDataset`` over a W2 file of
  ``--rows`` rows (written by ``NdfWriter``) against the complete cache of ``--rows`` items of
  the transform (built once, beforehand); one timing is ``--passes`` epochs (an epoch of
  100,000 rows lasts ~15 ms: too short to time alone).

Run: ``PYTHONPATH=. python benchmarks/bench_cache.py`` (``--items``, ``--rows``, ``--rounds``,
``--passes``, ``--dir`` for the files: default a temporary directory).  Prints the load average, one line
per contender (median seconds, items/s), the ratios and a JSON summary.  On a shared 2-core
machine absolute figures move with other load: read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from dataloader import CachedDataset, DataLoader, Dataset
from dataloader.ndf import NdfDataset, NdfWriter

ITEM_LOOP_STEPS = 500  # W3's loop (benchmarks/compare.py)
D = 32


class W3Rows(Dataset):
    """A W3-style pure-Python transform whose items are W2 rows: (x float64 (32,), label float)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[np.ndarray, float]:
        s = 0
        for k in range(ITEM_LOOP_STEPS):
            s += (k ^ i) & 7
        return np.array([float((s + j) % 17) for j in range(D)]), float(i % 10)


def drain(loader: DataLoader) -> int:
    return sum(len(batch[0]) for batch in loader)


def interleaved(contenders: dict[str, Callable[[], int]], rounds: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each contender's epoch: one warm-up each, then ``rounds``
    rounds with the order rotated every round.  CPU time is this process's (all threads): other
    jobs on a shared machine disturb it much less than the wall clock."""
    for epoch in contenders.values():
        epoch()
    names = list(contenders)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            t0, c0 = time.perf_counter(), time.process_time()
            contenders[name]()
            times[name].append((time.perf_counter() - t0, time.process_time() - c0))
    return {name: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts))
            for name, ts in times.items()}


def first_epochs(items: int, folder: str, workers: int) -> dict[str, Callable[[], int]]:
    ds = W3Rows(items)
    count = iter(range(10**9))

    def uncached() -> int:
        return drain(DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers, seed=0))

    def cached() -> int:
        path = os.path.join(folder, f"epoch1-{workers}-{next(count)}.ndf")
        cache = CachedDataset(ds, path)
        n = drain(DataLoader(cache, batch_size=64, shuffle=True, num_workers=workers, seed=0))
        assert cache.complete, "the epoch did not complete the cache"
        cache.close()
        os.unlink(path)
        return n

    return {f"uncached, {workers} workers": uncached, f"CachedDataset epoch 1, {workers} workers": cached}


def later_epochs(rows: int, folder: str, workers: int, passes: int) -> dict[str, Callable[[], int]]:
    w2 = os.path.join(folder, "w2.ndf")
    if not os.path.exists(w2):
        rng = np.random.default_rng(0)
        with NdfWriter(w2, D, 1) as w:
            for start in range(0, rows, 100_000):
                k = min(100_000, rows - start)
                w.append(rng.standard_normal((k, D)), rng.standard_normal((k, 1)))
    cache = CachedDataset(W3Rows(rows), os.path.join(folder, "cache.ndf"))
    if not cache.complete:
        drain(DataLoader(cache, batch_size=256, num_workers=2))
    assert cache.complete
    ndf = NdfDataset(w2)

    def loader(ds: Dataset) -> Callable[[], int]:
        made = DataLoader(ds, batch_size=256, shuffle=True, num_workers=workers, seed=0)
        return lambda: sum(drain(made) for _ in range(passes))

    return {f"NdfDataset (W2 file), {workers} workers": loader(ndf),
            f"CachedDataset epoch 2+, {workers} workers": loader(cache)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, default=20, help="epochs 2+ per timing")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args(argv)
    print(f"{sys.version.split()[0]} {sys.implementation.name}"
          f"{' free-threaded' if not getattr(sys, '_is_gil_enabled', lambda: True)() else ''}; "
          f"load average at start {os.getloadavg()}", flush=True)
    summary: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for workers in (0, 2):
            first = interleaved(first_epochs(args.items, folder, workers), args.rounds)
            later = interleaved(later_epochs(args.rows, folder, workers, args.passes), 3 * args.rounds)
            for name, (s, cpu) in {**first, **later}.items():
                n = args.items if name in first else args.rows * args.passes
                print(f"  {name}: {s:.3f} s ({cpu:.3f} s CPU), {n / s:,.0f} items/s", flush=True)
            (base, c1), (w2, c2) = first.values(), later.values()
            for k, what in enumerate(("wall", "cpu")):
                summary[f"epoch1_overhead_w{workers}_{what}"] = round(c1[k] / base[k] - 1, 4)
                summary[f"epoch2_vs_w2_w{workers}_{what}"] = round(w2[k] / c2[k], 4)
            print(f"  -> epoch 1 overhead {c1[0] / base[0] - 1:+.1%} wall, {c1[1] / base[1] - 1:+.1%} CPU; "
                  f"epoch 2 at {w2[0] / c2[0]:.2f}x the W2 rate wall, {w2[1] / c2[1]:.2f}x CPU", flush=True)
    print(f"load average at end {os.getloadavg()}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
