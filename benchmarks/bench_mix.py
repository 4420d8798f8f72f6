"""Samples/s of a 3-source ``MixDataset`` of cheap sources against one source alone (the mix's
overhead), and against Hugging Face ``datasets.interleave_datasets`` where ``datasets`` imports.

Command (repository root)::

    python -m benchmarks.bench_mix                  # 600,000 samples an epoch, batches of 64
    python -m benchmarks.bench_mix --rows 30000     # CI size

Every contender is one shuffled epoch of ``--rows`` samples (weights 0.5 / 0.3 / 0.2 over three
sources of ``rows/2``, ``rows·0.3``, ``rows/5`` items, ``stop_on="first_exhausted"``: about
``--rows`` samples), batches of 64, rounds interleaved, medians printed:

* ``one ints Nw`` / ``mix ints Nw``: ``DataLoader(..., batch_size=64, shuffle=True,
  num_workers=N)`` over one pure-Python dataset of ``--rows`` ints (``__getitem__`` returns
  ``i``), or over the mix of three such datasets (the mix's ``__getitems__``: placement with
  NumPy, one ``__getitems__``-or-items call per source, rows put back in order);
* ``one array Nw`` / ``mix array Nw``: the same over ``ArrayDataset`` s of ``(n, 8)`` float32
  rows: one source alone takes the native batch path with workers, which the mix does not
  (its batches come through ``__getitems__`` as ``BatchedItems``);
* ``placement``: ``MixDataset.source_of`` alone over the shuffled epoch in batches of 64;
* ``hf interleave``: ``datasets.interleave_datasets`` of three ``Dataset.from_dict`` (the same
  sizes and weights, ``first_exhausted``, a new seed each epoch as a new epoch's mix needs;
  its index list is built eagerly, counted in the time) then ``.shuffle`` and ``.iter(64)``
  with the NumPy format; ``hf one``: one such dataset shuffled and iterated the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks._rates import measure
from dataloader import ArrayDataset, DataLoader, Dataset, MixDataset

BATCH = 64
WEIGHTS = [0.5, 0.3, 0.2]


class Ints(Dataset):
    """Item ``i`` is ``i``: the cheapest pure-Python item."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


def sizes(rows: int) -> list[int]:
    return [max(1, int(rows * w)) for w in WEIGHTS]


def loader_run(dataset: Any, workers: int) -> Callable[[], int]:
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=workers, persistent_workers=workers > 0)

    def run() -> int:
        return sum(_samples(b) for b in loader)
    return run


def _samples(batch: Any) -> int:
    """Samples in a batch: an array of ints, or ``ArrayDataset``'s one-column list."""
    return len(batch[0]) if isinstance(batch, list) else len(batch)


def placement_run(mix: MixDataset) -> Callable[[], int]:
    rng = np.random.default_rng(0)

    def run() -> int:
        order = rng.permutation(len(mix))
        for start in range(0, len(order), BATCH):
            mix.source_of(order[start:start + BATCH])
        return len(order)
    return run


def hf_runs(rows: int) -> dict[str, Callable[[], int]]:
    try:
        import datasets  # lazy: optional (3.11 only here)
    except ImportError:
        return {}
    parts = [datasets.Dataset.from_dict({"x": np.arange(n)}) for n in sizes(rows)]
    epoch = iter(range(1 << 30))

    def iterate(ds: Any) -> int:
        return sum(len(b["x"]) for b in ds.shuffle(seed=next(epoch)).with_format("numpy").iter(batch_size=BATCH))

    def mixed() -> int:
        mix = datasets.interleave_datasets(parts, probabilities=WEIGHTS, seed=next(epoch),
                                           stopping_strategy="first_exhausted")
        return iterate(mix)
    one = datasets.Dataset.from_dict({"x": np.arange(rows)})
    return {"hf interleave": mixed, "hf one": lambda: iterate(one)}


def contenders(rows: int) -> dict[str, Callable[[], int]]:
    out: dict[str, Callable[[], int]] = {}
    n = sizes(rows)
    for workers in (0, 2):
        out[f"one ints {workers}w"] = loader_run(Ints(rows), workers)
        out[f"mix ints {workers}w"] = loader_run(MixDataset([Ints(k) for k in n], WEIGHTS, seed=0), workers)
        rows_of = [ArrayDataset(np.ones((k, 8), np.float32)) for k in n]
        out[f"one array {workers}w"] = loader_run(ArrayDataset(np.ones((rows, 8), np.float32)), workers)
        out[f"mix array {workers}w"] = loader_run(MixDataset(rows_of, WEIGHTS, seed=0), workers)
    out["placement"] = placement_run(MixDataset([Ints(k) for k in n], WEIGHTS, seed=0))
    out.update(hf_runs(rows))
    return out



def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    load = os.getloadavg()
    rates = measure(contenders(args.rows), args.rounds)
    print(json.dumps({
        "python": sys.version.split()[0],
        "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
        "rows": args.rows, "rounds": args.rounds,
        "load_average_at_start": [round(x, 2) for x in load],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "samples_per_s": {k: round(v) for k, v in rates.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
