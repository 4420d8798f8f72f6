"""Remote items: HttpDataset through the loader against a server with a fixed latency.

A local HTTP/1.1 server, in a process of its own (so its threads are not counted),
answers every GET after ``--latency-s`` (20 ms) with a ``--size`` (16 KiB) body.  It is
a few lines on asyncio's protocols (keep-alive, a fixed response), not ``aiohttp.web``:
on 3.13t aiohttp is pure Python, and its server took ~270 us of CPU per request, a core
of the two the client runs on; this one takes ~60 us.  Measured, each on fresh
connections, every contender once per round, the order rotated each round (``--rounds``,
medians; ``benchmarks._rates.interleave``; the server: ``benchmarks._harness``):

- ``HttpDataset`` through ``DataLoader(num_workers=W, item_concurrency=C)``: items/s
  against the ideal ``in_flight / latency``, with ``in_flight = max(W, 1) * C``;
- plain aiohttp, one event loop, 64 requests in flight, no loader: the client's own
  ceiling on this machine;
- a ``ThreadPoolExecutor(64)`` of blocking ``http.client`` requests (one keep-alive
  connection per thread): the thread-per-request baseline;
- the process's thread count during each loader run, for several ``item_concurrency``
  (it must not grow with it: coroutines, not threads);
- with moto installed (3.11), ``ObjectStoreDataset`` against a local moto S3 server
  (moto, a Python server, is then the limit).

``--across-batches`` measures requests in flight across batch boundaries instead: 1,280
items in batches of 64, every round ``num_workers=1, item_concurrency=64``, ``num_workers=2,
item_concurrency=32`` (64 in flight either way), ``HttpDataset``'s coroutines alone, a ``ThreadPoolExecutor(64)``
of blocking GETs, SPDL's async pipeline at concurrency 64 (ordered, batches of 64; where
``spdl.pipeline`` imports: ``pip install spdl-core``, not a dependency) and plain aiohttp with
64 in flight, each as a ratio to that round's aiohttp (medians of the rounds' ratios).  Run
it with ``PYTHONPATH`` on two checkouts in turn for a before/after.

Run: ``PYTHONPATH=. python benchmarks/bench_remote.py`` (``--items``, ``--latency-s``, ``--size``,
``--rounds``, ``--across-batches``).  Prints the load average at the start, one line per measurement (median
and every round) and a JSON summary.  127.0.0.1 only.
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
from typing import Any

from benchmarks._harness import DelayedReplies, server_process
from benchmarks._harness import serve as serve_until_stdin_closes
from benchmarks._peers import has_spdl, spdl_items, threadpool
from benchmarks._rates import interleave

DEFAULT_ITEMS = 6400


def serve(latency_s: float, size: int) -> None:
    """The server process: prints its port, then answers every GET ``latency_s`` after its
    headers end, in order, until stdin closes."""
    response = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"b" * size

    def answer(head: bytes) -> tuple[float, bytes]:
        return latency_s, response

    serve_until_stdin_closes(lambda host, port: asyncio.get_running_loop().create_server(
        lambda: DelayedReplies(answer), host, port, backlog=4096))


def bench_loader(port: int, items: int, num_workers: int, item_concurrency: int) -> dict[str, float]:
    from dataloader import DataLoader, HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(f"http://127.0.0.1:{port}/item/{{index}}"), length=items),
                     max_connections=0)
    peak = threading.active_count()
    with DataLoader(ds, batch_size=64, num_workers=num_workers, item_concurrency=item_concurrency,
                    collate_fn=len) as loader:
        it = iter(loader)
        next(it)  # warm-up: the loop thread, the session, the first connections
        t0 = time.perf_counter()
        n = 0
        for got in it:
            n += got
            peak = max(peak, threading.active_count())
        dt = time.perf_counter() - t0
    return {"items_per_s": n / dt, "threads": peak}


def bench_plain(port: int, items: int, in_flight: int) -> float:
    """Plain aiohttp on one event loop, ``in_flight`` requests at a time, no loader."""
    import aiohttp

    async def run() -> float:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
            todo = iter(range(items))

            async def get(i: int) -> int:
                async with session.get(f"http://127.0.0.1:{port}/item/{i}") as resp:
                    return len(await resp.read())

            async def client() -> int:
                return sum([await get(i) > 0 for i in todo])

            await asyncio.gather(*[get(i) for i in range(in_flight)])  # warm-up: the connections
            t0 = time.perf_counter()
            n = sum(await asyncio.gather(*[client() for _ in range(in_flight)]))
            return n / (time.perf_counter() - t0)

    return asyncio.run(run())


def bench_moto(items: int, size: int) -> dict[str, float] | None:
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        return None
    import logging

    import boto3
    import obstore

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's access log

    from dataloader import DataLoader, Locations, ObjectStoreDataset, Template

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        opts = dict(endpoint=endpoint, access_key_id="k", secret_access_key="s", region="us-east-1",
                    client_options={"allow_http": True})
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                     region_name="us-east-1").create_bucket(Bucket="bench")
        store = obstore.store.from_url("s3://bench", **opts)
        for i in range(items):
            obstore.put(store, f"item/{i}", b"b" * size)
        ds = ObjectStoreDataset(Locations(Template("s3://bench/item/{index}"), length=items), **opts)
        with DataLoader(ds, batch_size=64, num_workers=2, item_concurrency=64, collate_fn=len) as loader:
            t0 = time.perf_counter()
            n = sum(loader)
            return {"items_per_s": n / (time.perf_counter() - t0)}
    finally:
        server.stop()


def bench_direct(port: int, items: int, in_flight: int) -> float:
    """``HttpDataset``'s own coroutines on one event loop, ``in_flight`` at a time, no loader:
    what the dataset costs over plain aiohttp, apart from the loader."""
    from dataloader import HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(f"http://127.0.0.1:{port}/item/{{index}}"), length=items),
                     max_connections=0)

    async def run() -> float:
        todo = iter(range(items))

        async def client() -> int:
            return sum([len(await ds[i]) > 0 for i in todo])

        await asyncio.gather(*[ds[i] for i in range(in_flight)])  # warm-up: the connections
        t0 = time.perf_counter()
        n = sum(await asyncio.gather(*[client() for _ in range(in_flight)]))
        rate = n / (time.perf_counter() - t0)
        await ds.aclose()
        return rate

    return asyncio.run(run())


def across_batches(port: int, items: int, rounds: int) -> dict[str, object]:
    """Loaders with 64 in flight against plain aiohttp with 64, interleaved, as ratios (and
    ``HttpDataset`` without a loader, the dataset's own share of the gap, and the peers:
    ``ThreadPoolExecutor(64)`` of blocking GETs, SPDL's pipeline at concurrency 64 where it
    imports)."""
    runs: dict[str, Callable[[], float]] = {
        name: (lambda w=w, c=c: bench_loader(port, items, w, c)["items_per_s"])
        for name, (w, c) in {"w1_c64": (1, 64), "w2_c32": (2, 32)}.items()
    }
    runs["dataset_alone_64"] = lambda: bench_direct(port, items, 64)
    runs["threadpool_64"] = lambda: threadpool(port, items, 64)[0]
    if has_spdl():
        runs["spdl_64"] = lambda: spdl_items(port, items, 64)[0]
    runs["plain"] = lambda: bench_plain(port, items, 64)
    got = interleave(runs, rounds)
    plain = got.pop("plain")
    summary: dict[str, object] = {"plain_aiohttp_64": statistics.median(plain)}
    for name, rates in got.items():
        ratios = [rate / ref for rate, ref in zip(rates, plain)]
        median = statistics.median(ratios)
        print(f"{name}: {median:.2f}x plain aiohttp with 64 in flight (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
        summary[name] = {"ratio": median, "rounds": ratios}
    print(f"plain aiohttp, 64 in flight: {statistics.median(plain):,.0f} items/s")
    return summary


def _report(name: str, ideal: float, runs: list[float]) -> dict[str, object]:
    median = statistics.median(runs)
    print(f"{name}: {median:,.0f} items/s = {100 * median / ideal:.0f}% of the ideal {ideal:,.0f} "
          f"(rounds: {', '.join(f'{r:,.0f}' for r in runs)})")
    return {"items_per_s": median, "rounds": runs, "ideal": ideal}


def contenders(port: int, items: int, latency_s: float, rounds: int) -> dict[str, object]:
    """Loaders with ``item_concurrency=64`` on 1 and 2 workers, plain aiohttp and a thread
    pool, each 64 in flight, interleaved; items/s against the ideal."""
    runs: dict[str, Callable[[], Any]] = {
        f"http_w{w}_c64": (lambda w=w: bench_loader(port, items, w, 64)) for w in (1, 2)
    }
    runs["plain_aiohttp_64"] = lambda: bench_plain(port, items, 64)
    runs["threadpool_64"] = lambda: threadpool(port, items, 64)[0]
    got = interleave(runs, rounds)
    summary: dict[str, object] = {}
    ideal_64 = 64 / latency_s
    for w in (1, 2):
        loader = got[f"http_w{w}_c64"]
        rates = [r["items_per_s"] for r in loader]
        threads = max(r["threads"] for r in loader)
        summary[f"http_w{w}_c64"] = {
            **_report(f"HttpDataset num_workers={w} item_concurrency=64 ({threads} "
                      f"threads; {100 * statistics.median(rates) / ideal_64:.0f}% of {ideal_64:,.0f})",
                      w * 64 / latency_s, rates),
            "threads": threads,
        }
    summary["plain_aiohttp_64"] = _report("plain aiohttp, one event loop, 64 in flight, no loader", ideal_64,
                                          got["plain_aiohttp_64"])
    summary["threadpool_64"] = _report("ThreadPoolExecutor(64), blocking http.client", ideal_64, got["threadpool_64"])
    return summary


def thread_counts_and_moto(port: int, items: int, size: int) -> dict[str, object]:
    """The process's threads during an epoch by ``item_concurrency``, and ``ObjectStoreDataset``
    against moto where it is installed."""
    counts = {c: bench_loader(port, min(items, 2048), 2, c)["threads"] for c in (16, 64, 256)}
    print(f"threads during an epoch by item_concurrency: {counts}")
    summary: dict[str, object] = {"threads_by_item_concurrency": counts}
    moto = bench_moto(min(items, 1024), size)
    if moto is not None:
        print(f"ObjectStoreDataset vs moto, num_workers=2 item_concurrency=64: {moto['items_per_s']:,.0f} items/s")
        summary["objectstore_moto"] = moto
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=DEFAULT_ITEMS)
    parser.add_argument("--latency-s", type=float, default=0.02)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--across-batches", action="store_true",
                        help="loaders with 64 in flight as ratios to plain aiohttp (1,280 items by default)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency_s, args.size)
        return
    load = os.getloadavg()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}{'' if gil else 't'}; load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with server_process(__file__, f"--latency-s={args.latency_s}", f"--size={args.size}") as port:
        summary: dict[str, object] = {"latency_s": args.latency_s, "size": args.size, "items": args.items,
                                      "load_average": load}
        if args.across_batches:
            items = args.items if args.items != DEFAULT_ITEMS else 1280
            summary.update(across_batches(port, items, args.rounds))
            summary["load_average_end"] = os.getloadavg()
        else:
            summary.update(contenders(port, args.items, args.latency_s, args.rounds))
            summary.update(thread_counts_and_moto(port, args.items, args.size))
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
