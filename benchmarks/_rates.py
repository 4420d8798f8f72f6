"""Interleaved contenders: each contender one run per round, the order rotated every round so
that no contender always runs first on a shared, noisy machine.  :func:`interleave` keeps what
every run returned (bench_remote, bench_event_loops, bench_ranges); :func:`measure` is the one
rows/s loop of bench_parquet, bench_hf and bench_mix on top of it."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["interleave", "measure"]

T = TypeVar("T")


def interleave(runs: dict[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """What each contender of ``runs`` returned in each of ``rounds`` rounds, in round order.

    Round ``r`` runs the contenders in ``runs``' order rotated by ``r``; so the ``r``-th
    result of every contender comes from the same round (ratios between contenders are
    taken round by round)."""
    got: dict[str, list[T]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            got[name].append(runs[name]())
    return got


def measure(runs: dict[str, Callable[[], int]], rounds: int) -> dict[str, float]:
    """Median of ``count / seconds`` over ``rounds`` rounds for each contender of ``runs``
    (a callable that runs once and returns how many items, rows or samples it produced)."""

    def timed(run: Callable[[], int]) -> Callable[[], float]:
        def once() -> float:
            start = time.perf_counter()
            count = run()
            return count / (time.perf_counter() - start)
        return once

    rates = interleave({name: timed(run) for name, run in runs.items()}, rounds)
    return {name: statistics.median(v) for name, v in rates.items()}
