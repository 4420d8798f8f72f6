"""Median items/s of interleaved contenders: the one timing loop of bench_parquet, bench_hf and
bench_mix (each contender one run per round, the order rotated every round so that no contender
always runs first on a shared, noisy machine)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def measure(runs: dict[str, Callable[[], int]], rounds: int) -> dict[str, float]:
    """Median of ``count / seconds`` over ``rounds`` rounds for each contender of ``runs``
    (a callable that runs once and returns how many items, rows or samples it produced)."""
    rates: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            start = time.perf_counter()
            count = runs[name]()
            rates[name].append(count / (time.perf_counter() - start))
    return {name: statistics.median(v) for name, v in rates.items()}
