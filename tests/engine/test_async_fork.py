"""fork() while an async loader's event loop thread runs (the worker pool's rule,
tests/engine/test_epoch_lifecycle.py): in the child, a new epoch of the parent's loader gets an
event loop of its own, an epoch started before the fork raises RuntimeError and closes at
once, a new loader works, and nothing hangs; obstore, whose runtime threads are not
inherited, fails its items with RuntimeError instead of waiting forever.

Each child reports through its exit status; every wait is bounded."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time

import pytest

from tests._fork import fork_and_wait
from dataloader import AsyncDataset, DataLoader
from dataloader._engine.async_loop import ASYNC_THREAD_NAME

pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"), pytest.mark.timeout(90)]

WAIT_S = 30


class Squares(AsyncDataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        await asyncio.sleep(0.001)
        return index * index


def run_forked(child) -> int:
    """``child()`` in a forked child, its return value the exit status; 98 if the collector
    reported an unraisable error there (an unclosed loop's or session's ResourceWarning)."""

    def checked():
        unraisable = []
        sys.unraisablehook = unraisable.append
        code = child()
        gc.collect()
        return 98 if unraisable and code == 0 else code

    return fork_and_wait(checked, WAIT_S)


def batches(loader):
    return [b.tolist() for b in loader]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_after_fork_the_parents_async_loader_runs_on_a_new_loop_and_its_old_epoch_raises(num_workers):
    loader = DataLoader(Squares(12), batch_size=4, num_workers=num_workers, item_concurrency=4)
    expected = batches(loader)
    it = iter(loader)  # an epoch in progress at the fork: its loop thread is running
    assert next(it).tolist() == expected[0]
    parent_loop = [t for t in threading.enumerate() if t.name == ASYNC_THREAD_NAME]
    assert len(parent_loop) == 1

    def child():
        if num_workers:
            try:
                next(it)
                return 3
            except RuntimeError as exc:
                if "fork" not in str(exc):
                    return 4
            t0 = time.monotonic()
            it.close()
            if time.monotonic() - t0 > 1.0:
                return 5
        if batches(loader) != expected or batches(loader) != expected:
            return 6
        loops = [t for t in threading.enumerate() if t.name == ASYNC_THREAD_NAME]
        if len(loops) != 1 or loops[0] is parent_loop[0] or not loops[0].is_alive():
            return 7  # the child's own loop thread (the parent's does not exist here)
        with DataLoader(Squares(12), batch_size=4, num_workers=1, item_concurrency=2) as fresh:
            if batches(fresh) != expected:
                return 8
        t0 = time.monotonic()
        loader.close()
        if time.monotonic() - t0 > 5.0 or [t for t in threading.enumerate() if t.name == ASYNC_THREAD_NAME]:
            return 9
        return 0

    assert run_forked(child) == 0
    assert [b.tolist() for b in it] == expected[1:]  # the parent's epoch and loop go on
    assert batches(loader) == expected
    loader.close()


def test_an_epoch_without_workers_started_before_the_fork_fails_clearly_and_close_returns_at_once():
    loader = DataLoader(Squares(12), batch_size=4, num_workers=0)
    it = iter(loader)
    assert next(it).tolist() == [0, 1, 4, 9]

    def child():
        try:
            next(it)
            return 3
        except RuntimeError as exc:
            if "event loop was started in process" not in str(exc) or "fork" not in str(exc):
                return 4
        t0 = time.monotonic()
        it.close()
        loader.close()  # the parent's loop is let go of, not awaited
        return 0 if time.monotonic() - t0 < 1.0 else 5

    assert run_forked(child) == 0
    assert next(it).tolist() == [16, 25, 36, 49]
    it.close()
    loader.close()


def test_an_http_loader_in_the_child_opens_its_own_connections():
    pytest.importorskip("aiohttp")
    from tests._http_server import FaultServer

    from dataloader.io import HttpDataset, Retry

    server = FaultServer()
    try:
        ds = HttpDataset([server.url(f"/ok/{i}?size=3") for i in range(6)],
                         retry=Retry(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02))
        loader = DataLoader(ds, batch_size=3, num_workers=1, item_concurrency=3, collate_fn=list)
        expected = list(loader)
        before = server.connections

        def child():
            got = list(loader)  # a new loop, so a new session: the parent's connections stay its own
            loader.close()
            return 0 if got == expected else 3

        assert run_forked(child) == 0
        assert server.connections > before  # the child's own (counted here, by the server's threads)
        assert list(loader) == expected
        loader.close()
    finally:
        server.close()


def test_obstore_items_fail_in_a_forked_child_instead_of_waiting_forever():
    obstore = pytest.importorskip("obstore")
    from dataloader.io import ObjectStoreDataset

    store = obstore.store.MemoryStore()
    obstore.put(store, "a", b"A")
    loader = DataLoader(ObjectStoreDataset(["a"], store=store), batch_size=None, collate_fn=bytes)
    assert list(loader) == [b"A"]

    def child():
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="obstore's runtime was started in process"):
            next(iter(loader))
        loader.close()
        return 0 if time.monotonic() - t0 < 5.0 else 3

    assert run_forked(child) == 0
    assert list(loader) == [b"A"]
    loader.close()
