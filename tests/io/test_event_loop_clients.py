"""Remote datasets on several event loops (``DataLoader(event_loops=n)``): one client per loop,
made on that loop, serving exactly the items routed there (index ``i`` on loop ``i % n``), all
closed when the loader closes; ``HttpDataset`` (aiohttp, skipped without it) gives the same
bytes and the same per-item errors on one loop or three.  Every wait is bounded."""

from __future__ import annotations

import pytest

from dataloader import DataLoader
from dataloader._engine.async_loop import ASYNC_THREAD_NAME
from tests._http_server import FaultServer
from tests._support import collect
from tests.io.test_clients import EXPECTED, PATHS, Raw, items

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server():
    s = FaultServer()
    yield s
    s.close()


def test_each_loop_makes_its_own_client_which_fetches_the_items_routed_there_and_closes(server):
    n = 3
    ds = Raw(server.port, PATHS)
    loader = DataLoader(ds, batch_size=4, num_workers=2, item_concurrency=6, collate_fn=list, event_loops=n)
    assert items(loader) == EXPECTED and items(loader) == EXPECTED  # two epochs, the same loops
    assert len(ds.made) == n
    names = {c.thread.name: c for c in ds.made}
    assert set(names) == {ASYNC_THREAD_NAME, *(f"{ASYNC_THREAD_NAME}-{j}" for j in range(1, n))}
    assert len({id(c.loop) for c in ds.made}) == n
    for j in range(n):  # item i on loop i % n, twice (two epochs)
        name = ASYNC_THREAD_NAME if j == 0 else f"{ASYNC_THREAD_NAME}-{j}"
        assert names[name].fetches == 2 * len(range(j, len(PATHS), n))
    assert server.connections == n  # one keep-alive connection per loop's client
    assert not any(c.closed for c in ds.made)
    loader.close()
    assert all(c.closed for c in ds.made)  # aclose() awaited on each loop


def test_http_dataset_gives_the_same_bytes_and_errors_on_one_loop_or_three(server):
    pytest.importorskip("aiohttp")
    from dataloader.io import HttpDataset, Retry

    urls = [server.url(f"/ok/{i}?size={100 + i}") for i in range(20)]
    urls[7] = server.url("/status/404")
    urls[14] = server.url("/status/410")

    def run(**kw):
        ds = HttpDataset(urls, retry=Retry(max_attempts=1))
        with DataLoader(ds, batch_size=3, num_workers=2, item_concurrency=4, collate_fn=list, **kw) as loader:
            return [(kind, v if kind == "batch" else v[0]) for kind, v in collect(loader)]

    one = run()
    assert [kind for kind, _ in one].count("error") == 2
    assert run(event_loops=3) == one
