"""CPU per request: ``HttpDataset`` against plain aiohttp, on a server that answers at once.

``bench_remote``'s server (its own process, so its CPU is not counted; keep-alive, a fixed
``--size`` body, here with no latency) answers every GET at once, so the client's CPU is
the limit and CPU time per request (``time.process_time``: every thread of this process)
measures what each contender costs; CPU time is steadier than wall time on a shared machine.
Contenders, each over ``--items`` GETs with 64 in flight on one event loop, every contender
once per round, the order rotated each round, medians of ``--rounds``:

- ``plain``: plain aiohttp, ``async with session.get(url) as r: await r.read()``, a session
  with ``TCPConnector(limit=0)`` (the reference);
- ``dataset``: ``HttpDataset``'s own coroutines (``await ds[i]``), no loader, hedging as
  by default (``hedge_delay="auto"``);
- ``dataset_nohedge``: the same with ``hedge_delay=0``;
- ``loader_w1_c64``: ``HttpDataset`` through ``DataLoader(num_workers=1, item_concurrency=64,
  batch_size=64, collate_fn=len)`` (its worker thread and event loop thread included).

With ``--stub`` no request leaves the process: the contenders' sessions are a stub that
answers each GET at once (its headers after one loop turn, its body after another), so the
figures are the client code's own CPU per request, aiohttp's parser and sockets apart:
``plain`` is then the floor of the idiom, and ``dataset - plain`` what ``HttpDataset`` adds
(URL template and checks, retry, time-outs, hedging, error mapping), with far less noise
than with sockets.  The loader contender does not run with ``--stub``.

``--profile NAME`` runs one contender once under cProfile instead and prints its top
functions by own time.  ``--before DIR`` also runs every contender from another checkout
(``PYTHONPATH=DIR``; each measurement then in a process of its own, this checkout's too),
interleaved with this one's: a before/after in one run.  Run: ``PYTHONPATH=. python
benchmarks/bench_http_cpu.py [--stub] [--before DIR]`` (``--items``, ``--rounds``, ``--only``).
Prints the load average at the start and end and a JSON summary.  127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

IN_FLIGHT = 64


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}/item/{{index}}"


class _StubContent:
    """A response body: ``readany()`` gives it whole, then ``b""``; a loop turn each."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def readany(self) -> bytes:
        await asyncio.sleep(0)
        body, self.body = self.body, b""
        return body

    async def read(self) -> bytes:
        await asyncio.sleep(0)
        return self.body

    def iter_any(self) -> _StubContent:  # what HttpDataset read a body with before 'readany'
        return self

    def __aiter__(self) -> _StubContent:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self.readany()
        if not chunk:
            raise StopAsyncIteration
        return chunk


class _StubResponse:
    status = 200
    reason = "OK"
    headers: dict[str, str] = {}

    def __init__(self, body: bytes) -> None:
        self.content_length = len(body)
        self.content = _StubContent(body)

    async def read(self) -> bytes:
        return await self.content.read()

    async def __aenter__(self) -> _StubResponse:
        await asyncio.sleep(0)  # the headers: one loop turn
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class StubSession:
    """What ``HttpDataset`` and the plain idiom use of an ``aiohttp.ClientSession``, answering
    every GET at once with ``size`` bytes (see ``--stub``)."""

    closed = False

    def __init__(self, size: int = 16384) -> None:
        self.body = b"b" * size

    def get(self, url: str, **kwargs: object) -> _StubResponse:
        return _StubResponse(self.body)


def plain(port: int, items: int) -> float:
    """CPU seconds of ``items`` plain aiohttp GETs, 64 in flight (after a warm-up)."""
    import aiohttp

    async def run() -> float:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as session:
            async def get(i: int) -> int:
                async with session.get(f"http://127.0.0.1:{port}/item/{i}") as resp:
                    return len(await resp.read())

            return await _timed(get, items)

    return asyncio.run(run())


def plain_stub(port: int, items: int) -> float:
    """``plain`` with a ``StubSession`` (``--stub``)."""
    session = StubSession()

    async def get(i: int) -> int:
        async with session.get(f"http://127.0.0.1:{port}/item/{i}") as resp:
            return len(await resp.read())

    return asyncio.run(_timed(get, items))


def dataset(port: int, items: int, hedge_delay: float | str = "auto", stub: bool = False) -> float:
    """CPU seconds of ``items`` ``HttpDataset`` items on one loop, no loader (after a warm-up)."""
    from dataloader import HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(_url(port)), length=items), max_connections=0, hedge_delay=hedge_delay)
    if stub:
        setattr(ds, "_new_client", StubSession)  # the dataset's one client maker (io._clients)

    async def run() -> float:
        try:
            return await _timed(ds.__getitem__, items)
        finally:
            await ds.aclose()

    return asyncio.run(run())


