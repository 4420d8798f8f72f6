"""Constant-memory shuffle: indices/s of the Feistel permutation against NumPy's permutation.

Command (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m benchmarks.bench_permute              # n = 10**6 and 10**8, 3 rounds
    python -m benchmarks.bench_permute 1000000 5    # one n, 5 rounds

Contestants, one epoch of ``n`` indices each:

* ``feistel_fill``: ``Permutation.fill`` over the epoch in ``INDEX_CHUNK_ROWS`` chunks into
  one reused int64 buffer (512 KiB; no ``n``-sized allocation);
* ``random_sampler``: ``RandomSampler(range(n), generator=s)._index_chunks()``, what the
  loader consumes (a fresh read-only chunk each time, key drawing included);
* ``numpy_permutation``: ``numpy.random.default_rng(s).permutation(n)`` (8 * n bytes).

The three run interleaved, round by round, with a new seed each round; the figures are
medians of wall-clock (``perf_counter``) and CPU (``process_time``) seconds, as ns per index
and millions of indices/s.  The load average is printed before and after: on a shared machine
compare ratios from one run, and prefer the CPU figures when the load exceeds the core count.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

from dataloader._constants import INDEX_CHUNK_ROWS
from dataloader._sampling.permute import seeded_permutation
from dataloader.sampler import RandomSampler


def feistel_fill(n: int, seed: int) -> None:
    perm = seeded_permutation(n, seed)
    buf = np.empty(INDEX_CHUNK_ROWS, dtype=np.int64)
    full, rest = divmod(n, INDEX_CHUNK_ROWS)
    for k in range(full):
        perm.fill(k * INDEX_CHUNK_ROWS, buf)
    if rest:
        perm.fill(full * INDEX_CHUNK_ROWS, buf[:rest])


def random_sampler(n: int, seed: int) -> None:
    for _ in RandomSampler(range(n), generator=seed)._index_chunks():
        pass


def numpy_permutation(n: int, seed: int) -> None:
    np.random.default_rng(seed).permutation(n)


CONTESTANTS = (feistel_fill, random_sampler, numpy_permutation)


def run(n: int, rounds: int) -> dict:
    wall: dict[str, list[float]] = {f.__name__: [] for f in CONTESTANTS}
    cpu: dict[str, list[float]] = {f.__name__: [] for f in CONTESTANTS}
    for r in range(rounds):
        for f in CONTESTANTS:
            t0, c0 = time.perf_counter(), time.process_time()
            f(n, 1000 + r)
            wall[f.__name__].append(time.perf_counter() - t0)
            cpu[f.__name__].append(time.process_time() - c0)
    out = {}
    for name in wall:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        out[name] = {
            "wall_ns_per_index": round(w / n * 1e9, 2),
            "cpu_ns_per_index": round(c / n * 1e9, 2),
            "wall_M_indices_per_s": round(n / w / 1e6, 1),
        }
    np_wall = out["numpy_permutation"]["wall_ns_per_index"]
    np_cpu = out["numpy_permutation"]["cpu_ns_per_index"]
    for name in ("feistel_fill", "random_sampler"):
        out[name]["speed_vs_numpy_wall"] = round(np_wall / out[name]["wall_ns_per_index"], 2)
        out[name]["speed_vs_numpy_cpu"] = round(np_cpu / out[name]["cpu_ns_per_index"], 2)
    return out


def main(argv: list[str]) -> None:
    sizes = [int(argv[0])] if argv else [10**6, 10**8]
    rounds = int(argv[1]) if len(argv) > 1 else 3
    print(json.dumps({"python": sys.version.split()[0], "loadavg_before": os.getloadavg()}))
    for n in sizes:
        print(json.dumps({"n": n, "rounds": rounds, **run(n, rounds)}))
    print(json.dumps({"loadavg_after": os.getloadavg()}))


if __name__ == "__main__":
    main(sys.argv[1:])
