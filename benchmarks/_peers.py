"""The loader's peers in the remote benchmarks: blocking GETs on a thread pool, and SPDL's
async pipeline.

- :func:`threadpool`: a ``ThreadPoolExecutor(threads)`` of blocking ``http.client`` GETs, one
  keep-alive connection per thread (:class:`KeepAlive`; the thread-per-request baseline);
- :func:`spdl_pipeline`: SPDL's pipeline (``spdl.pipeline`` from the ``spdl-core`` wheel,
  pure Python, not a dependency of this project: ``pip install spdl-core``) running a
  coroutine per item on its own event loop thread with a bounded concurrency, outputs in
  input order; :func:`spdl_items` times it over ``/item/{i}`` GETs.  :func:`has_spdl` says
  whether it imports here; a bench leaves the SPDL contender out where it does not.

All GETs go to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import http.client
import importlib.util
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["KeepAlive", "has_spdl", "spdl_items", "spdl_pipeline", "threadpool"]


class KeepAlive:
    """Blocking GETs on 127.0.0.1:``port``, each thread on a keep-alive ``http.client``
    connection of its own (made at its first GET; 30 s timeout).  Thread-safe; ``close()``
    closes every connection (call it once no GET runs)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()
        self.lock = threading.Lock()
        self.conns: list[http.client.HTTPConnection] = []

    def get(self, path: str, headers: dict[str, str] | None = None) -> bytes:
        """The body of one GET of ``path`` (status not checked) on this thread's connection."""
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            with self.lock:
                self.conns.append(conn)
        conn.request("GET", path, headers=headers or {})
        return conn.getresponse().read()

    def close(self) -> None:
        with self.lock:
            for conn in self.conns:
                conn.close()
            self.conns.clear()


def threadpool(port: int, items: int, threads: int) -> tuple[float, float]:
    """``(items/s, CPU s per item)`` of ``ThreadPoolExecutor(threads)`` GETting ``/item/{i}``
    for ``i < items`` (``threads`` in flight), after a warm-up of one GET per thread (its
    connection).  CPU is this process's, all its threads."""
    conns = KeepAlive(port)

    def get(i: int) -> int:
        return len(conns.get(f"/item/{i}"))

    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(get, range(threads)))  # warm-up: one connection per thread
            c0, t0 = time.process_time(), time.perf_counter()
            n = len(list(pool.map(get, range(items))))
            return n / (time.perf_counter() - t0), (time.process_time() - c0) / n
    finally:
        conns.close()


def has_spdl() -> bool:
    """Whether SPDL's pipeline imports here (``pip install spdl-core``)."""
    return importlib.util.find_spec("spdl") is not None and importlib.util.find_spec("spdl.pipeline") is not None


class _Session:
    """The pipeline loop's ``aiohttp.ClientSession``: made by the first request (on the
    pipeline's event loop thread), closed when the pipeline ends (an SPDL background task:
    its ``run`` is cancelled then, and awaited)."""

    def __init__(self) -> None:
        self.session: Any = None

    def get(self) -> Any:
        import aiohttp

        if self.session is None:
            self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                                 timeout=aiohttp.ClientTimeout(total=None))
        return self.session

    async def run(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            if self.session is not None:
                await self.session.close()


def spdl_pipeline(source: Iterable[Any], fetch: Callable[[Any, Any], Awaitable[Any]], concurrency: int,
                  batch_size: int | None) -> Any:
    """An SPDL pipeline, built and not started, whose outputs are, in input order, those of
    ``fetch(session, x)`` for each ``x`` of ``source``: source, then a pipe of ``concurrency``
    coroutines at a time on the pipeline's event loop (``output_order="input"``, as the
    loader keeps order), then lists of ``batch_size`` outputs (None: single outputs).
    ``session`` is one ``aiohttp.ClientSession`` (no connection limit) for the whole
    pipeline, closed when it ends.  Run it as ``with p.auto_stop(): for out in
    p.get_iterator(timeout=...)``.

    Time it up to its last output, not to its end: SPDL 0.8's iterator ends ~100 ms after
    the last output (and ``auto_stop`` may take as long again), whatever the work."""
    from spdl.pipeline import PipelineBuilder, build_pipeline

    holder = _Session()

    async def op(x: Any) -> Any:
        return await fetch(holder.get(), x)

    builder = PipelineBuilder().add_source(source).pipe(op, concurrency=concurrency, output_order="input")
    if batch_size is not None:
        builder = builder.aggregate(batch_size)
    return build_pipeline(builder.add_sink(4).get_config(), num_threads=1, background_tasks=[lambda: holder])


def spdl_items(port: int, items: int, concurrency: int) -> tuple[float, float]:
    """``(items/s, CPU s per item)`` of :func:`spdl_pipeline` GETting ``/item/{i}`` for
    ``i < items`` (more than 64), ``concurrency`` in flight, batches of 64; the first batch is
    a warm-up (the loop thread, the session, the first connections), as for the loader; the
    time runs to the last batch."""

    async def get(session: Any, i: int) -> int:
        async with session.get(f"http://127.0.0.1:{port}/item/{i}") as resp:
            return len(await resp.read())

    pipeline = spdl_pipeline(range(items), get, concurrency, 64)
    with pipeline.auto_stop():
        it = pipeline.get_iterator(timeout=60)
        n = len(next(it))
        c0, t0 = time.process_time(), time.perf_counter()
        for batch in it:
            n += len(batch)
            if n == items:  # the last output: the time to it (see spdl_pipeline)
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        return (items - 64) / dt, cpu / (items - 64)
