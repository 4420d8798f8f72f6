"""Cost of elastic resume (another number of ranks): loading, the first batch, the remainder's indices.

Command (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m benchmarks.bench_elastic          # 7 rounds
    python -m benchmarks.bench_elastic 3        # fewer rounds

Loaders over ``n`` rows that cost nothing (``batch_size=64``, ``num_workers=0``,
``DistributedSampler`` or ``ShardSampler``, shuffled); 4 old ranks stopped half-way through
their epoch, then a loader on rank 1 of 3:

* ``resize_first_batch_ms``: a new 3-rank loader, ``load_state_dict`` of one old state (ranks in
  step) or of the list of the 4 (``"list"``), ``iter()`` and the first ``next()`` (median of
  the rounds, milliseconds), at ``n`` = 10**3, 10**6 and 10**12: it must not grow with ``n``;
* ``remainder_vs_fresh``: rows/s of a loader epoch over the resized epoch's remainder (the old
  ranks stopped at different steps: several row segments) against a fresh 3-rank epoch of the
  same loader, ``n`` = 6 * 10**5, alternating which runs first (median of the rounds).

The load average before and after is printed: on a shared 2-core machine compare ratios.
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
from dataloader.shard import ShardSampler


def make(kind: str, n: int, world: int, rank: int) -> DataLoader:
    ds = Rows(n)
    if kind == "shard":
        return DataLoader(ds, batch_size=64, sampler=ShardSampler(ds, num_shards=world, shard_id=rank, seed=1))
    return DataLoader(ds, batch_size=64, sampler=DistributedSampler(ds, num_replicas=world, rank=rank, seed=1))


def old_states(kind: str, n: int, steps: list[int]) -> list[dict]:
    """The 4 old ranks' states at ``steps`` batches (set without iterating: O(1))."""
    states = []
    for rank, k in enumerate(steps):
        sd = make(kind, n, 4, rank).state_dict()
        loader = make(kind, n, 4, rank)
        loader.load_state_dict({**sd, "yielded": k})
        states.append(json.loads(json.dumps(loader.state_dict())))
    return states


def resize_ms(kind: str, n: int, state: object, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        loader = make(kind, n, 3, 1)
        loader.load_state_dict(state)
        next(iter(loader))
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def rows_per_s(loader: DataLoader) -> float:
    t0 = time.perf_counter()
    count = sum(len(batch) for batch in loader)
    return count / (time.perf_counter() - t0)


def remainder_vs_fresh(kind: str, rounds: int) -> float:
    n = 6 * 10**5
    half = n // 4 // 64 // 2
    states = old_states(kind, n, [half, half + 7, half - 3, half + 1])
    ratios = []
    for r in range(rounds):
        resized = make(kind, n, 3, 1)
        resized.load_state_dict(states)
        fresh = make(kind, n, 3, 1)
        if r % 2:  # alternate which runs first
            ratios.append(rows_per_s(resized) / rows_per_s(fresh))
        else:
            speed = rows_per_s(fresh)
            ratios.append(rows_per_s(resized) / speed)
    return statistics.median(ratios)


def main(argv: list[str]) -> None:
    rounds = int(argv[0]) if argv else 7
    print(json.dumps({"python": sys.version.split()[0], "loadavg_before": os.getloadavg()}))
    for kind in ("distributed", "shard"):
        for n in (10**3, 10**6, 10**12):
            half = n // 4 // 64 // 2
            states = old_states(kind, n, [half] * 4)
            print(json.dumps({"case": kind, "n": n,
                              "resize_first_batch_ms": round(resize_ms(kind, n, states[0], rounds), 3),
                              "resize_first_batch_ms_list": round(resize_ms(kind, n, states, rounds), 3)}))
        print(json.dumps({"case": kind, "remainder_vs_fresh": round(remainder_vs_fresh(kind, rounds), 3)}))
    print(json.dumps({"loadavg_after": os.getloadavg()}))


if __name__ == "__main__":
    main(sys.argv[1:])
