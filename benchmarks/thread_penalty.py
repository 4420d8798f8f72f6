"""What two threads running at once cost each other, with no loader: CPU time per unit of work.

Issue 12 asks W3 (``compare.PythonItems``: ~30 us of pure Python an item) to reach 1.85x
the sequential loop with 2 workers on 3.13t; ``profile_w3.py`` found two bare threads
reaching only ~1.74x on the 2-core reference machine.  This separates the machine from the
interpreter: each kind of work runs on 1 thread, then on 2 threads at once (alternating,
medians), and the table gives the CPU time per unit of each thread
(``time.thread_time``, so other load on the machine adds little) and its ratio::

    PYTHONPATH=. python benchmarks/thread_penalty.py              # 7 rounds
    PYTHONPATH=. python benchmarks/thread_penalty.py --rounds 3

Kinds of work:

* ``W3 item``: ``PythonItems.__getitem__``, whose sum leaves the small-int cache (a new
  int object per step: the allocator on every step);
* ``W3 loop, small ints``: the same loop whose sum stays a small (immortal) int;
* ``sha256 of 64 KiB`` and ``zlib level 6``: C code that releases the GIL (on 3.11 too),
  no Python between the calls' ends: what the cores themselves give two threads.

A ratio near 1.00 means the second thread costs the first nothing; ``2 / ratio`` is then
the most two threads can reach over one, before any loader.  Each thread indexes its own
list of ints made on that thread (the loader's workers get the sampler's ints, made on the
consumer thread: ``--main-ints`` measures that case).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import threading
import time
import zlib
from collections.abc import Callable

from benchmarks.compare import ITEM_LOOP_STEPS, PythonItems

Work = Callable[[int], object]


def small_int_loop(i: int) -> int:
    """W3's loop, but its sum stays below 128: no int object is allocated for it."""
    s = 0
    for k in range(ITEM_LOOP_STEPS):
        s = (s + ((k ^ i) & 7)) & 127
    return s


_BUF = b"x" * (64 * 1024)
_ZDATA = bytes(range(256)) * 256


def sha256(_: int) -> bytes:
    return hashlib.sha256(_BUF).digest()


def deflate(_: int) -> bytes:
    return zlib.compress(_ZDATA, 6)


def kinds() -> dict[str, tuple[Work, int]]:
    """Name -> (one unit of work, units per thread per round)."""
    ds = PythonItems(1 << 30)
    return {
        "W3 item (allocates ints)": (ds.__getitem__, 2000),
        "W3 loop, small ints": (small_int_loop, 2000),
        "sha256 of 64 KiB (C)": (sha256, 1500),
        "zlib level 6 of 64 KiB (C)": (deflate, 150),
    }


def run(work: Work, units: int, threads: int, main_ints: list[int] | None) -> tuple[float, float]:
    """(wall seconds, mean CPU seconds per unit of one thread) for ``threads`` threads at once."""
    cpu = [0.0] * threads
    go = threading.Barrier(threads + 1)

    def body(j: int) -> None:
        ints = main_ints if main_ints is not None else [x + 0 for x in range(1000, 1000 + units)]
        go.wait()  # every thread starts its units together (a thread's start-up is not timed)
        c0 = time.thread_time()
        for t in range(units):
            work(ints[t])
        cpu[j] = (time.thread_time() - c0) / units

    ts = [threading.Thread(target=body, args=(j,)) for j in range(threads)]
    for t in ts:
        t.start()
    go.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, statistics.mean(cpu)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=7, help="alternating rounds of 1 and 2 threads (median; default 7)")
    p.add_argument("--main-ints", action="store_true", help="the threads index ints made on the main thread")
    args = p.parse_args(argv)
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"{sys.version.split()[0]} ({'GIL' if gil else 'free-threaded, GIL disabled'}), "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, medians of {args.rounds} rounds"
          + (", ints made on the main thread" if args.main_ints else ""))
    print("| work | CPU us/unit, 1 thread | CPU us/unit, each of 2 at once | ratio | wall, 2 threads vs 1 |")
    print("|---|---:|---:|---:|---:|")
    for name, (work, units) in kinds().items():
        ints = [x + 0 for x in range(1000, 1000 + units)] if args.main_ints else None
        run(work, units, 2, ints)  # warm-up
        one, two = [], []
        for _ in range(args.rounds):
            one.append(run(work, units, 1, ints))
            two.append(run(work, units, 2, ints))
        c1 = statistics.median(c for _, c in one)
        c2 = statistics.median(c for _, c in two)
        w1 = statistics.median(w for w, _ in one)
        w2 = statistics.median(w for w, _ in two)
        print(f"| {name} | {c1 * 1e6:.2f} | {c2 * 1e6:.2f} | {c2 / c1:.3f} | {2 * w1 / w2:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
