"""Ranged GETs: one large object through HttpDataset as one GET and as concurrent ranges.

A local HTTP/1.1 server, in a process of its own, serves one ``--size`` (64 MiB) object
with ``Accept-Ranges: bytes``: it answers ``--rtt-s`` (20 ms) after a request's headers
(a round trip) and then sends at most ``--conn-mb-s`` (50 MB/s) on each connection, as a
server, proxy or long-RTT TCP window that limits one connection does (S3: ~85-90 MB/s per
connection).  The server process is started by ``benchmarks._harness``.  Contenders, each
once per round, the order rotated each round (``--rounds``, medians):

- ``HttpDataset`` through ``DataLoader(batch_size=None)``, ranges off: one GET;
- the same with ``range_parallel_threshold=32 MiB, range_chunk_bytes=size / --ranges``
  (8 ranges of 8 MiB): the first part from the item's own GET, the 7 others as ranges;
- plain aiohttp, one GET, no loader: what one connection gives;
- plain aiohttp, the same ranges all at once with the size known beforehand, no loader: what
  this machine gives to concurrent connections (its ceiling for the ranged contender);
- a ``ThreadPoolExecutor`` of one thread per range, each one blocking ``http.client`` GET of
  its range, the size known beforehand: the thread-per-request peer;
- SPDL's async pipeline asking the same ranges at once (concurrency = the ranges, outputs in
  order), the size known beforehand, where ``spdl.pipeline`` imports (``pip install
  spdl-core``; not a dependency of the project).

Each item is checked byte for byte once per contender.  The goal (issue 25): 8 ranges at
least 4x one GET.  Ideal: one GET ``rtt + size / rate`` (~1.36 s); 8 ranges ``2 rtt +
size / (8 rate)`` (~0.21 s), 6.5x.

Run: ``PYTHONPATH=. python benchmarks/bench_ranges.py`` (``--size``, ``--ranges``, ``--rtt-s``,
``--conn-mb-s``, ``--rounds``).  Prints the load average at the start and end, one line per
contender (median and every round) and a JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks._harness import serve as serve_until_stdin_closes
from benchmarks._harness import server_process
from benchmarks._peers import KeepAlive, has_spdl, spdl_pipeline
from benchmarks._rates import interleave

_RANGE = re.compile(rb"range: bytes=(\d+)-(\d+)", re.IGNORECASE)


def content(size: int) -> bytes:
    return (bytes(range(256)) * (size // 256 + 1))[:size]


def serve(size: int, rtt_s: float, rate: float) -> None:
    """The server process: prints its port, then serves until stdin closes.  The body goes
    out with ``sendfile`` from a temporary file, 1 MiB at a time (the kernel copies it: the
    server takes little of the two cores the client runs on)."""
    import tempfile

    step = 1 << 20
    file = tempfile.TemporaryFile()
    file.write(content(size))
    file.flush()

    async def send(writer: asyncio.StreamWriter, head: bytes, a: int, count: int) -> None:
        await asyncio.sleep(rtt_s)
        writer.write(head)
        await writer.drain()
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        for at in range(0, count, step):
            await loop.sendfile(writer.transport, file, a + at, min(step, count - at))
            ahead = t0 + (at + step) / rate - time.perf_counter()
            if ahead > 0:
                await asyncio.sleep(ahead)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                asked = _RANGE.search(head)
                if asked is None:
                    a, b, status = 0, size - 1, b"200 OK"
                    extra = b""
                else:
                    a, b, status = int(asked[1]), min(int(asked[2]), size - 1), b"206 Partial Content"
                    extra = b"Content-Range: bytes %d-%d/%d\r\n" % (a, b, size)
                top = b"HTTP/1.1 %s\r\nAccept-Ranges: bytes\r\nETag: \"v1\"\r\nContent-Length: %d\r\n" % (
                    status, b - a + 1)
                await send(writer, top + extra + b"\r\n", a, b - a + 1)
        except (asyncio.IncompleteReadError, ConnectionError, RuntimeError):  # the client closed: it had its part
            pass
        finally:
            writer.close()

    serve_until_stdin_closes(lambda host, port: asyncio.start_server(handle, host, port, backlog=256))


def bench_loader(url: str, threshold: int | None, chunk: int, expect: bytes) -> tuple[float, float]:
    from dataloader import DataLoader, HttpDataset

    ds = HttpDataset([url], max_connections=0, range_parallel_threshold=threshold,
                     range_chunk_bytes=chunk)
    with DataLoader(ds, batch_size=None) as loader:
        t0, c0 = time.perf_counter(), time.process_time()
        (item,) = list(loader)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert item == expect, "wrong bytes"
    return dt, cpu


def bench_plain(url: str, expect: bytes, chunk: int | None) -> tuple[float, float]:
    """Plain aiohttp, no loader: one GET (``chunk`` None), or every range of ``chunk`` bytes
    at once with the size known beforehand (no first request: this machine's ceiling)."""
    import aiohttp

    async def get(session: aiohttp.ClientSession, headers: dict[str, str]) -> bytes:
        async with session.get(url, headers=headers) as resp:
            return await resp.read()

    async def run() -> tuple[float, float]:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
            t0, c0 = time.perf_counter(), time.process_time()
            if chunk is None:
                body = await get(session, {})
            else:
                asked = [{"Range": f"bytes={a}-{b}"} for a, b in ranges_of(len(expect), chunk)]
                body = b"".join(await asyncio.gather(*(get(session, h) for h in asked)))
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert body == expect, "wrong bytes"
        return dt, cpu

    return asyncio.run(run())


def ranges_of(size: int, chunk: int) -> list[tuple[int, int]]:
    """The ``(first, last)`` byte ranges (inclusive) of ``chunk`` bytes that cover ``size``."""
    return [(a, min(a + chunk, size) - 1) for a in range(0, size, chunk)]


def bench_threads(port: int, expect: bytes, chunk: int) -> tuple[float, float]:
    """``ThreadPoolExecutor`` of one thread per range, each one blocking ``http.client`` GET of
    its range, the size known beforehand (no first request), joined in order."""
    conns = KeepAlive(port)
    asked = ranges_of(len(expect), chunk)

    def get(r: tuple[int, int]) -> bytes:
        return conns.get("/object.bin", {"Range": f"bytes={r[0]}-{r[1]}"})

    with ThreadPoolExecutor(len(asked)) as pool:
        t0, c0 = time.perf_counter(), time.process_time()
        body = b"".join(pool.map(get, asked))
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    conns.close()
    assert body == expect, "wrong bytes"
    return dt, cpu


def bench_spdl(url: str, expect: bytes, chunk: int) -> tuple[float, float]:
    """SPDL's pipeline GETting every range at once (concurrency = the ranges, outputs in
    order), the size known beforehand, joined; timed to the last part."""

    async def get(session: Any, r: tuple[int, int]) -> bytes:
        async with session.get(url, headers={"Range": f"bytes={r[0]}-{r[1]}"}) as resp:
            return bytes(await resp.read())

    asked = ranges_of(len(expect), chunk)
    pipeline = spdl_pipeline(asked, get, len(asked), None)  # built, not started: as the loader, outside the timing
    parts: list[bytes] = []
    t0, c0 = time.perf_counter(), time.process_time()
    with pipeline.auto_stop():
        for part in pipeline.get_iterator(timeout=60):
            parts.append(part)
            if len(parts) == len(asked):  # the last part: the time to it (see _peers.spdl_pipeline)
                body = b"".join(parts)
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert body == expect, "wrong bytes"
    return dt, cpu


def _report(name: str, got: list[tuple[float, float]], size: int) -> dict[str, object]:
    runs = [dt for dt, _ in got]
    median, cpu = statistics.median(runs), statistics.median(c for _, c in got)
    print(f"{name}: {median:.3f} s ({size / median / 1e6:,.0f} MB/s, client CPU {cpu:.2f} s); "
          f"rounds {[round(r, 3) for r in runs]}")
    return {"median_s": median, "rounds_s": runs, "client_cpu_s": cpu}


def run_rounds(port: int, size: int, parts: int, rounds: int) -> dict[str, object]:
    """Every contender once per round, interleaved; their reports and the ranges' speed-up."""
    url = f"http://127.0.0.1:{port}/object.bin"
    expect = content(size)
    chunk = -(-size // parts)
    contenders: dict[str, tuple[str, Callable[[], tuple[float, float]]]] = {
        "one_get": ("HttpDataset, one GET", lambda: bench_loader(url, None, chunk, expect)),
        "ranges": (f"HttpDataset, {parts} ranges of {chunk:,} bytes",
                   lambda: bench_loader(url, min(32 << 20, size), chunk, expect)),
        "plain_aiohttp": ("plain aiohttp, one GET, no loader", lambda: bench_plain(url, expect, None)),
        "plain_aiohttp_ranges": (f"plain aiohttp, {parts} ranges at once, size known, no loader",
                                 lambda: bench_plain(url, expect, chunk)),
        "threadpool_ranges": (f"ThreadPoolExecutor({parts}), one blocking GET of a range each, size known",
                              lambda: bench_threads(port, expect, chunk)),
    }
    if has_spdl():
        contenders["spdl_ranges"] = (f"SPDL pipeline, {parts} ranges at once, size known",
                                     lambda: bench_spdl(url, expect, chunk))
    runs = interleave({name: run for name, (_, run) in contenders.items()}, rounds)
    summary: dict[str, object] = {name: _report(label, runs[name], size) for name, (label, _) in contenders.items()}
    ratios = [one[0] / ranged[0] for one, ranged in zip(runs["one_get"], runs["ranges"])]
    summary["speedup"] = statistics.median(ratios)
    print(f"ranges vs one GET: {summary['speedup']:.2f}x (median of the rounds' ratios; goal >= 4x)")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 << 20)
    parser.add_argument("--ranges", type=int, default=8)
    parser.add_argument("--rtt-s", type=float, default=0.02)
    parser.add_argument("--conn-mb-s", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.size, args.rtt_s, args.conn_mb_s * 1e6)
        return
    load = os.getloadavg()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}{'' if gil else 't'}; load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    with server_process(__file__, f"--size={args.size}", f"--rtt-s={args.rtt_s}",
                        f"--conn-mb-s={args.conn_mb_s}") as port:
        summary: dict[str, object] = {"size": args.size, "parts": args.ranges, "rtt_s": args.rtt_s,
                                      "conn_mb_s": args.conn_mb_s, "load_average": load}
        summary.update(run_rounds(port, args.size, args.ranges, args.rounds))
        summary["load_average_end"] = os.getloadavg()
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
