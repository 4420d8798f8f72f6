"""Rows/s over a Hugging Face ``datasets.Dataset``: our loaders (``HFDataset``: one Arrow take per
batch) against torch's ``DataLoader`` over the same dataset (HF's ``__getitems__``).

Command (repository root, 3.11: ``datasets`` does not install on 3.13t)::

    python -m benchmarks.bench_hf               # 10^5 rows
    python -m benchmarks.bench_hf --rows 4096   # CI size

The dataset: ``datasets.Dataset.from_dict`` of ``--rows`` rows, four numeric columns (int64,
float32, float64, bool) and one string column, no format set (HF's Python rows).  Batches of
256 rows, one epoch per measure (``shuffle`` with a fixed seed), rounds interleaved, medians
printed:

* ``ours seq|shuf Nw``: ``dataloader.DataLoader(ds, batch_size=256, shuffle=...,
  num_workers=N)`` (N worker threads): dicts of NumPy columns, the string column a list.
* ``ours-torch seq|shuf Nw``: ``dataloader.torch.DataLoader``, the same with tensors (the
  batches torch's ``DataLoader`` gives; tests/formats/test_hf.py checks they are equal).
* ``torch seq|shuf Nw``: ``torch.utils.data.DataLoader(ds, ...)`` (N worker processes, started
  every epoch as torch does without ``persistent_workers``): HF's ``__getitems__`` (one Arrow
  query, then a dict per row), torch's ``default_collate``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import datasets
import numpy as np

from benchmarks._rates import measure
import dataloader

BATCH = 256


def make_dataset(rows: int) -> Any:
    rng = np.random.default_rng(0)
    return datasets.Dataset.from_dict({
        "id": np.arange(rows), "x": rng.random(rows, dtype=np.float32), "y": rng.standard_normal(rows),
        "flag": rng.random(rows) < 0.5, "text": [f"row-{i}" for i in range(rows)],
    })


def epoch(make_loader: Callable[[], Any]) -> Callable[[], int]:
    def run() -> int:
        loader = make_loader()
        rows = 0
        for batch in loader:
            rows += len(batch["text"])
        close = getattr(loader, "close", None)
        if close is not None:
            close()
        return rows
    return run


def contenders(ds: Any) -> dict[str, Callable[[], int]]:
    out: dict[str, Callable[[], int]] = {}
    faces: list[tuple[str, Any]] = [("ours", dataloader.DataLoader)]
    try:
        import torch.utils.data as tud  # lazy: optional

        import dataloader.torch as dt  # lazy: needs torch
    except ImportError:
        tud = None
    else:
        faces += [("ours-torch", dt.DataLoader), ("torch", tud.DataLoader)]
    for order, shuffle in (("seq", False), ("shuf", True)):
        for workers in (0, 2):
            for name, cls in faces:
                def make(cls: Any = cls, shuffle: bool = shuffle, workers: int = workers) -> Any:
                    return cls(ds, batch_size=BATCH, shuffle=shuffle, num_workers=workers)
                out[f"{name} {order} {workers}w"] = epoch(make)
    return out



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    ds = make_dataset(args.rows)
    rates = measure(contenders(ds), args.rounds)
    print(json.dumps({
        "python": sys.version.split()[0], "datasets": datasets.__version__,
        "rows": args.rows, "rounds": args.rounds, "batch_size": BATCH,
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "rows_per_s": {k: round(v) for k, v in rates.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
