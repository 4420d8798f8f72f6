"""Cost of ``DataLoader.seek(epoch, batch)``: O(1) for the built-in samplers.

Command (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m benchmarks.bench_seek            # 2,000 seeks per case
    python -m benchmarks.bench_seek 500        # fewer

For each case a loader (``batch_size=64``, ``num_workers=0``) over ``n`` rows that cost nothing:

* ``seek_us``: one ``loader.seek(epoch, batch)`` to a random epoch in ``[0, 1000)`` and a random
  batch of it (median over blocks of 100 seeks, microseconds);
* ``seek_first_batch_us``: ``seek`` to the epoch's last batch, ``iter()`` and the first
  ``next()`` (median of 50, microseconds): nothing before the position is computed.

Cases: ``shuffle=True`` (``RandomSampler``), ``SequentialSampler``, ``DistributedSampler`` (4
ranks), at ``n`` = 10**3 and 64 * 10**9 + 1 (10**9 batches and one more): the figures must not
grow with ``n``; the target is < 1 ms for a seek into 10**9 batches.  One process, one
interpreter; the load average is reported before and after (a 2-core VM shared with others).
"""

from __future__ import annotations

import json
import os
import random
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


def seek_us(loader: DataLoader, seeks: int) -> float:
    rng = random.Random(0)
    length = len(loader)
    targets = [(rng.randrange(1000), rng.randrange(length + 1)) for _ in range(seeks)]
    blocks = []
    for b in range(0, len(targets), 100):
        block = targets[b:b + 100]
        t0 = time.perf_counter()
        for epoch, batch in block:
            loader.seek(epoch, batch)
        blocks.append((time.perf_counter() - t0) / len(block))
    return statistics.median(blocks) * 1e6


def first_batch_us(loader: DataLoader) -> float:
    times = []
    for epoch in range(50):
        t0 = time.perf_counter()
        loader.seek(epoch, len(loader) - 1)
        next(iter(loader))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main(argv: list[str]) -> None:
    seeks = int(argv[0]) if argv else 2_000
    print(json.dumps({"python": sys.version.split()[0], "loadavg_before": os.getloadavg()}))
    for kind in ("shuffle", "sequential", "distributed"):
        for n in (10**3, 64 * 10**9 + 1):
            loader = make(kind, n)
            print(json.dumps({"case": kind, "n": n, "batches": len(loader),
                              "seek_us": round(seek_us(loader, seeks), 2),
                              "seek_first_batch_us": round(first_batch_us(loader), 1)}))
    print(json.dumps({"loadavg_after": os.getloadavg()}))


if __name__ == "__main__":
    main(sys.argv[1:])
