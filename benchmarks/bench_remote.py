"""Remote items: HttpDataset through the loader against a server with a fixed latency.

A local aiohttp server, in a process of its own (so its threads are not counted),
answers every GET after ``--latency-s`` (20 ms) with a ``--size`` (16 KiB) body.
Measured, each on fresh connections:

- ``HttpDataset`` through ``DataLoader(num_workers=W, item_concurrency=C)``: items/s
  against the ideal ``in_flight / latency``, with ``in_flight = max(W, 1) * C``;
- a ``ThreadPoolExecutor(64)`` of blocking ``http.client`` requests (one keep-alive
  connection per thread): the thread-per-request baseline;
- the process's thread count during each loader run, for several ``item_concurrency``
  (it must not grow with it: coroutines, not threads);
- with moto installed (3.11), ``ObjectStoreDataset`` against a local moto S3 server
  (moto, a Python server, is then the limit).

Run: ``python benchmarks/bench_remote.py`` (``--items``, ``--latency-s``, ``--size``).
Prints one line per measurement and a JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor


def serve(latency_s: float, size: int) -> None:
    """The server process: prints its port, then serves until stdin closes."""
    from aiohttp import web

    body = b"b" * size

    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(latency_s)
        return web.Response(body=body)

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(main())


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


def bench_threads(port: int, items: int, threads: int) -> float:
    local = threading.local()

    def get(i: int) -> int:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", f"/item/{i}")
        return len(conn.getresponse().read())

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(get, range(threads)))  # warm-up: one connection per thread
        t0 = time.perf_counter()
        n = len(list(pool.map(get, range(items))))
        return n / (time.perf_counter() - t0)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=6400)
    parser.add_argument("--latency-s", type=float, default=0.02)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.latency_s, args.size)
        return
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", f"--latency-s={args.latency_s}", f"--size={args.size}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        summary: dict[str, object] = {"latency_s": args.latency_s, "size": args.size, "items": args.items}
        for workers, conc in ((1, 64), (2, 64)):
            r = bench_loader(port, args.items, workers, conc)
            ideal = max(workers, 1) * conc / args.latency_s
            print(f"HttpDataset num_workers={workers} item_concurrency={conc}: {r['items_per_s']:,.0f} items/s "
                  f"= {100 * r['items_per_s'] / ideal:.0f}% of the ideal {ideal:,.0f}; {r['threads']} threads")
            summary[f"http_w{workers}_c{conc}"] = {**r, "ideal": ideal}
        tp = bench_threads(port, args.items, 64)
        print(f"ThreadPoolExecutor(64), blocking http.client: {tp:,.0f} items/s "
              f"= {100 * tp / (64 / args.latency_s):.0f}% of the ideal {64 / args.latency_s:,.0f}")
        summary["threadpool_64"] = tp
        counts = {c: bench_loader(port, min(args.items, 2048), 2, c)["threads"] for c in (16, 64, 256)}
        print(f"threads during an epoch by item_concurrency: {counts}")
        summary["threads_by_item_concurrency"] = counts
        moto = bench_moto(min(args.items, 1024), args.size)
        if moto is not None:
            print(f"ObjectStoreDataset vs moto, num_workers=2 item_concurrency=64: {moto['items_per_s']:,.0f} items/s")
            summary["objectstore_moto"] = moto
        print(json.dumps(summary))
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)


if __name__ == "__main__":
    main()
