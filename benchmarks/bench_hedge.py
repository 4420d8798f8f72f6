"""Hedged GETs against tail latency: the training step's time with and without hedging.

A local HTTP/1.1 server, in a process of its own (``_harness.server_process`` and
``DelayedReplies``, as in ``bench_remote.py``), answers each GET after ``--latency-s`` (20 ms) with a ``--size``
(16 KiB) body, except that a request is slow with probability ``--slow-share`` (1%):
it answers after ``--slow-s`` (2 s), or never if the client closes the connection first
(a cancelled hedge loser).  Which requests are slow is drawn per request (seeded), not
per item: a second request for a slow item is most likely fast, as on a real store.  A
second server, the same with no slow request, measures the clean batch period.

Contenders, every one ``HttpDataset`` through ``DataLoader(num_workers=2,
item_concurrency=32, batch_size=64, prefetch_depth=D)`` for each D of ``--prefetch-depths``
(2, the default, 4 and 8; depth 8: the window's lead over the consumer then covers a hedge's
delay plus its own request on 3.13t):

- ``clean``: ``hedge_delay=0`` against the server with no slow request: the floor, what the
  machine's own noise (a shared 2-core machine: other processes, the GIL) does to the
  step time with no slow request at all;
- ``off``: ``hedge_delay=0`` (exactly one request per item);
- ``auto``: the default, ``hedge_delay="auto"`` (derived from recent latencies),
  ``hedge_budget=0.05``;
- ``fixed``: ``hedge_delay=--fixed-delay-s`` (0.1 s: 5x the server's latency), the same
  budget: the delay set from the known latency instead of the client's observed one.

**The consumer** is a training loop, ``for batch in loader: time.sleep(S)`` (a GPU step is
a sleep from the CPU's view; its first step takes ``--warmup-s``, 1 s, as a first step
that compiles or allocates does, so that the window has filled when the measured steps
begin: without it, the loader's lead over the consumer grows by only 0.25 of a period a
step and a hedge cannot answer in time for the first ~15 batches), with
``S = --headroom`` (1.25) x the loader's clean batch
period: the median seconds between two ``next()`` returns of the same contender, same
``prefetch_depth``, consuming as fast as it can from the server without slow requests,
measured in the same round just before.  The loader then has 20% headroom, as a loader that
is not the bottleneck should.  What the user sees of the tail is the **step time**:
``S + `` the seconds ``next()`` waited, for every batch after the first two (the first warms
the connections and the latency window).  Reported per contender and depth: step p50, p99
and max (seconds), p99/p50 (the goal of issue 25: <= 1.3 with hedging, extra requests <=
5%), extra requests (hedges sent / items, from ``HttpDataset.request_counts()``), the
hedges won, the delay at the end, ``S``; and, secondary, the ``next()`` wait's p50/p99
(a deep window answers most ``next()`` in microseconds, so its ratio means little).
Medians over ``--rounds``; in each round the contenders run alternately, their order
rotated by one each round, each on a fresh loader.

Run: ``PYTHONPATH=. nice -n -10 python benchmarks/bench_hedge.py`` (``--items``, ``--rounds``,
``--slow-share``, ``--slow-s``, ``--latency-s``, ``--fixed-delay-s``,
``--prefetch-depths``, ``--headroom``).  Prints the load average first, one line per run
and a JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import time
from typing import Any

from benchmarks._harness import DelayedReplies, server_process
from benchmarks._harness import serve as serve_until_stdin_closes


def serve(latency_s: float, size: int, slow_share: float, slow_s: float, seed: int) -> None:
    """The server process (``_harness.server_process``): prints its port, then serves until
    stdin closes.  A request is slow with probability ``slow_share``, drawn per request."""
    response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"b" * size
    draw = random.Random(seed)

    def answer(head: bytes) -> tuple[float, bytes]:
        return (slow_s if draw.random() < slow_share else latency_s), response

    serve_until_stdin_closes(
        lambda host, port: asyncio.get_running_loop().create_server(
            lambda: DelayedReplies(answer), host, port, backlog=4096))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    pos = p / 100 * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def run_loader(port: int, items: int, hedge_delay: float | str, depth: int, step_s: float | None,
               warmup_s: float = 0.0) -> dict[str, Any]:
    """One epoch: ``next()`` then ``time.sleep(step_s)`` per batch, the first step
    ``warmup_s`` long (no sleep at all when ``step_s`` is None: the clean period's run).
    The ``next()`` waits and the periods between two returns, after the first two batches,
    and the hedging counts."""
    from dataloader import DataLoader, HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(f"http://127.0.0.1:{port}/item/{{index}}"), length=items),
                     max_connections=0, hedge_delay=hedge_delay)
    waits: list[float] = []
    periods: list[float] = []
    with DataLoader(ds, batch_size=64, num_workers=2, item_concurrency=32, prefetch_depth=depth,
                    collate_fn=len) as loader:
        it = iter(loader)
        next(it)
        if step_s is not None:
            time.sleep(warmup_s)
        next(it)
        last = time.perf_counter()
        for _ in it:
            now = time.perf_counter()
            waits.append(now - last)
            if step_s is not None:
                time.sleep(step_s)
            periods.append(time.perf_counter() - last)
            last = time.perf_counter()
    counts = ds.request_counts()
    return {"waits": waits, "periods": periods, "counts": counts,
            "delay_s": (ds.hedge.delay_s() or 0.0) if ds.hedge is not None else 0.0}


def measure(clean: int, port: int, items: int, delay: float | str, depth: int,
            args: argparse.Namespace) -> dict[str, float]:
    """One contender at one depth: its clean period (server ``clean``), then the training
    loop against the server ``port`` with ``S = --headroom x`` that period (see the module)."""
    period = statistics.median(run_loader(clean, items, delay, depth, None)["periods"])
    step = args.headroom * period
    got = run_loader(port, items, delay, depth, step, args.warmup_s)
    steps = [step + w for w in got["waits"]]
    p50, p99 = percentile(steps, 50), percentile(steps, 99)
    w50, w99 = percentile(got["waits"], 50), percentile(got["waits"], 99)
    return {
        "step_p50_s": p50, "step_p99_s": p99, "step_max_s": max(steps), "step_p99_over_p50": p99 / p50,
        "extra_requests": got["counts"]["hedges_sent"] / items, "hedges_won": got["counts"]["hedges_won"],
        "delay_s": got["delay_s"], "S_s": step, "next_p50_s": w50, "next_p99_s": w99,
    }


def server(args: argparse.Namespace, slow_share: float) -> contextlib.AbstractContextManager[int]:
    """A server process (``--serve``, ``_harness.server_process``): its port, while open."""
    return server_process(__file__, f"--latency-s={args.latency_s}", f"--size={args.size}",
                          f"--slow-share={slow_share}", f"--slow-s={args.slow_s}")


def rounds(args: argparse.Namespace, clean: int, slow: int) -> dict[str, list[dict[str, float]]]:
    """Every contender at every depth, ``--rounds`` times, interleaved, order rotated."""
    contenders: list[tuple[str, float | str, int]] = [
        ("clean", 0, clean), ("off", 0, slow), ("auto", "auto", slow), ("fixed", args.fixed_delay_s, slow)]
    runs: dict[str, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        order = contenders[r % 4 :] + contenders[: r % 4]
        for depth in args.prefetch_depths:
            for name, delay, port in order:
                got = measure(clean, port, args.items, delay, depth, args)
                runs.setdefault(f"{name} depth={depth}", []).append(got)
                print(f"round {r} depth {depth} {name:>5}: " + "  ".join(f"{k}={v:.4g}" for k, v in got.items()),
                      flush=True)
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=6400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-s", type=float, default=0.02)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--slow-share", type=float, default=0.01)
    parser.add_argument("--slow-s", type=float, default=2.0)
    parser.add_argument("--fixed-delay-s", type=float, default=0.1)
    parser.add_argument("--prefetch-depths", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--headroom", type=float, default=1.25)
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency_s, args.size, args.slow_share, args.slow_s, seed=25)
        return
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"python {sys.version.split()[0]} gil={gil} loadavg={os.getloadavg()}", flush=True)
    with server(args, 0.0) as clean_port, server(args, args.slow_share) as slow_port:
        runs = rounds(args, clean_port, slow_port)
    summary: dict[str, Any] = {
        name: {k: statistics.median(run[k] for run in rs) for k in rs[0]} for name, rs in runs.items()
    }
    summary["loadavg_end"] = list(os.getloadavg())
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
