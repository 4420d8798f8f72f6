"""The error policy's cost: throughput with 1% failing items under ``on_error="skip"`` and
``"replace"`` against the same loader over clean data (issue 23's goal: >= 0.95x).

Two workloads, each timed as interleaved contenders (every contender one epoch per round, the
order rotated each round, ``--rounds`` rounds after one warm-up epoch each; the figure is the
median), from ONE run:

- images: an ``ImageFolder`` of ``--images`` small JPEGs (64x64, 10 classes, made from the
  committed test photographs), ``Decode().then(CenterCrop(48))``, ``ImageCollator``, batch 32,
  ``num_workers=2``; 1% of the files corrupt (their entropy-coded data overwritten);
- http: ``HttpDataset`` of ``--urls`` URLs against a local server in a process of its own
  (``--latency-s`` 5 ms per answer, 4 KiB bodies), batch 64, ``num_workers=2``,
  ``item_concurrency=16``; 1% of the URLs answer 404 at once (a permanent failure).

Contenders per workload: clean data with ``on_error="raise"`` (the baseline), clean data
with ``"skip"`` (the policy's own cost: no failure), and the 1%-failing data with ``"skip"``
and with ``"replace"``.  The ratio is items *seen* per second (the epoch's items, failing
ones included) over the baseline's: a skipped item still had to be tried.  Two ratios: wall
clock, and CPU time of this process (all its threads; the HTTP server runs in another), which
other jobs on a shared machine disturb much less.

Run: ``PYTHONPATH=. python benchmarks/bench_error_policy.py`` (``--images``, ``--urls``,
``--rounds``).  Prints the load average at the start, one line per contender (median, every
round, ratio) and a JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import DelayedReplies, server_process
from benchmarks._harness import serve as serve_until_stdin_closes
from benchmarks._rates import interleave

PHOTOS = Path(__file__).resolve().parents[1] / "tests" / "data"
CLASSES = 10
BAD_EVERY = 100  # 1% of the items fail


def make_folder(root: Path, n: int) -> tuple[Path, Path]:
    """Two ``ImageFolder`` trees of ``n`` 64x64 JPEGs each: clean, and with 1% corrupt."""
    from PIL import Image

    photos = [Image.open(p).convert("RGB").resize((64, 64)) for p in sorted(PHOTOS.glob("*.jpg"))]
    clean, broken = root / "clean", root / "broken"
    for i in range(n):
        for tree in (clean, broken):
            (tree / f"c{i % CLASSES}").mkdir(parents=True, exist_ok=True)
        path = f"c{i % CLASSES}/{i:05d}.jpg"
        photos[i % len(photos)].save(clean / path, quality=90)
        data = (clean / path).read_bytes()
        if i % BAD_EVERY == BAD_EVERY // 2:
            data = data[:20] + bytes(range(256)) * 4
        (broken / path).write_bytes(data)
    return clean, broken


def serve(latency_s: float, size: int) -> None:
    """The server process: prints its port; ``/bad/...`` answers 404 at once, anything else 200
    with ``size`` bytes after ``latency_s``; serves until stdin closes."""
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"b" * size
    bad = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"

    def answer(head: bytes) -> tuple[float, bytes]:
        return (0, bad) if b" /bad/" in head.split(b"\r\n", 1)[0] else (latency_s, ok)

    serve_until_stdin_closes(lambda host, port: asyncio.get_running_loop().create_server(
        lambda: DelayedReplies(answer), host, port, backlog=4096))


def epoch_s(make: Callable[[], Any]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (this process, all its threads) of one epoch of a new loader
    (its threads started outside the timing)."""
    with make() as loader:
        it = iter(loader)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in it:
            pass
        return time.perf_counter() - start, time.process_time() - cpu


def interleaved(contenders: dict[str, Callable[[], Any]], items: int, rounds: int) -> dict[str, Any]:
    """Every contender one warm-up epoch, then one epoch per round, round-robin (rotated); medians."""
    for make in contenders.values():
        epoch_s(make)
    times = interleave({name: (lambda make=make: epoch_s(make)) for name, make in contenders.items()}, rounds)
    base = statistics.median(w for w, _ in times["clean, raise"])
    base_cpu = statistics.median(c for _, c in times["clean, raise"])
    out = {}
    for name, runs in times.items():
        med = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        out[name] = {"items_per_s": items / med, "ratio": base / med, "cpu_ratio": base_cpu / cpu,
                     "rounds_s": [w for w, _ in runs], "cpu_s": [c for _, c in runs]}
        print(f"  {name:<22} {items / med:10,.0f} items/s  {base / med:5.2f}x wall  {base_cpu / cpu:5.2f}x CPU   "
              "rounds: " + " ".join(f"{w * 1e3:.0f}" for w, _ in runs) + " ms")
    return out


def images(n: int, rounds: int) -> dict[str, Any]:
    from dataloader import DataLoader
    from dataloader.image import CenterCrop, Decode, ImageCollator, ImageFolder

    with tempfile.TemporaryDirectory() as tmp:
        clean, broken = make_folder(Path(tmp), n)

        def loader(root: Path, policy: str) -> Callable[[], Any]:
            return lambda: DataLoader(ImageFolder(str(root)), batch_size=32, shuffle=True, seed=1, num_workers=2,
                                      transform=Decode().then(CenterCrop(48)), collate_fn=ImageCollator(),
                                      on_error=policy)

        print(f"images: ImageFolder of {n} 64x64 JPEGs, 1% corrupt, batch 32, num_workers=2")
        return interleaved({"clean, raise": loader(clean, "raise"), "clean, skip": loader(clean, "skip"),
                            "1% bad, skip": loader(broken, "skip"), "1% bad, replace": loader(broken, "replace")},
                           n, rounds)


def http(n: int, rounds: int, latency_s: float) -> dict[str, Any]:
    from dataloader import DataLoader
    from dataloader.io import HttpDataset

    with server_process(__file__, f"--latency-s={latency_s}") as port:
        base = f"http://127.0.0.1:{port}"
        clean = [f"{base}/item/{i}" for i in range(n)]
        broken = [f"{base}/bad/{i}" if i % BAD_EVERY == BAD_EVERY // 2 else u for i, u in enumerate(clean)]

        def loader(urls: list[str], policy: str) -> Callable[[], Any]:
            return lambda: DataLoader(HttpDataset(urls, max_connections=0), batch_size=64, shuffle=True, seed=1,
                                      num_workers=2, item_concurrency=16, collate_fn=len, on_error=policy)

        print(f"http: HttpDataset of {n} URLs, {latency_s * 1e3:g} ms latency, 1% 404, batch 64, "
              "num_workers=2, item_concurrency=16")
        return interleaved({"clean, raise": loader(clean, "raise"), "clean, skip": loader(clean, "skip"),
                            "1% bad, skip": loader(broken, "skip"), "1% bad, replace": loader(broken, "replace")},
                           n, rounds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--urls", type=int, default=4000)
    parser.add_argument("--latency-s", type=float, default=0.005)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency_s, 4096)
        return
    load = os.getloadavg()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}{'' if gil else 't'}; load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    summary = {"load_average": load, "images": images(args.images, args.rounds),
               "http": http(args.urls, args.rounds, args.latency_s)}
    print(json.dumps(summary, default=lambda v: float(v) if isinstance(v, np.floating) else str(v)))


if __name__ == "__main__":
    main()
