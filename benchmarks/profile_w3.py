"""W3 on threads: where a worker's time goes, per item, in CPU time (robust to other load).

Issue 12 asks where W3 (``compare.PythonItems``: ~30 us of pure Python per item, batch 64)
loses against the 2.0x two cores allow with ``num_workers=2`` on 3.13t.  Wall-clock
figures on a shared machine mix in other processes; the CPU time of each thread
(``time.pthread_getcpuclockid``) does not, so this prints both::

    PYTHONPATH=. python benchmarks/profile_w3.py            # 12,800 items, 5 rounds
    PYTHONPATH=. python benchmarks/profile_w3.py --items 3200 --rounds 3

Rows: the plain sequential loop (compare.py's baseline); the same loop split over 2 bare
``threading.Thread`` (no loader: what the interpreter itself gives two threads); the loader
with 0, 1 and 2 workers.  Columns: items/s and the ratio to the sequential loop (wall
clock), then CPU us per item on the threads that run items (the workers; the consumer
itself with 0 workers) and on the consumer (waiting, waking, handing batches over).  Every
case runs one warm-up epoch, then the cases alternate for ``--rounds`` rounds (medians).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable

import numpy as np

from benchmarks.compare import BATCH_W3, PythonItems
from dataloader import DataLoader

Run = Callable[[], tuple[float, float, float]]
"""One epoch: (wall s, CPU s of the threads that ran items, CPU s of the consumer)."""


def _cpu(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def _plain(ds: PythonItems, lo: int, hi: int) -> None:
    for i in range(lo, hi, BATCH_W3):
        np.asarray([ds[j] for j in range(i, min(hi, i + BATCH_W3))])


def sequential(ds: PythonItems) -> Run:
    def run() -> tuple[float, float, float]:
        t0, c0 = time.perf_counter(), time.thread_time()
        _plain(ds, 0, len(ds))
        return time.perf_counter() - t0, time.thread_time() - c0, 0.0

    return run


def bare_threads(ds: PythonItems, count: int) -> Run:
    def run() -> tuple[float, float, float]:
        step = len(ds) // count
        cpu = [0.0] * count

        def body(k: int) -> None:
            c0 = time.thread_time()
            _plain(ds, k * step, (k + 1) * step)
            cpu[k] = time.thread_time() - c0

        threads = [threading.Thread(target=body, args=(k,)) for k in range(count)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return time.perf_counter() - t0, sum(cpu), 0.0

    return run


def loader(ds: PythonItems, workers: int) -> tuple[Run, Callable[[], None]]:
    dl = DataLoader(ds, batch_size=BATCH_W3, num_workers=workers)

    def run() -> tuple[float, float, float]:
        others = [t for t in threading.enumerate() if t is not threading.current_thread()]
        before = {t: _cpu(t) for t in others if t.is_alive()}
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in dl:
            pass
        wall, consumer = time.perf_counter() - t0, time.thread_time() - c0
        items = sum(_cpu(t) - c for t, c in before.items() if t.is_alive())
        return (wall, consumer, 0.0) if workers == 0 else (wall, items, consumer)

    return run, dl.close


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--items", type=int, default=12_800, help="items per epoch (default 12,800)")
    p.add_argument("--rounds", type=int, default=5, help="timed rounds (median; default 5)")
    args = p.parse_args(argv)
    ds = PythonItems(args.items)
    cases: dict[str, Run] = {"sequential loop": sequential(ds), "2 bare threads, no loader": bare_threads(ds, 2)}
    closers = []
    for w in (0, 1, 2):
        cases[f"loader, {w} worker{'s' if w != 1 else ''}"], close = loader(ds, w)
        closers.append(close)
    try:
        for run in cases.values():
            run()  # warm-up (starts the pools' threads)
        results: dict[str, list[tuple[float, float, float]]] = {k: [] for k in cases}
        for _ in range(args.rounds):
            for k, run in cases.items():
                results[k].append(run())
    finally:
        for close in closers:
            close()
    n = args.items
    base = statistics.median(r[0] for r in results["sequential loop"])
    print(f"{sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}, {n:,} items, batch {BATCH_W3}, "
          f"medians of {args.rounds} rounds")
    print("| run | items/s | vs sequential | CPU us/item, item threads | CPU us/item, consumer |")
    print("|---|---:|---:|---:|---:|")
    for k, rs in results.items():
        wall, items, consumer = (statistics.median(r[j] for r in rs) for j in range(3))
        print(f"| {k} | {n / wall:,.0f} | {base / wall:.2f}x | {items / n * 1e6:.2f} | {consumer / n * 1e6:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
