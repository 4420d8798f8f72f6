"""Scaling with worker threads: 0, 1, 2, 4, ... up to ``--max-workers`` (default 16) and "auto".

For a machine with more cores than the 2-core reference (figures go to
docs/benchmarks.md, "Other benchmark scripts"); meant for 3.13t, where threads scale without a GIL::

    PYTHONPATH=. python benchmarks/scaling.py                    # W1, W2, W3; up to 16 workers
    PYTHONPATH=. python benchmarks/scaling.py --only W3 --max-workers 8 --quick

Workloads are those of ``benchmarks/compare.py`` (W1 ``ArrayDataset`` rows, W2
page-cached ``.ndf``, W3 ~30 µs pure-Python items).  Every count of one workload
is timed round-robin (``compare.interleaved``: one warm-up epoch each, then
``--epochs`` rounds; medians).  Printed per workload: items/s, the speedup over
0 workers and over 1 worker, and the count ``"auto"`` settled on.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from benchmarks.compare import (
    BATCH_W3,
    BATCH_W12,
    D,
    Contender,
    PythonItems,
    interleaved,
    loader_contender,
    machine,
    write_ndf,
)
from dataloader import ArrayDataset, DataLoader
from dataloader.ndf import NdfDataset


def counts(max_workers: int) -> list[int | str]:
    out: list[int | str] = [0, 1]
    w = 2
    while w <= max_workers:
        out.append(w)
        w *= 2
    if out[-1] != max_workers:
        out.append(max_workers)
    return [*out, "auto"]


def run(name: str, make_dataset: object, batch: int, shuffle: bool, workers: list[int | str], epochs: int) -> list[str]:
    ds = make_dataset()  # type: ignore[operator]
    loaders: dict[str, DataLoader] = {}

    def maker(w: int | str) -> object:
        def make() -> DataLoader:
            loaders[str(w)] = DataLoader(ds, batch_size=batch, shuffle=shuffle, num_workers=w, seed=0)
            return loaders[str(w)]

        return make

    cs: list[Contender] = [(f"{w} workers", loader_contender(maker(w)), "") for w in workers]
    rows = interleaved(cs, epochs)
    zero, one = rows[0].items_per_s, rows[1].items_per_s
    tuner = loaders["auto"]._engine.plan.tuner
    lines = [f"\n### {name}\n", "| workers | items/s | vs 0 workers | vs 1 worker |", "|---|---:|---:|---:|"]
    for r in rows:
        label = r.method.split()[0]
        if label == "auto" and tuner is not None:
            label = f"auto (settled on {tuner.active} of {tuner.cap})"
        lines.append(f"| {label} | {r.items_per_s:,.0f} | {r.items_per_s / zero:.2f}x | {r.items_per_s / one:.2f}x |")
    close = getattr(ds, "close", None)
    if close is not None:
        close()
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-workers", type=int, default=16)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--items", type=int, default=20_000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="--rows 100000 --items 2000")
    p.add_argument("--only", default="W1,W2,W3")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.items = 100_000, 2_000
    only = {w.strip().upper() for w in args.only.split(",")}
    workers = counts(args.max_workers)
    lines = ["## Scaling", "", *machine(), f"- load average at start {os.getloadavg()[0]:.2f}"]
    with tempfile.TemporaryDirectory() as folder:
        if "W1" in only:
            x = np.random.default_rng(0).standard_normal((args.rows, D))
            lines += run(f"W1: ArrayDataset {args.rows:,} x {D}, batch {BATCH_W12}", lambda: ArrayDataset(x),
                         BATCH_W12, True, workers, args.epochs)
        if "W2" in only:
            path = write_ndf(folder, args.rows)
            lines += run(f"W2: page-cached .ndf, {args.rows:,} rows", lambda: NdfDataset(path),
                         BATCH_W12, True, workers, args.epochs)
        if "W3" in only:
            lines += run(f"W3: ~30 µs Python items, {args.items:,}, batch {BATCH_W3}",
                         lambda: PythonItems(args.items), BATCH_W3, False, workers, args.epochs)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
