"""The cost of hedging when no request is slow: items/s with ``hedge_delay="auto"`` (the
default) against ``hedge_delay=0`` (off), the same server (``bench_hedge.serve`` with no slow
request: every GET answered after 20 ms, 16 KiB), alternated over ``--rounds``.

``--micro`` measures the CPU cost alone, no network: the microseconds ``Hedge.run`` adds
to an item whose request answers at once (a coroutine of one ``asyncio.sleep(0)``), 64 items
at a time on one event loop, once the delay is known (no hedge sent), against awaiting the
request directly: CPU time of the loop's thread (``time.thread_time``), medians of ``--rounds``.

Run: ``PYTHONPATH=. python benchmarks/bench_hedge_cost.py`` (``--items``, ``--rounds``,
``--num-workers``, ``--item-concurrency``, ``--micro``).  Prints the load average, one line
per run and the median ratio auto/off.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from benchmarks._harness import server_process


def items_per_s(port: int, items: int, hedge_delay: float | str, workers: int, concurrency: int) -> float:
    from dataloader import DataLoader, HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(f"http://127.0.0.1:{port}/item/{{index}}"), length=items),
                     max_connections=0, hedge_delay=hedge_delay)
    with DataLoader(ds, batch_size=64, num_workers=workers, item_concurrency=concurrency, collate_fn=len) as loader:
        it = iter(loader)
        next(it)  # warm-up: connections, the latency window's first samples
        t0 = time.perf_counter()
        n = sum(it)
        return n / (time.perf_counter() - t0)


def micro(rounds: int, items: int = 64 * 300) -> None:
    """``Hedge.run``'s own cost per item, microseconds (see the module)."""
    import asyncio

    from dataloader.io.hedge import Hedge

    async def request() -> int:
        await asyncio.sleep(0)
        return 1

    async def epoch(hedge: Hedge | None) -> float:
        run = request if hedge is None else (lambda: hedge.run(request))
        t0 = time.thread_time()  # CPU time of the loop's thread: steadier than wall time on a busy machine
        for _ in range(items // 64):
            await asyncio.gather(*(run() for _ in range(64)))
        return (time.thread_time() - t0) / items * 1e6

    extra = []
    for r in range(rounds):
        hedge = Hedge(10.0)  # a delay no request reaches: the path of every fast item
        direct, hedged = asyncio.run(epoch(None)), asyncio.run(epoch(hedge))
        extra.append(hedged - direct)
        print(f"round {r}: direct {direct:.1f} us/item  hedged {hedged:.1f} us/item (CPU)", flush=True)
    print(f"median extra {statistics.median(extra):.1f} us/item  loadavg_end={os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--item-concurrency", type=int, default=64)
    parser.add_argument("--micro", action="store_true")
    args = parser.parse_args()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"python {sys.version.split()[0]} gil={gil} loadavg={os.getloadavg()}", flush=True)
    if args.micro:
        micro(args.rounds)
        return
    with server_process(Path(__file__).with_name("bench_hedge.py"), "--slow-share=0") as port:
        ratios = []
        for r in range(args.rounds):
            off = items_per_s(port, args.items, 0, args.num_workers, args.item_concurrency)
            auto = items_per_s(port, args.items, "auto", args.num_workers, args.item_concurrency)
            ratios.append(auto / off)
            print(f"round {r}: off {off:,.0f} items/s  auto {auto:,.0f} items/s  auto/off {auto / off:.3f}", flush=True)
    print(f"median auto/off {statistics.median(ratios):.3f}  loadavg_end={os.getloadavg()}")


if __name__ == "__main__":
    main()
