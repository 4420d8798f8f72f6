"""Hedged GETs against tail latency: batch latency with and without hedging.

A local HTTP/1.1 server, in a process of its own (asyncio protocols, as in
``bench_remote.py``), answers each GET after ``--latency-s`` (20 ms) with a ``--size``
(16 KiB) body, except that a request is slow with probability ``--slow-share`` (1%):
it answers after ``--slow-s`` (2 s), or never if the client closes the connection first
(a cancelled hedge loser).  Which requests are slow is drawn per request (seeded), not
per item: a second request for a slow item is most likely fast, as on a real store.

Contenders, run alternately (``--rounds``, each on a fresh loader), every one
``HttpDataset`` through ``DataLoader(num_workers=2, item_concurrency=32, batch_size=64, prefetch_depth=--prefetch-depth)``
(2, the default; a deeper window gives a hedge time to answer before its batch is due):

- ``off``: ``hedge_delay=0`` (exactly one request per item);
- ``auto``: the default, ``hedge_delay="auto"`` (2x the 95th percentile of recent
  latencies), ``hedge_budget=0.05``;
- ``fixed``: ``hedge_delay=--fixed-delay-s`` (0.1 s: 5x the server's latency), the same
  budget: what hedging gives when the delay is set from the known latency instead of
  the client's observed one (on a loaded 2-core machine the event loop's own queueing
  stretches the observed tail, and the derived delay with it).

Batch latency is what the consumer sees: the seconds each ``next()`` took, for every
batch after the first two (the first warms the connections and the latency window).
Reported per contender: p50, p99 and max (seconds, medians over rounds), p99/p50, and the
extra requests (hedges sent / items requested) from ``HttpDataset.request_counts()``.

Run: ``python benchmarks/bench_hedge.py`` (``--items``, ``--rounds``, ``--slow-share``,
``--slow-s``, ``--latency-s``, ``--fixed-delay-s``, ``--prefetch-depth``).  Prints the load average first, one line per run and a
JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from typing import Any


def serve(latency_s: float, size: int, slow_share: float, slow_s: float, seed: int) -> None:
    """The server process: prints its port, then serves until stdin closes."""
    response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"b" * size
    draw = random.Random(seed)

    class Protocol(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            self.buffer += data
            while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
                self.buffer = self.buffer[end + 4 :]
                wait = slow_s if draw.random() < slow_share else latency_s
                asyncio.get_running_loop().call_later(wait, self.reply)

        def reply(self) -> None:
            if not self.transport.is_closing():
                self.transport.write(response)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(Protocol, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await loop.run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(run())


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    pos = p / 100 * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def run_loader(port: int, items: int, hedge_delay: float | str, prefetch_depth: int) -> dict[str, float]:
    """One epoch; the seconds of each ``next()`` after the first two batches."""
    from dataloader import DataLoader, HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(f"http://127.0.0.1:{port}/item/{{index}}"), length=items),
                     max_connections=0, hedge_delay=hedge_delay)
    waits: list[float] = []
    with DataLoader(ds, batch_size=64, num_workers=2, item_concurrency=32, prefetch_depth=prefetch_depth,
                    collate_fn=len) as loader:
        it = iter(loader)
        next(it)
        next(it)
        while True:
            t0 = time.perf_counter()
            try:
                next(it)
            except StopIteration:
                break
            waits.append(time.perf_counter() - t0)
        stats = loader.stats
    counts = ds.request_counts()
    p50, p99 = percentile(waits, 50), percentile(waits, 99)
    return {
        "p50_s": p50, "p99_s": p99, "max_s": max(waits), "p99_over_p50": p99 / p50,
        "extra_requests": counts["hedges_sent"] / items,
        "hedges_sent": stats.hedges_sent, "hedges_won": stats.hedges_won,
        "delay_s": (ds.hedge.delay_s() or 0.0) if ds.hedge is not None else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-s", type=float, default=0.02)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--slow-share", type=float, default=0.01)
    parser.add_argument("--slow-s", type=float, default=2.0)
    parser.add_argument("--fixed-delay-s", type=float, default=0.1)
    parser.add_argument("--prefetch-depth", type=int, default=2)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency_s, args.size, args.slow_share, args.slow_s, seed=25)
        return
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"python {sys.version.split()[0]} gil={gil} loadavg={os.getloadavg()}", flush=True)
    argv = [sys.executable, __file__, "--serve", "--latency-s", str(args.latency_s), "--size", str(args.size),
            "--slow-share", str(args.slow_share), "--slow-s", str(args.slow_s)]
    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        contenders: list[tuple[str, float | str]] = [("off", 0), ("auto", "auto"), ("fixed", args.fixed_delay_s)]
        runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in contenders}
        for r in range(args.rounds):
            for name, delay in contenders:
                got = run_loader(port, args.items, delay, args.prefetch_depth)
                runs[name].append(got)
                print(f"round {r} {name:>4}: " + "  ".join(f"{k}={v:.4g}" for k, v in got.items()), flush=True)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)
    summary: dict[str, Any] = {
        name: {k: statistics.median(run[k] for run in rs) for k in rs[0]} for name, rs in runs.items()
    }
    summary["loadavg_end"] = list(os.getloadavg())
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
