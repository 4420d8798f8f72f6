"""``DataLoader.start()``: the first batch is ready when the model's checkpoint has loaded.

Command (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m benchmarks.bench_start            # 5 rounds
    python -m benchmarks.bench_start 3          # fewer

A map-style dataset whose items each take ``ITEM_S`` (1 ms, a sleep: I/O-like, releases the
GIL), ``batch_size=16``: one batch takes about 16 ms to build.  Per round, interleaved:

* ``build_ms``: one batch built inside ``next()`` (``num_workers=0``): a batch's build time;
* ``started``: ``num_workers=2``, ``loader.start()``, a simulated checkpoint load
  (``time.sleep(1)``), then ``next(iter(loader))``; ``started_first_ms`` is the time from the
  end of the load to the first batch;
* ``cold``: the same without ``start()``: the first batch is built after the load
  (``cold_first_ms``).

Reported: medians over the rounds and ``started_over_build`` (target <= 0.05: the first batch
costs at most 5 % of one batch's build time after the load), with the load average before and
after (a 2-core VM shared with other work).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from dataloader.loader import DataLoader

ITEM_S = 0.001
BATCH = 16
LOAD_S = 1.0


class Slow:
    """Items that take ``ITEM_S`` each (a sleep)."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> int:
        time.sleep(ITEM_S)
        return i


def build_ms() -> float:
    loader = DataLoader(Slow(), batch_size=BATCH, shuffle=True, seed=0)
    it = iter(loader)
    t0 = time.perf_counter()
    next(it)
    return (time.perf_counter() - t0) * 1e3


def first_ms(start: bool) -> float:
    loader = DataLoader(Slow(), batch_size=BATCH, shuffle=True, seed=0, num_workers=2, prefetch_depth=2)
    if start:
        loader.start()
    time.sleep(LOAD_S)  # the model's checkpoint loads
    t0 = time.perf_counter()
    next(iter(loader))
    out = (time.perf_counter() - t0) * 1e3
    loader.close()
    return out


def main(argv: list[str]) -> None:
    rounds = int(argv[0]) if argv else 5
    print(json.dumps({"python": sys.version.split()[0], "loadavg_before": os.getloadavg()}))
    builds, started, cold = [], [], []
    for _ in range(rounds):
        builds.append(build_ms())
        started.append(first_ms(True))
        cold.append(first_ms(False))
    build = statistics.median(builds)
    first = statistics.median(started)
    print(json.dumps({
        "rounds": rounds, "build_ms": round(build, 3), "started_first_ms": round(first, 4),
        "cold_first_ms": round(statistics.median(cold), 3), "started_over_build": round(first / build, 4),
    }))
    print(json.dumps({"loadavg_after": os.getloadavg()}))


if __name__ == "__main__":
    main(sys.argv[1:])
