"""A loader whose batch failed is freed by reference counting, on every fetch path: its epoch,
the loader and its threads (workers, an AsyncDataset's event loop) go as soon as the user
drops them, without the cyclic garbage collector.

The exception raised for a batch carries a traceback through the frames that built it; a
frame holding the exception in a local (kept while re-raised) makes a cycle that keeps every
object those frames refer to, and an async epoch's builder refers to the loader.

On the worker side, an object is freed on free-threaded builds by the thread that created it
(biased reference counting); the exception was made on a worker that sleeps in claim() until
the epoch is finalized, so a traceback that held the epoch's frames would keep both alive until
gc ran: Epoch.__next__ raises a carried exception from a frame that no longer holds the epoch.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

import numpy as np
import pytest

from dataloader import AsyncDataset, DataLoader
from dataloader._engine.async_loop import ASYNC_THREAD_NAME

FAIL_AT = 5


class Plain:
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == FAIL_AT:
            raise ValueError(i)
        return np.int64(i)


class PlainBatched(Plain):
    def __getitems__(self, indices):
        return [self[i] for i in indices]


class Async(AsyncDataset):
    def __len__(self):
        return 16

    async def __getitem__(self, i):
        await asyncio.sleep(0)
        if i == FAIL_AT:
            raise ValueError(i)
        return np.int64(i)


class AsyncBatched(Async):
    async def __getitems__(self, indices):
        return [await self.__getitem__(i) for i in indices]


def _failing_transform(x):
    if int(x) == FAIL_AT + 1:
        raise ValueError(int(x))
    return x


# Every fetch path: the dataset, the loader's options (each picks a path of its own).
PATHS = {
    "plain": (Plain, {}),
    "plain-getitems": (PlainBatched, {}),
    "plain-lanes": (Plain, {"item_concurrency": 3}),
    "plain-unbatched": (Plain, {"batch_size": None}),
    "plain-transform": (Plain, {"transform": _failing_transform}),
    "async": (Async, {}),
    "async-concurrent": (Async, {"item_concurrency": 3}),
    "async-getitems": (AsyncBatched, {}),
    "async-unbatched": (Async, {"batch_size": None}),
    "async-transform": (Async, {"transform": _failing_transform, "item_concurrency": 3}),
}


def _own_threads(before):
    return [t for t in threading.enumerate() if t not in before and t.is_alive()]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_failed_batch_leaves_nothing_for_the_garbage_collector(path, num_workers):
    cls, options = PATHS[path]
    kw = {"batch_size": 4, **options}
    before = set(threading.enumerate())
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        refs = []
        for _ in range(3):
            loader = DataLoader(cls(), num_workers=num_workers, **kw)
            it = iter(loader)
            refs += [weakref.ref(loader), weakref.ref(it)]
            with pytest.raises(ValueError):
                for _batch in it:
                    pass
            del loader, it
        deadline = time.monotonic() + 5
        while (any(r() is not None for r in refs) or _own_threads(before)) and time.monotonic() < deadline:
            time.sleep(0.02)
        alive = [type(r()).__name__ for r in refs if r() is not None]
        assert not alive, f"kept until gc.collect(): {alive}"
        assert not _own_threads(before), [t.name for t in _own_threads(before)]
    finally:
        if enabled:
            gc.enable()
        gc.collect()


@pytest.mark.timeout(30)
def test_the_event_loop_thread_of_a_dropped_failed_loader_ends():
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(5):
            loader = DataLoader(Async(), batch_size=4, num_workers=2)
            with pytest.raises(ValueError):
                list(loader)
            del loader
        deadline = time.monotonic() + 5
        while any(t.name == ASYNC_THREAD_NAME for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not [t for t in threading.enumerate() if t.name == ASYNC_THREAD_NAME]
    finally:
        if enabled:
            gc.enable()
        gc.collect()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("path", ["async", "async-getitems", "async-transform"])
def test_a_failed_epoch_is_freed_while_its_loader_lives(path, num_workers):
    # The item's exception is made on the event loop thread, which (on free-threaded builds)
    # frees it only when it next wakes up: its traceback must not hold the epoch.
    cls, options = PATHS[path]
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    loader = DataLoader(cls(), batch_size=4, num_workers=num_workers, **options)
    try:
        refs = []
        for _ in range(3):
            it = iter(loader)
            refs.append(weakref.ref(it))
            with pytest.raises(ValueError):
                for _batch in it:
                    pass
            del it
        deadline = time.monotonic() + 5
        while any(r() is not None for r in refs) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert all(r() is None for r in refs), "an epoch was kept until gc.collect()"
    finally:
        loader.close()
        if enabled:
            gc.enable()
        gc.collect()


class _FailsFirst:
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == 0:
            raise ValueError(i)
        return i


@pytest.mark.timeout(60)
def test_an_epoch_whose_next_raised_ends_its_worker_threads_without_gc():
    before = threading.active_count()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(50):
            loader = DataLoader(_FailsFirst(), batch_size=2, num_workers=2)
            try:
                for _batch in loader:
                    pass
            except ValueError:
                pass
            del loader
        deadline = time.monotonic() + 5
        while threading.active_count() > before + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before + 2, f"{threading.active_count() - before} threads still alive"
    finally:
        if enabled:
            gc.enable()
        gc.collect()
