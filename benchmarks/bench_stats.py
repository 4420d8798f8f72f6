"""Cost of ``DataLoader.stats`` per batch (always on), in ns.

Command (repository root)::

    python -m benchmarks.bench_stats

What is measured, per batch, median of 7 runs of 200,000 batches:

* ``record``: exactly the calls the engine adds per batch for the statistics:
  ``start``, ``fetched``, ``done`` on the building thread's ``Recorder``;
  ``begin``, the in-flight read and ``delivered`` on the ``ConsumerRecorder``
  (one thread runs both sides here; in the loader each recorder is written by
  one thread only, so no cache line moves between cores either);
* ``loader on`` / ``loader off``: ``DataLoader`` with 0 workers over free items
  (``__getitems__`` returns the indices, identity ``collate_fn``, batch_size 1),
  with the native recorders and with Python stand-ins whose methods do nothing
  (an upper bound on what is saved: a Python no-op call costs about what a
  native one does), interleaved.
"""

from __future__ import annotations

import statistics
import sys
import time

from dataloader import DataLoader
from dataloader._engine import stats
from dataloader._engine.stats import STATS_SAMPLES
from dataloader._native._ring import Window
from dataloader._native._stats import ConsumerRecorder, Recorder

N = 200_000


def record_ns(n: int = N) -> float:
    rec, con, w = Recorder(STATS_SAMPLES), ConsumerRecorder(STATS_SAMPLES), Window(4)
    t = time.perf_counter()
    for _ in range(n):
        rec.start()
        rec.fetched()
        rec.done()
        con.begin()
        con.delivered(w.claimed - w.base)
    return (time.perf_counter() - t) / n * 1e9


def _noop(self: object, *args: object) -> None:
    pass


class Free:
    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> int:
        return i

    def __getitems__(self, indices: list[int]) -> list[int]:
        return indices


class _Off:
    """Recorders whose methods do nothing (the loader without statistics)."""

    def __init__(self, capacity: int) -> None:
        pass

    start = fetched = transformed = failed = done = begin = delivered = _noop


def loader_ns(off: bool) -> float:
    saved = stats.Recorder, stats.ConsumerRecorder
    if off:
        stats.Recorder = stats.ConsumerRecorder = _Off  # type: ignore[misc, assignment]
    try:
        loader = DataLoader(Free(), batch_size=1, collate_fn=lambda b: b)
        t = time.perf_counter()
        for _ in loader:
            pass
        return (time.perf_counter() - t) / N * 1e9
    finally:
        stats.Recorder, stats.ConsumerRecorder = saved


def main() -> None:
    rec, on, off = [], [], []
    for _ in range(7):
        rec.append(record_ns())
        on.append(loader_ns(False))
        off.append(loader_ns(True))
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"python {sys.version.split()[0]} gil={'on' if gil else 'off'}")
    print(f"record (both sides)       {statistics.median(rec):7.0f} ns/batch")
    print(f"loader, stats on          {statistics.median(on):7.0f} ns/batch")
    print(f"loader, no-op recorders   {statistics.median(off):7.0f} ns/batch")


if __name__ == "__main__":
    main()
