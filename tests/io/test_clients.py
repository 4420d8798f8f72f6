"""dataloader.io._clients: a new remote dataset kind is one class with one obligation
(``_new_client`` and ``async _fetch``), and gets per-loop clients, fork safety, copies and
closing from ``RemoteDataset``.

The kind here (``Raw``) is written in this file with nothing but that obligation, over a tiny
client of its own (one HTTP/1.1 keep-alive connection on asyncio streams, no aiohttp), against
the local server of tests/_http_server.py.  Every wait is bounded."""

from __future__ import annotations

import asyncio
import copy
import gc
import os
import pickle
import re
import sys
import threading

import pytest

from tests._fork import fork_and_wait
from tests._http_server import FaultServer
from dataloader import DataLoader
from dataloader.io._clients import ClientCache, ProcessRuntime, RemoteDataset

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10.0


class KeepAlive:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1, one request at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.pid = os.getpid()
        self.loop = asyncio.get_running_loop()
        self.thread = threading.current_thread()
        self.closed = False
        self.fetches = 0
        self._turn = asyncio.Lock()
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, path: str) -> bytes:
        async with self._turn, asyncio.timeout(WAIT_S):
            if self._conn is None:
                self._conn = await asyncio.open_connection("127.0.0.1", self.port)
            reader, writer = self._conn
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            found = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
            assert head.startswith(b"HTTP/1.1 200") and found, head
            self.fetches += 1
            return await reader.readexactly(int(found.group(1)))

    async def close(self) -> None:
        self.closed = True
        if self._conn is not None:
            self._conn[1].close()
            await self._conn[1].wait_closed()


