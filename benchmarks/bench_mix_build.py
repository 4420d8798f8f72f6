"""Time and peak traced memory of building a ``MixDataset`` whose weights are near the ``2**-24``
limit (16 Mi-position blocks), against ordinary weights.

Command (repository root)::

    python -m benchmarks.bench_mix_build            # 7 rounds, medians

Sources are ``ArrayDataset`` s of 1,000 and 10**6 items (77, 1,000 and 10**6 with three); each
line is one ``MixDataset(...)`` call (its stop plan: the bisection for the whole blocks and the
final block's search), rounds interleaved, the median time and the peak of ``tracemalloc``
(NumPy's buffers included) printed, with the load average.
"""

from __future__ import annotations

import os
import statistics
import time
import tracemalloc

import numpy as np

from dataloader import ArrayDataset, MixDataset

CASES = [([1, 1], (1000, 10**6)), ([1, 2**10], (1000, 10**6)), ([1, 2**20], (1000, 10**6)),
         ([1, 2**23 - 1], (1000, 10**6)), ([2**23 - 1, 1], (10**6, 1000)), ([3, 1, 2**24 - 10], (77, 1000, 10**6))]


def build(weights: list[int], sizes: tuple[int, ...], stop_on: str) -> tuple[float, int]:
    """Seconds and peak traced bytes of one construction."""
    sources = [ArrayDataset(np.arange(n)) for n in sizes]
    tracemalloc.start()
    start = time.perf_counter()
    MixDataset(sources, weights, stop_on=stop_on)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak


def main(rounds: int = 7) -> None:
    keys = [(w, n, stop) for w, n in CASES for stop in ("first_exhausted", "all_exhausted")]
    times: dict[int, list[float]] = {i: [] for i in range(len(keys))}
    peaks: dict[int, int] = {i: 0 for i in range(len(keys))}
    for _ in range(rounds):
        for i, key in enumerate(keys):
            seconds, peak = build(*key)
            times[i].append(seconds)
            peaks[i] = max(peaks[i], peak)
    print(f"load average {os.getloadavg()}")
    for i, (w, n, stop) in enumerate(keys):
        print(f"{str(w):>20} {stop:>16}: {statistics.median(times[i]) * 1e3:7.2f} ms, peak {peaks[i] / 2**20:6.2f} MiB")


if __name__ == "__main__":
    main()
