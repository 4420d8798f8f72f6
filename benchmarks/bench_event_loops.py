"""More than one event loop: ``HttpDataset`` with ``DataLoader(event_loops=N)`` at 256 in flight.

On 3.13t aiohttp's HTTP parser is pure Python (~310 us of CPU per request), so one event
loop saturates near 3,000 requests/s whatever ``num_workers`` is; ``event_loops=N`` runs the
item coroutines on N loops, each on its own thread (``dataloader._engine.async_spread``).
The server is ``bench_remote``'s (a process of its own, keep-alive, every GET answered after
``--latency-s`` = 20 ms with ``--size`` = 16 KiB; ~60 us of CPU per request; started by
``benchmarks._harness``).  Every round runs each contender once, the order rotated each round
(``--rounds``, medians):

- ``HttpDataset`` through ``DataLoader(num_workers=2, item_concurrency=128, event_loops=N)``
  for N in ``--loops`` (1, 2, 4): 256 requests in flight, batches of 64;
- plain aiohttp ``gather`` on one event loop, 256 in flight, no loader (the reference);
- plain aiohttp on N event loops (N threads, 256 / N in flight each; 2 and every N of
  ``--loops`` above 1), no loader: what this machine gives more loops at all, apart from the
  loader;
- a ``ThreadPoolExecutor(--pool-threads)`` (64) of blocking ``http.client`` GETs, one
  keep-alive connection per thread (64 in flight: its ideal is 3,200/s);
- SPDL's async pipeline with 256 in flight on its one loop (ordered, batches of 64), where
  ``spdl.pipeline`` imports (``pip install spdl-core``; not a dependency of the project).

Each line gives items/s, the ratio to that round's plain one-loop aiohttp (median of the
rounds' ratios), and the process's CPU seconds per request (client side: every thread of
this process).  The ideal is ``256 / latency`` = 12,800 requests/s.  On a 2-core machine
shared with other work, more loops than free cores cannot scale: read the load average
printed at the start and the end.

Run: ``PYTHONPATH=. python benchmarks/bench_event_loops.py`` (``--items``, ``--rounds``, ``--loops``,
``--latency-s``, ``--size``, ``--pool-threads``).  Prints one line per contender and a JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks._harness import server_process
from benchmarks._peers import has_spdl, spdl_items, threadpool
from benchmarks._rates import interleave

IN_FLIGHT = 256
REMOTE = Path(__file__).with_name("bench_remote.py")


def bench_loader(port: int, items: int, loops: int) -> tuple[float, float]:
    """``(items/s, CPU s per item)`` of ``HttpDataset`` through the loader with ``loops`` loops."""
    from dataloader import DataLoader, HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(f"http://127.0.0.1:{port}/item/{{index}}"), length=items),
                     max_connections=0)
    with DataLoader(ds, batch_size=64, num_workers=2, item_concurrency=IN_FLIGHT // 2, collate_fn=len,
                    event_loops=loops) as loader:
        it = iter(loader)
        next(it)  # warm-up: the loop threads, their sessions, the first connections
        c0, t0 = time.process_time(), time.perf_counter()
        n = sum(it)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return n / dt, cpu / n


def bench_plain(port: int, items: int, loops: int) -> tuple[float, float]:
    """``(items/s, CPU s per item)`` of plain aiohttp on ``loops`` event loops (one thread
    each, ``IN_FLIGHT / loops`` requests in flight on each, all starting together after
    their warm-up), no loader."""
    import aiohttp

    share = items // loops
    barrier = threading.Barrier(loops + 1)
    ends: list[float] = []

    async def run(first: int) -> None:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
            todo = iter(range(first, first + share))

            async def get(i: int) -> int:
                async with session.get(f"http://127.0.0.1:{port}/item/{i}") as resp:
                    return len(await resp.read())

            async def client() -> int:
                return sum([await get(i) > 0 for i in todo])

            await asyncio.gather(*[get(i) for i in range(IN_FLIGHT // loops)])  # warm-up: the connections
            barrier.wait()
            await asyncio.gather(*[client() for _ in range(IN_FLIGHT // loops)])
            ends.append(time.perf_counter())

    threads = [threading.Thread(target=asyncio.run, args=(run(j * share),)) for j in range(loops)]
    for t in threads:
        t.start()
    barrier.wait()
    c0, t0 = time.process_time(), time.perf_counter()
    for t in threads:
        t.join()
    cpu = time.process_time() - c0
    return share * loops / (max(ends) - t0), cpu / (share * loops)


def run_rounds(port: int, items: int, rounds: int, loops: list[int], pool_threads: int) -> dict[str, object]:
    contenders: dict[str, Callable[[], tuple[float, float]]] = {
        f"loader_event_loops_{n}": (lambda n=n: bench_loader(port, items, n)) for n in loops
    }
    for n in sorted({2, *loops} - {1}):  # plain aiohttp on as many loops as each loader contender
        contenders[f"plain_aiohttp_{n}_loops"] = lambda n=n: bench_plain(port, items, n)
    contenders[f"threadpool_{pool_threads}"] = lambda: threadpool(port, items, pool_threads)
    if has_spdl():
        contenders[f"spdl_{IN_FLIGHT}"] = lambda: spdl_items(port, items, IN_FLIGHT)
    contenders["plain"] = lambda: bench_plain(port, items, 1)
    got = interleave(contenders, rounds)
    plain = got.pop("plain")
    summary: dict[str, object] = {}
    ref = [rate for rate, _ in plain]
    print(f"plain aiohttp, one loop, {IN_FLIGHT} in flight: {statistics.median(ref):,.0f} items/s, "
          f"{1e6 * statistics.median(c for _, c in plain):.0f} us CPU/request "
          f"(rounds: {', '.join(f'{r:,.0f}' for r in ref)})")
    summary["plain_aiohttp_1_loop"] = {"items_per_s": statistics.median(ref), "rounds": ref,
                                       "cpu_us_per_item": 1e6 * statistics.median(c for _, c in plain)}
    for name, runs in got.items():
        rates = [rate for rate, _ in runs]
        ratios = [rate / r for rate, r in zip(rates, ref)]
        cpu = 1e6 * statistics.median(c for _, c in runs)
        print(f"{name}: {statistics.median(rates):,.0f} items/s = {statistics.median(ratios):.2f}x plain one loop, "
              f"{cpu:.0f} us CPU/request (rounds: {', '.join(f'{r:,.0f}' for r in rates)})")
        summary[name] = {"items_per_s": statistics.median(rates), "ratio": statistics.median(ratios),
                         "rounds": rates, "cpu_us_per_item": cpu}
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=6400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loops", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--latency-s", type=float, default=0.02)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--pool-threads", type=int, default=64,
                        help="threads of the ThreadPoolExecutor contender (blocking GETs; 64: the issue's)")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}{'' if gil else 't'}; {os.cpu_count()} CPUs; load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with server_process(REMOTE, f"--latency-s={args.latency_s}", f"--size={args.size}") as port:
        summary: dict[str, object] = {"latency_s": args.latency_s, "size": args.size, "items": args.items,
                                      "in_flight": IN_FLIGHT, "ideal_items_per_s": IN_FLIGHT / args.latency_s,
                                      "python": sys.version.split()[0] + ("" if gil else "t"), "load_average": load}
        summary.update(run_rounds(port, args.items, args.rounds, args.loops, args.pool_threads))
        summary["load_average_end"] = os.getloadavg()
        print(f"load average at the end {summary['load_average_end']}")
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