class Raw(RemoteDataset[KeepAlive]):
    """The tiny remote kind: locations are paths on one server; the obligation and nothing else."""

    def __init__(self, port: int, paths: list[str]) -> None:
        super().__init__(paths)
        self.port = port
        self.made: list[KeepAlive] = []  # every client made, in order (list.append is atomic)

    def _new_client(self) -> KeepAlive:
        client = KeepAlive(self.port)
        self.made.append(client)
        return client

    async def _fetch(self, client: KeepAlive, location: str) -> bytes:
        return await client.get(location)


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def body(path: str, size: int) -> bytes:
    unit = path.encode()
    return (unit * (size // len(unit) + 1))[:size]


N = 12
PATHS = [f"/ok/{i}?size={10 + i}" for i in range(N)]
EXPECTED = [body(f"/ok/{i}", 10 + i) for i in range(N)]


def items(loader) -> list[bytes]:
    return [x for batch in loader for x in batch]


def test_one_client_per_loop_serves_every_item_over_one_connection_and_closes_with_the_loader(server):
    ds = Raw(server.port, PATHS)
    loader = DataLoader(ds, batch_size=4, num_workers=2, item_concurrency=4, collate_fn=list)
    assert items(loader) == EXPECTED and items(loader) == EXPECTED  # two epochs, one loop
    assert len(ds.made) == 1 and ds.made[0].fetches == 2 * N
    assert server.connections == 1  # the client was reused, its one connection kept alive
    assert not ds.made[0].closed
    loader.close()
    assert ds.made[0].closed  # the loader's aclose() awaited the client's close()
    with DataLoader(ds, batch_size=4, collate_fn=list) as again:  # a new loop: a new client
        assert items(again) == EXPECTED
    assert len(ds.made) == 2 and ds.made[1].closed and ds.made[1].loop is not ds.made[0].loop


def test_two_loaders_over_one_dataset_use_a_client_each_on_their_own_loops(server):
    ds = Raw(server.port, PATHS)
    first = DataLoader(ds, batch_size=3, num_workers=1, item_concurrency=3, collate_fn=list)
    second = DataLoader(ds, batch_size=5, num_workers=2, item_concurrency=2, collate_fn=list)
    a, b = iter(first), iter(second)
    assert next(a) == EXPECTED[:3] and next(b) == EXPECTED[:5]  # both loops run now
    assert len(ds.made) == 2 and ds.made[0].loop is not ds.made[1].loop
    assert ds.made[0].thread is not ds.made[1].thread
    assert len(ds._clients) == 2
    first.close()
    assert [c.closed for c in ds.made] == [True, False] and len(ds._clients) == 1
    assert [x for batch in b for x in batch] == EXPECTED[5:]  # the other loader's client goes on
    second.close()
    assert all(c.closed for c in ds.made) and len(ds._clients) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_its_own_client_and_leaves_the_parents_open(server):
    ds = Raw(server.port, PATHS)
    loader = DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=4, collate_fn=list)
    assert items(loader) == EXPECTED
    parent_client = ds.made[0]

    def child() -> int:
        unraisable: list[object] = []
        sys.unraisablehook = unraisable.append
        if len(ds._clients) != 0:
            return 3  # the parent's client was set aside at the fork
        if items(loader) != EXPECTED:
            return 4
        mine = ds.made[-1]
        if len(ds.made) != 2 or mine.pid != os.getpid() or mine is parent_client:
            return 5
        loader.close()
        gc.collect()
        if not mine.closed or parent_client.closed:  # the parent's connection is not the child's to close
            return 6
        return 7 if unraisable else 0

    assert fork_and_wait(child, 30) == 0
    assert server.connections == 2  # the parent's connection, and the child's own
    assert items(loader) == EXPECTED and len(ds.made) == 1 and parent_client.fetches == 2 * N
    loader.close()


def test_copy_shares_the_clients_and_pickle_makes_a_dataset_with_none(server):
    ds = Raw(server.port, PATHS)
    with DataLoader(ds, batch_size=4, collate_fn=list) as loader:
        assert items(loader) == EXPECTED
        twin = copy.copy(ds)
        assert twin._clients is ds._clients and len(ds._clients) == 1
        ds.made = []  # the test's own record (its clients hold loops): not the dataset's state
        restored = pickle.loads(pickle.dumps(ds))
        deep = copy.deepcopy(ds)
    for other in (restored, deep):
        assert other._clients is not ds._clients and len(other._clients) == 0
        with DataLoader(other, batch_size=4, collate_fn=list) as loader:
            assert items(loader) == EXPECTED
        assert len(other.made) == 1 and other.made[0].closed  # the copy's own client, closed


def test_a_kind_that_refuses_pickling_names_itself():
    class Private(Raw):
        pickles = False

        def __repr__(self) -> str:
            return "Private(token=***)"

    ds = Private(1, PATHS)
    for how in (pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match=re.escape("cannot pickle or deep-copy Private(token=***)")):
            how(ds)
    assert copy.copy(ds)._clients is ds._clients


def test_a_kind_without_the_obligation_fails_its_items_naming_what_is_missing():
    class Half(RemoteDataset[object]):
        def _new_client(self) -> object:
            return object()

    with DataLoader(Half(["a"]), batch_size=None) as loader:
        with pytest.raises(NotImplementedError, match="Half must define async def _fetch"):
            next(iter(loader))


def test_client_cache_needs_a_running_loop_and_keeps_nothing_when_making_a_client_fails():
    cache: ClientCache[object] = ClientCache()
    with pytest.raises(RuntimeError, match="no running event loop"):
        cache.get(object)

    def refuse() -> object:
        raise OSError("no client")

    async def attempts() -> tuple[object, object]:
        with pytest.raises(OSError, match="no client"):
            cache.get(refuse)
        assert len(cache) == 0
        return cache.get(object), cache.get(refuse)  # made once, then reused

    first, again = asyncio.run(attempts())
    assert first is again and len(cache) == 1  # the loop's entry stays until pop() (aclose)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_process_runtime_refuses_a_forked_child_once_the_parent_used_it():
    runtime = ProcessRuntime("Test: the runtime")
    runtime.enter()
    runtime.enter()  # the same process: fine

    def child() -> int:
        try:
            runtime.enter()
        except RuntimeError as exc:
            return 0 if f"the runtime was started in process {os.getppid()}" in str(exc) else 3
        return 4

    assert fork_and_wait(child, 30) == 0
    unused = ProcessRuntime("Test: unused")
    assert fork_and_wait(lambda: (unused.enter(), 0)[1], 30) == 0  # never entered by the parent


def test_a_closed_client_is_replaced_on_its_loop_and_an_open_one_reused():
    class Client:
        closed = False

    cache: ClientCache[Client] = ClientCache()

    async def use() -> list[Client]:
        first = cache.get(Client)
        again = cache.get(Client)  # open: the same one, found without the lock
        first.closed = True
        fresh = cache.get(Client)  # closed: replaced under the lock
        return [first, again, fresh, cache.get(Client)]

    first, again, fresh, last = asyncio.run(use())
    assert first is again and fresh is not first and last is fresh and len(cache) == 1
