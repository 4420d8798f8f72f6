"""Ranged GETs: one large object through HttpDataset as one GET and as concurrent ranges.

A local HTTP/1.1 server, in a process of its own, serves one ``--size`` (64 MiB) object
with ``Accept-Ranges: bytes``: it answers ``--rtt-s`` (20 ms) after a request's headers
(a round trip) and then sends at most ``--conn-mb-s`` (50 MB/s) on each connection, as a
server, proxy or long-RTT TCP window that limits one connection does (S3: ~85-90 MB/s per
connection).  Contenders, each once per round, rounds interleaved (``--rounds``, medians):

- ``HttpDataset`` through ``DataLoader(batch_size=None)``, ranges off: one GET;
- the same with ``range_parallel_threshold=32 MiB, range_chunk_bytes=size / --ranges``
  (8 ranges of 8 MiB): the first part from the item's own GET, the 7 others as ranges;
- plain aiohttp, one GET, no loader: what one connection gives;
- plain aiohttp, the same ranges all at once with the size known beforehand, no loader: what
  this machine gives to concurrent connections (its ceiling for the ranged contender).

Each item is checked byte for byte once per contender.  The goal (issue 25): 8 ranges at
least 4x one GET.  Ideal: one GET ``rtt + size / rate`` (~1.36 s); 8 ranges ``2 rtt +
size / (8 rate)`` (~0.21 s), 6.5x.

Run: ``python benchmarks/bench_ranges.py`` (``--size``, ``--ranges``, ``--rtt-s``,
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
import subprocess
import sys
import time

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

    async def run() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256)
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(run())


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
                asked = [{"Range": f"bytes={a}-{min(a + chunk, len(expect)) - 1}"}
                         for a in range(0, len(expect), chunk)]
                body = b"".join(await asyncio.gather(*(get(session, h) for h in asked)))
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert body == expect, "wrong bytes"
        return dt, cpu

    return asyncio.run(run())


def _report(name: str, got: list[tuple[float, float]], size: int) -> dict[str, object]:
    runs = [dt for dt, _ in got]
    median, cpu = statistics.median(runs), statistics.median(c for _, c in got)
    print(f"{name}: {median:.3f} s ({size / median / 1e6:,.0f} MB/s, client CPU {cpu:.2f} s); "
          f"rounds {[round(r, 3) for r in runs]}")
    return {"median_s": median, "rounds_s": runs, "client_cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64 << 20)
    parser.add_argument("--ranges", type=int, default=8)
    parser.add_argument("--rtt-s", type=float, default=0.02)
    parser.add_argument("--conn-mb-s", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.size, args.rtt_s, args.conn_mb_s * 1e6)
        return
    load = os.getloadavg()
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    print(f"Python {sys.version.split()[0]}{'' if gil else 't'}; load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", f"--size={args.size}", f"--rtt-s={args.rtt_s}",
         f"--conn-mb-s={args.conn_mb_s}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        url = f"http://127.0.0.1:{int(proc.stdout.readline())}/object.bin"
        expect = content(args.size)
        chunk = -(-args.size // args.ranges)
        runs: dict[str, list[tuple[float, float]]] = {"one_get": [], "ranges": [], "plain_aiohttp": [],
                                                      "plain_aiohttp_ranges": []}
        for _ in range(args.rounds):  # every contender once per round: load changes hit them all alike
            runs["one_get"].append(bench_loader(url, None, chunk, expect))
            runs["ranges"].append(bench_loader(url, min(32 << 20, args.size), chunk, expect))
            runs["plain_aiohttp"].append(bench_plain(url, expect, None))
            runs["plain_aiohttp_ranges"].append(bench_plain(url, expect, chunk))
        summary: dict[str, object] = {"size": args.size, "parts": args.ranges, "rtt_s": args.rtt_s,
                                      "conn_mb_s": args.conn_mb_s, "load_average": load}
        summary["one_get"] = _report("HttpDataset, one GET", runs["one_get"], args.size)
        summary["ranges"] = _report(f"HttpDataset, {args.ranges} ranges of {chunk:,} bytes", runs["ranges"],
                                    args.size)
        summary["plain_aiohttp"] = _report("plain aiohttp, one GET, no loader", runs["plain_aiohttp"], args.size)
        summary["plain_aiohttp_ranges"] = _report(f"plain aiohttp, {args.ranges} ranges at once, size known, no loader",
                                                  runs["plain_aiohttp_ranges"], args.size)
        ratios = [one[0] / ranged[0] for one, ranged in zip(runs["one_get"], runs["ranges"])]
        summary["speedup"] = statistics.median(ratios)
        print(f"ranges vs one GET: {summary['speedup']:.2f}x (median of the rounds' ratios; goal >= 4x)")
        summary["load_average_end"] = os.getloadavg()
        print(json.dumps(summary))
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(10)


if __name__ == "__main__":
    main()
