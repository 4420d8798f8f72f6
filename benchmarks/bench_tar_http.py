"""Samples/s of an HTTP tar epoch: the retrying, resuming shard reader (``_http_shard``) against
the plain ``urllib.request.urlopen`` stream it replaced, and against an aiohttp stream bridged to
the reading thread (the alternative ``_http_shard``'s docstring weighs).

Command (repository root)::

    python -m benchmarks.bench_tar_http                   # 4 shards x 128 samples of 64 KiB
    python -m benchmarks.bench_tar_http --shards 2 --per-shard 32 --rounds 1   # CI size

The shards: ``--shards`` tars of ``--per-shard`` samples, each ``{key}.bin`` (``--sample-kib``
random bytes) and ``{key}.cls``, served from memory by a 127.0.0.1 ``http.server`` in a
subprocess (its own interpreter: it competes for the cores, not for this process's GIL) with a
strong ETag and ``Range``; in ``cut`` mode its first response for each URL (the path and a
``?round=R`` query) stops half-way.
Each contender reads every shard's samples in order with ``_tar_read.shard_samples`` (the
reader ``TarShardDataset`` runs), one thread; only the opener differs:

* ``urlopen (before)``: ``urllib.request.urlopen(url, timeout=60)``, as before ``retry=``.
* ``retrying``: ``ShardSource(None, 60.0, Retry()).open``: ``HttpShardStream`` in a 1 MiB
  ``BufferedReader``.
* ``retrying, each shard cut once``: the same against the cutting server (one resume a shard;
  ``Retry(initial_backoff_s=0)``: the resume's cost, not the backoff's, which is the policy's).
* ``aiohttp bridge``: a session on an event loop thread, the body's 1 MiB chunks passed to the
  reading thread through a bounded queue (4 chunks), no retry (a prototype, not shipped).
* ``loader 2w``: ``DataLoader(TarShardDataset(urls), num_workers=2)``: the whole path, threads.

Rounds interleaved (order rotated), medians printed with the load average at the start (a
2-core machine shared with others: ratios of one run, not absolutes).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import queue
import re
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import server_process
from benchmarks._rates import measure
from dataloader import DataLoader, TarShardDataset
from dataloader.formats._shard_open import ShardSource
from dataloader.formats._tar_read import shard_samples
from dataloader.io import Retry


def write_shards(root: Path, shards: int, per_shard: int, sample_kib: int) -> list[str]:
    import tarfile

    rng = np.random.default_rng(0)
    payload = rng.integers(0, 256, sample_kib << 10, dtype=np.uint8).tobytes()
    names = []
    for s in range(shards):
        with tarfile.open(root / f"s-{s}.tar", "w") as tf:
            for k in range(per_shard):
                for ext, data in (("bin", payload), ("cls", str(k).encode())):
                    info = tarfile.TarInfo(f"{s:02d}{k:06d}.{ext}")
                    info.size = len(data)
                    tf.addfile(info, __import__("io").BytesIO(data))
        names.append(f"s-{s}.tar")
    return names


def serve(root: str, cut: bool) -> None:
    """Serve ``root``'s tars from memory (ETag, ``Range: bytes=N-``); with ``cut``, each path's
    first response stops half-way.  Prints the port, then serves until stdin closes (the
    protocol of ``_harness.server_process``; threads: ``http.server``, not asyncio)."""
    files = {f"/{p.name}": p.read_bytes() for p in Path(root).glob("*.tar")}
    etags = {k: '"' + hashlib.sha256(v).hexdigest()[:16] + '"' for k, v in files.items()}
    seen: set[str] = set()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path, name = self.path, self.path.split("?")[0]  # each round asks ?round=R: cut again
            body = files[name]
            found = re.match(r"bytes=(\d+)-$", self.headers.get("Range", ""))
            start = int(found.group(1)) if found else 0
            with lock:
                first = path not in seen
                seen.add(path)
            self.send_response(206 if found else 200)
            if found:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("ETag", etags[name])
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            view = memoryview(body)[start:]
            if cut and first:
                self.wfile.write(view[: len(view) // 2])
                self.close_connection = True
                return
            self.wfile.write(view)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(httpd.server_address[1], flush=True)
    sys.stdin.read()  # the parent closes it: stop


def server(root: str, cut: bool) -> contextlib.AbstractContextManager[int]:
    """The ``serve`` process (``_harness.server_process``: the checkout on its path, stopped
    when this closes its stdin): its port, while open."""
    return server_process(__file__, root, *(["--cut"] if cut else []))


class AiohttpBridge:
    """A prototype: aiohttp on a loop thread, each body's chunks handed over a bounded queue."""

    def __init__(self) -> None:
        import asyncio

        import aiohttp

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def make() -> Any:
            return aiohttp.ClientSession()

        self.session = asyncio.run_coroutine_threadsafe(make(), self.loop).result()

    def open(self, url: str) -> Any:
        import asyncio
        import io

        chunks: queue.Queue[bytes | None] = queue.Queue(4)

        async def pump() -> None:
            async with self.session.get(url) as resp:
                async for chunk in resp.content.iter_chunked(1 << 20):
                    while True:  # a blocking put would stall the loop
                        try:
                            chunks.put_nowait(chunk)
                            break
                        except queue.Full:
                            await asyncio.sleep(0.0005)
            chunks.put(None)

        future = asyncio.run_coroutine_threadsafe(pump(), self.loop)

        def pieces() -> Iterator[bytes]:
            while (chunk := chunks.get()) is not None:
                yield chunk
            future.result()

        from dataloader.formats._shard_open import StoreStream

        return io.BufferedReader(StoreStream(pieces()), 1 << 20)

    def close(self) -> None:
        import asyncio

        asyncio.run_coroutine_threadsafe(self.session.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()  # its self-pipe sockets


def epoch(opener: Callable[[str], Any], urls: list[str]) -> int:
    return sum(1 for url in urls for _ in shard_samples(opener, url, None))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--per-shard", type=int, default=128)
    parser.add_argument("--sample-kib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--cut", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.cut)
        return
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as servers:  # servers stop first
        names = write_shards(Path(tmp), args.shards, args.per_shard, args.sample_kib)
        port, cut_port = servers.enter_context(server(tmp, cut=False)), servers.enter_context(server(tmp, cut=True))
        urls = [f"http://127.0.0.1:{port}/{n}" for n in names]
        retrying = ShardSource(None, 60.0, Retry()).open
        resuming = ShardSource(None, 60.0, Retry(initial_backoff_s=0.0)).open  # the resume, not the backoff
        bridge = AiohttpBridge() if _has("aiohttp") else None

        rounds = iter(range(1 << 30))

        def cut_epoch() -> int:  # a new query each round: every shard's first response cut again
            r = next(rounds)
            return epoch(resuming, [f"http://127.0.0.1:{cut_port}/{n}?round={r}" for n in names])

        runs: dict[str, Callable[[], int]] = {
            "urlopen (before)": lambda: epoch(lambda u: urllib.request.urlopen(u, timeout=60), urls),  # noqa: S310
            "retrying": lambda: epoch(retrying, urls),
            "retrying, each shard cut once": cut_epoch,
            "loader 2w": lambda: sum(len(b) for b in DataLoader(
                TarShardDataset(urls), batch_size=64, num_workers=2, collate_fn=list)),
        }
        if bridge is not None:
            runs["aiohttp bridge"] = lambda: epoch(bridge.open, urls)
        try:
            rates = measure(runs, args.rounds)
        finally:
            if bridge is not None:
                bridge.close()
    mib = args.shards * args.per_shard * args.sample_kib / 1024
    print(json.dumps({"python": sys.version.split()[0], "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
                      "epoch_mib": round(mib, 1), "samples": args.shards * args.per_shard,
                      "samples_per_s": {k: round(v) for k, v in rates.items()},
                      "vs_before": {k: round(v / rates["urlopen (before)"], 3) for k, v in rates.items()},
                      "load_average_at_start": [round(x, 2) for x in load]}, indent=1))


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    main()
