"""Per-batch overhead of the epoch engine (claim window + reorder ring), free items.

Command (repository root, after ``python -m pip install -e '.[test]'``)::

    python -m pytest benchmarks/bench_ring.py --benchmark-only -s

or ``python -m benchmarks.bench_ring`` for the table alone.

What is measured, in µs per batch (the work per batch is nothing, so this is
the engine's own cost):

* ``primitive_1thread``: one thread runs publish -> claim -> complete -> wait ->
  release on a ``Window``: the atomics alone;
* ``primitive_2threads``: a consumer thread publishes/waits/releases while one
  worker thread claims/completes: adds the cross-thread hand-off (sleeping and
  waking only when one side runs dry);
* ``loader_free_w{0,2}``: ``DataLoader`` over a dataset whose ``__getitems__``
  returns the indices, ``collate_fn`` identity, batch_size 1: the whole Python
  path (sampler, fetch, ring, hand-off) with 0 and 2 worker threads.

Machine caveats: the reference machine has 2 shared cores; figures move with
other load.  Targets (issue 2): <= 5 µs per batch on 3.13t.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from dataloader import DataLoader
from dataloader._native._ring import Window

N_BATCHES = 100_000


def primitive_1thread(n: int = N_BATCHES) -> float:
    """Seconds per batch for the single-threaded ring cycle."""
    w = Window(4)
    t = time.perf_counter()
    for k in range(n):
        w.publish()
        w.claim()
        w.complete(k)
        w.wait(k)
        w.release(k)
    return (time.perf_counter() - t) / n


def primitive_2threads(n: int = N_BATCHES, size: int = 4) -> float:
    """Seconds per batch with one worker thread claiming and completing."""
    w = Window(size)

    def worker() -> None:
        while (k := w.claim()) >= 0:
            w.complete(k)

    th = threading.Thread(target=worker)
    th.start()
    t = time.perf_counter()
    published = 0
    for _ in range(size):
        w.publish()
        published += 1
    for k in range(n):
        w.wait(k)
        w.release(k)
        if published < n:
            w.publish()
            published += 1
    elapsed = time.perf_counter() - t
    w.finish()
    th.join()
    return elapsed / n


class Free:
    """Items cost nothing: the loader's own overhead is all that is left."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i

    def __getitems__(self, indices: list[int]) -> list[int]:
        return indices


def _identity(batch: object) -> object:
    return batch


def loader_free(num_workers: int, n: int = N_BATCHES // 2) -> float:
    """Seconds per batch through DataLoader with free items."""
    loader = DataLoader(Free(n), batch_size=1, num_workers=num_workers, collate_fn=_identity)
    t = time.perf_counter()
    count = sum(1 for _ in loader)
    elapsed = time.perf_counter() - t
    loader.close()
    assert count == n
    return elapsed / n


CASES = {
    "primitive_1thread": primitive_1thread,
    "primitive_2threads": primitive_2threads,
    "loader_free_w0": lambda: loader_free(0),
    "loader_free_w2": lambda: loader_free(2),
}


@pytest.mark.benchmark(group="ring-overhead")
@pytest.mark.parametrize("case", list(CASES))
def test_ring_overhead(benchmark, case):
    per_batch = benchmark.pedantic(CASES[case], rounds=3, iterations=1)
    benchmark.extra_info["us_per_batch"] = per_batch * 1e6
    print(f"\n{case}: {per_batch * 1e6:.2f} us/batch")


def main() -> None:
    print(f"# {sys.version.split()[0]} gil={getattr(sys, '_is_gil_enabled', lambda: True)()}")
    for name, fn in CASES.items():
        runs = sorted(fn() for _ in range(3))
        print(f"{name:22s} {runs[1] * 1e6:8.2f} us/batch (median of 3)")


if __name__ == "__main__":
    main()
