"""A tiny ``range_chunk_bytes`` (hundreds of parts for one object) keeps at most
``RANGES_IN_FLIGHT`` requests of the object at the server and as many asyncio tasks on the
loop (not one task per part), the bytes exact: ``HttpDataset`` against the local range
server of test_http_ranges.py, which counts the ranges of each object in flight on its side,
and ``ObjectStoreDataset``'s ``store_ranged_get`` on an in-memory obstore store."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import pytest

pytest.importorskip("aiohttp")

from tests.io.test_http_ranges import FAST, RangeServer, content, new_key  # noqa: E402
from dataloader.io import HttpDataset  # noqa: E402
from dataloader.io.ranges import RANGES_IN_FLIGHT, RangeSettings, store_ranged_get  # noqa: E402

pytestmark = pytest.mark.timeout(120)


class CountingServer(RangeServer):
    """``RangeServer`` that tracks, per object, how many range requests it is answering at
    once (``busiest[key]``: the most), each held ``hold_s`` so that overlaps show."""

    hold_s = 0.002

    def __init__(self) -> None:
        super().__init__()
        self.now: dict[str, int] = {}
        self.busiest: dict[str, int] = {}

    def handle(self, h) -> None:
        key = urlsplit(h.path).path
        ranged = "Range" in h.headers
        if ranged:
            with self.lock:
                self.now[key] = self.now.get(key, 0) + 1
                self.busiest[key] = max(self.busiest.get(key, 0), self.now[key])
            time.sleep(self.hold_s)
        try:
            super().handle(h)
        finally:
            if ranged:
                with self.lock:
                    self.now[key] -= 1


@pytest.fixture(scope="module")
def server():
    s = CountingServer()
    yield s
    s.close()


async def most_tasks_while(coro):
    """``coro``'s result and the most asyncio tasks alive on this loop while it ran (sampled
    at every turn of the loop)."""
    most, done = 0, False

    async def watch():
        nonlocal most
        while not done:
            most = max(most, len(asyncio.all_tasks()))
            await asyncio.sleep(0)

    watcher = asyncio.create_task(watch())
    try:
        return await coro, most
    finally:
        done = True
        await watcher


def test_many_tiny_http_parts_keep_the_bound_at_the_server_and_on_the_loop(server):
    size, chunk = 256 << 10, 1 << 10  # 256 parts
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size={size}")], retry=FAST, range_parallel_threshold=chunk + 1,
                     range_chunk_bytes=chunk, max_connections=64)

    async def main():
        try:
            return await most_tasks_while(ds[0])
        finally:
            await ds.aclose()

    got, tasks = asyncio.run(main())
    assert got == content(size)
    assert sorted(server.ranges[key]) == [(a, a + chunk - 1) for a in range(chunk, size, chunk)]
    assert 2 <= server.busiest[key] <= RANGES_IN_FLIGHT
    # the main task, the watcher, the item's group task and its RANGES_IN_FLIGHT - 1 runners
    assert tasks <= RANGES_IN_FLIGHT + 2


def test_many_tiny_object_store_parts_run_on_a_bounded_number_of_tasks():
    obstore = pytest.importorskip("obstore")
    store = obstore.store.MemoryStore()
    size = 4099  # 586 parts of 7 bytes, the last one shorter
    obstore.put(store, "big", content(size))

    async def main():
        first = await obstore.get_async(store, "big")
        return await most_tasks_while(store_ranged_get(store, "big", first, RangeSettings(8, 7)))

    got, tasks = asyncio.run(main())
    assert got == content(size)
    assert tasks <= RANGES_IN_FLIGHT + 2
