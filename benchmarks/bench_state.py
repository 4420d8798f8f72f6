"""Cost of exact resume: ``DataLoader.state_dict()`` and the start of a resumed epoch.

Command (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m benchmarks.bench_state            # 20,000 calls per case
    python -m benchmarks.bench_state 5000       # fewer calls

For each case a loader over a dataset of ``n`` rows (``batch_size=64``, ``num_workers=0``)
is iterated 3 batches into its epoch, then:

* ``state_dict_us``: one ``loader.state_dict()`` (median of the calls, microseconds; the loop
  is timed in blocks of 100 calls and divided);
* ``resume_first_batch_ms``: a new loader, ``load_state_dict(sd)`` of a state half-way
  through the epoch, ``iter()`` and the first ``next()`` (median of 5; milliseconds): the
  skipped half is never computed for the built-in samplers.

Cases: ``shuffle=True`` (``RandomSampler``), ``SequentialSampler``, ``DistributedSampler``
(4 ranks), at ``n`` = 10**3, 10**6 and 10**12: the figures must not grow with ``n``.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from benchmarks.bench_ring import Free as Rows  # items that cost nothing
from dataloader.distributed import DistributedSampler
from dataloader.loader import DataLoader


def make(kind: str, n: int) -> DataLoader:
    ds = Rows(n)
    if kind == "shuffle":
        return DataLoader(ds, batch_size=64, shuffle=True, seed=1)
    if kind == "sequential":
        return DataLoader(ds, batch_size=64)
    return DataLoader(ds, batch_size=64, sampler=DistributedSampler(ds, num_replicas=4, rank=1, seed=1))


def state_dict_us(loader: DataLoader, calls: int) -> float:
    blocks = []
    for _ in range(max(1, calls // 100)):
        t0 = time.perf_counter()
        for _ in range(100):
            loader.state_dict()
        blocks.append((time.perf_counter() - t0) / 100)
    return statistics.median(blocks) * 1e6


def resume_ms(kind: str, n: int, sd: dict) -> float:
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        loader = make(kind, n)
        loader.load_state_dict(sd)
        next(iter(loader))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv: list[str]) -> None:
    calls = int(argv[0]) if argv else 20_000
    print(json.dumps({"python": sys.version.split()[0], "loadavg_before": os.getloadavg()}))
    for kind in ("shuffle", "sequential", "distributed"):
        for n in (10**3, 10**6, 10**12):
            loader = make(kind, n)
            it = iter(loader)
            for _ in range(3):
                next(it)
            cost = state_dict_us(loader, calls)
            sd = {**loader.state_dict(), "yielded": len(loader) // 2}
            print(json.dumps({"case": kind, "n": n, "state_dict_us": round(cost, 2),
                              "resume_first_batch_ms": round(resume_ms(kind, n, sd), 3)}))
    print(json.dumps({"loadavg_after": os.getloadavg()}))


if __name__ == "__main__":
    main(sys.argv[1:])