async def _timed(get: Callable[[int], Awaitable[object]], items: int) -> float:
    todo = iter(range(items))

    async def client() -> None:
        for i in todo:
            await get(i)

    await asyncio.gather(*[get(i) for i in range(IN_FLIGHT)])  # warm-up: the connections
    t0 = time.process_time()
    await asyncio.gather(*[client() for _ in range(IN_FLIGHT)])
    return time.process_time() - t0


def loader(port: int, items: int) -> float:
    """CPU seconds of ``items`` through ``DataLoader(num_workers=1, item_concurrency=64)``."""
    from dataloader import DataLoader, HttpDataset, Locations, Template

    ds = HttpDataset(Locations(Template(_url(port)), length=items + 64), max_connections=0)
    with DataLoader(ds, batch_size=64, num_workers=1, item_concurrency=IN_FLIGHT, collate_fn=len) as dl:
        it = iter(dl)
        next(it)  # warm-up: the loop thread, the session, the connections
        t0 = time.process_time()
        sum(it)
        return time.process_time() - t0


CONTENDERS: dict[str, Callable[[int, int], float]] = {
    "plain": plain,
    "dataset": dataset,
    "dataset_nohedge": lambda port, items: dataset(port, items, 0),
    "loader_w1_c64": loader,
}
STUBBED: dict[str, Callable[[int, int], float]] = {
    "plain": plain_stub,
    "dataset": lambda port, items: dataset(port, items, stub=True),
    "dataset_nohedge": lambda port, items: dataset(port, items, 0, stub=True),
}


def _one(name: str, port: int, items: int, checkout: str, stub: bool) -> float:
    """``name``'s CPU us/request measured in a fresh process importing ``dataloader`` from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": checkout, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, __file__, "--measure", name, f"--port={port}", f"--items={items}"]
    out = subprocess.run(command + ["--stub"] * stub, env=env, check=True, capture_output=True, text=True).stdout
    return float(out.split()[-1])


def _rounds(args: argparse.Namespace, port: int) -> dict[str, list[float]]:
    """Every contender (and checkout) once per round, the order rotated each round."""
    here = str(Path(__file__).resolve().parents[1])
    runs = [(name, tag, path) for name in args.only
            for tag, path in ((("after", here), ("before", args.before)) if args.before else (("", None),))]
    us: dict[str, list[float]] = {f"{name}{'@' + tag if tag else ''}": [] for name, tag, _ in runs}
    for r in range(args.rounds):
        for name, tag, path in runs[r % len(runs):] + runs[: r % len(runs)]:
            key = f"{name}{'@' + tag if tag else ''}"
            table = STUBBED if args.stub else CONTENDERS
            cpu = _one(name, port, args.items, path, args.stub) if path else table[name](port, args.items) / args.items * 1e6
            us[key].append(cpu)
        print(f"round {r}: " + "  ".join(f"{k} {v[-1]:.0f}" for k, v in us.items()) + " us/request (CPU)", flush=True)
    return us


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=4000)
    parser.add_argument("--size", type=int, default=16384)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", nargs="*", default=list(CONTENDERS), choices=list(CONTENDERS))
    parser.add_argument("--before", help="another checkout: each contender also runs from it (a process each)")
    parser.add_argument("--stub", action="store_true", help="no sockets: a stub session (see the module)")
    parser.add_argument("--profile", choices=list(CONTENDERS))
    parser.add_argument("--measure", choices=list(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stub and "loader_w1_c64" in args.only:
        args.only.remove("loader_w1_c64")
    if args.measure:
        print((STUBBED if args.stub else CONTENDERS)[args.measure](args.port, args.items) / args.items * 1e6)
        return
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    load = os.getloadavg()
    print(f"Python {sys.version.split()[0]}{'' if gil else 't'}; load average at the start "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    serve = [sys.executable, str(Path(__file__).with_name("bench_remote.py")), "--serve", "--latency-s=0",
             f"--size={args.size}"]
    server = subprocess.Popen(serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        if args.profile:
            import cProfile
            import pstats

            prof = cProfile.Profile()
            prof.runcall((STUBBED if args.stub else CONTENDERS)[args.profile], port, args.items)
            pstats.Stats(prof).sort_stats("tottime").print_stats(40)
            return
        us = _rounds(args, port)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(10)
    summary = {name: statistics.median(runs) for name, runs in us.items()}
    for name, runs in us.items():
        ref = us.get("plain@after", us.get("plain"))
        ratio = statistics.median(a / b for a, b in zip(runs, ref)) if ref else float("nan")
        print(f"{name}: {summary[name]:.0f} us/request CPU (median), {ratio:.2f}x plain "
              f"(rounds: {', '.join(f'{r:.0f}' for r in runs)})")
    end = os.getloadavg()
    print(f"load average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    print(json.dumps({"us_per_request": summary, "rounds": us, "load_average": load, "load_average_end": end}))


if __name__ == "__main__":
    main()
