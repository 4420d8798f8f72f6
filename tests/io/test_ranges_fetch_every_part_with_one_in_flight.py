"""``dataloader.io.ranges.RANGES_IN_FLIGHT`` (named in docs/usage.md) set to 1 still fetches
every part: one runner task at least, so an object is never silently cut to its first part
(before, ``min(RANGES_IN_FLIGHT - 1, parts)`` started no runner and the item was its first
range only; before the runners, ``Semaphore(0)`` hung)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("aiohttp")

import dataloader.io.ranges as ranges  # noqa: E402
from tests.io.test_http_ranges import FAST, RangeServer, content, new_key  # noqa: E402
from dataloader.io import HttpDataset  # noqa: E402

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server():
    s = RangeServer()
    yield s
    s.close()


@pytest.mark.parametrize("in_flight", [1, 0])
def test_http_parts_are_all_fetched_with_one_request_in_flight(server, monkeypatch, in_flight):
    monkeypatch.setattr(ranges, "RANGES_IN_FLIGHT", in_flight)
    key = new_key()
    ds = HttpDataset([server.url(f"{key}?size=1000")], retry=FAST, range_parallel_threshold=101,
                     range_chunk_bytes=100)

    async def main():
        try:
            return await ds[0]
        finally:
            await ds.aclose()

    assert asyncio.run(main()) == content(1000)
    assert sorted(server.ranges[key]) == [(a, a + 99) for a in range(100, 1000, 100)]


def test_object_store_parts_are_all_fetched_with_one_request_in_flight(monkeypatch):
    obstore = pytest.importorskip("obstore")
    monkeypatch.setattr(ranges, "RANGES_IN_FLIGHT", 1)
    store = obstore.store.MemoryStore()
    obstore.put(store, "k", content(1000))

    async def main():
        first = await obstore.get_async(store, "k")
        return await ranges.store_ranged_get(store, "k", first, ranges.RangeSettings(101, 100))

    assert asyncio.run(main()) == content(1000)
