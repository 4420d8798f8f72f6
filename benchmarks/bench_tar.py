"""Samples/s reading WebDataset tar shards of small JPEGs: ``TarShardDataset`` + ``DataLoader``
(decoding with ``dataloader.image.Decode``) against ``webdataset.WebDataset`` + torch's
``DataLoader(num_workers=2)`` (decoding with Pillow, as a WebDataset user writes it).

Command (repository root)::

    python -m benchmarks.bench_tar                       # 16 shards x 1,000 samples
    python -m benchmarks.bench_tar --shards 4 --per-shard 64 --rounds 1   # CI size

The shards: ``--shards`` tars of ``--per-shard`` samples, each ``{key}.jpg`` (a 64x64 JPEG,
quality 90, cut from the committed test photographs; 64 distinct images reused) and
``{key}.cls`` (an int as text), written with the standard library's ``tarfile`` into a
temporary directory (page-cached after the first round).  Every contender reads one epoch of
all shards in order (no shuffle), decodes every JPEG to an ``(64, 64, 3)`` ``uint8`` array and
collates batches of 64 ``(images (64, 64, 64, 3), labels (64,))``; rounds interleaved, medians
printed, with the load average at the start (a 2-core machine shared with others: ratios of
one run, not absolutes).

* ``ours Nw``: ``DataLoader(TarShardDataset(pattern), batch_size=64, num_workers=N,
  transform=decode)`` (threads; ``default_collate``).
* ``wds+torch Nw`` (where webdataset and torch import): ``torch.utils.data.DataLoader(
  webdataset.WebDataset(pattern, shardshuffle=False).map(decode), batch_size=64,
  num_workers=N)`` (worker processes; torch's collate).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from dataloader import DataLoader, Decode, TarShardDataset

BATCH = 64
SIDE_PX = 64
PHOTOS = Path(__file__).resolve().parents[1] / "tests" / "data"


def jpegs(n: int = 64) -> list[bytes]:
    """``n`` distinct 64x64 JPEGs (quality 90) cut from the test photographs."""
    sources = [Image.open(p).convert("RGB") for p in sorted(PHOTOS.glob("*.jpg"))]
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        src = sources[i % len(sources)]
        side = int(rng.integers(64, min(src.size) + 1))
        left, top = int(rng.integers(0, src.size[0] - side + 1)), int(rng.integers(0, src.size[1] - side + 1))
        tile = src.resize((SIDE_PX, SIDE_PX), Image.Resampling.BILINEAR, box=(left, top, left + side, top + side))
        buf = io.BytesIO()
        tile.save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def write_shards(root: Path, shards: int, per_shard: int) -> str:
    """The shards (see the module); returns their brace pattern."""
    images = jpegs()
    for s in range(shards):
        with tarfile.open(root / f"train-{s:06d}.tar", "w") as tf:
            for i in range(per_shard):
                k = s * per_shard + i
                for name, data in ((f"{k:08d}.jpg", images[k % len(images)]), (f"{k:08d}.cls", str(k % 10).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tf.addfile(info, io.BytesIO(data))
    return str(root / f"train-{{000000..{shards - 1:06d}}}.tar")


def ours(pattern: str, workers: int) -> Callable[[], int]:
    decode = Decode()

    def transform(sample: dict[str, Any]) -> tuple[np.ndarray, int]:
        return decode(sample["jpg"]), int(sample["cls"])

    def run() -> int:
        loader = DataLoader(TarShardDataset(pattern), batch_size=BATCH, num_workers=workers, transform=transform)
        return sum(len(labels) for _, labels in loader)

    return run


def _pil_decode(sample: dict[str, Any]) -> tuple[np.ndarray, int]:
    with Image.open(io.BytesIO(sample["jpg"])) as im:
        return np.array(im.convert("RGB")), int(sample["cls"])


def wds_torch(pattern: str, workers: int) -> Callable[[], int] | None:
    try:
        import torch.utils.data
        import webdataset
    except ImportError:
        return None

    def run() -> int:
        # webdataset 1.0.2 leaves a shard's file open (a ResourceWarning when it is collected):
        # collected here, in this contender's time, with that warning silenced.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            ds = webdataset.WebDataset(pattern, shardshuffle=False, empty_check=False).map(_pil_decode)
            loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=workers)
            n = sum(len(labels) for _, labels in loader)
            del ds, loader
            gc.collect()
        return n

    return run


def measure(runs: dict[str, Callable[[], int]], rounds: int) -> tuple[dict[str, float], dict[str, int]]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    counts: dict[str, int] = {}
    for _ in range(rounds):
        for name, run in runs.items():
            t0 = time.perf_counter()
            counts[name] = run()
            times[name].append(time.perf_counter() - t0)
    return {name: counts[name] / statistics.median(ts) for name, ts in times.items()}, counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args(argv)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        pattern = write_shards(Path(tmp), args.shards, args.per_shard)
        runs: dict[str, Callable[[], int]] = {f"ours {w}w": ours(pattern, w) for w in args.workers}
        for w in args.workers:
            theirs = wds_torch(pattern, w)
            if theirs is not None:
                runs[f"wds+torch {w}w"] = theirs
        rates, counts = measure(runs, args.rounds)
    expected = args.shards * args.per_shard
    assert all(c == expected for c in counts.values()), counts
    print(json.dumps({"python": sys.version.split()[0], "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
                      "samples": expected, "samples_per_s": {k: round(v) for k, v in rates.items()},
                      "load_average_at_start": [round(x, 2) for x in load]}, indent=1))


if __name__ == "__main__":
    main()
