"""Under ``on_error="skip"`` / ``"replace"``, an epoch with failing items is freed by reference
counting on every fetch path, as a failed batch is (``test_failed_batch_release.py``): the
items' exceptions, kept until the policy has recorded them, hold no cycle through the frames
that caught them."""

from __future__ import annotations

import gc
import threading
import time
import weakref

import pytest

from dataloader import DataLoader
from dataloader._engine.recover import substitute_index
from tests.engine._policy_data import N, AsyncGetitems, AsyncItems, Getitems, Items, arrays

BATCHES = [[0, 1, N + 1, 2], [N + 2, 3, 4, 5], [6, 7, 8, 9]]
PATHS = {
    "items": (Items, {}),
    "getitems": (Getitems, {}),
    "lanes": (Items, {"item_concurrency": 3}),
    "native": (arrays, {}),
    "async": (AsyncItems, {"item_concurrency": 2}),
    "async-getitems": (AsyncGetitems, {}),
    "transform": (Items, {"transform": lambda x: x if x != 30 else 1 // 0}),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["skip", "replace"])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("path", sorted(PATHS))
def test_an_epoch_with_failing_items_leaves_nothing_for_the_garbage_collector(path, num_workers, policy):
    make, options = PATHS[path]
    before = set(threading.enumerate())
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        refs = []
        for _ in range(2):
            ds = make()
            loader = DataLoader(ds, batch_sampler=BATCHES, num_workers=num_workers, on_error=policy, seed=1,
                                **options)
            it = iter(loader)
            assert len(list(it)) == 3 and loader.failures
            refs += [weakref.ref(loader), weakref.ref(it)]
            if not path.startswith("async"):  # a failed async item's lane keeps its dataset until gc (async_run)
                refs.append(weakref.ref(ds))
            del loader, it, ds
        deadline = time.monotonic() + 5
        own = lambda: [t for t in threading.enumerate() if t not in before and t.is_alive()]  # noqa: E731
        while (any(r() is not None for r in refs) or own()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not [type(r()).__name__ for r in refs if r() is not None]
    finally:
        if enabled:
            gc.enable()
        gc.collect()


class _FailingSubstitute(Items):
    """``Items`` whose item 0 and its first substitute (batch 0, place 0, attempt 0) fail."""

    def __init__(self, seed):
        self.bad = {0, substitute_index(seed, 0, 0, 0, 0, N)}

    def __getitem__(self, index):
        if index in self.bad:
            raise OSError(f"unreadable {index}")
        return super().__getitem__(index)


class _FailingAsyncSubstitute(AsyncItems):
    """``_FailingSubstitute``'s failures, from coroutines (several items of a batch fail, each
    batch settled, its substitutes fetched concurrently)."""

    def __init__(self, seed):
        self.bad = {0, 1, substitute_index(seed, 0, 0, 0, 0, N)}

    async def __getitem__(self, index):
        if index in self.bad:
            raise OSError(f"unreadable {index}")
        return await super().__getitem__(index)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", [_FailingSubstitute, _FailingAsyncSubstitute])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_failed_substitute_leaves_nothing_for_the_garbage_collector(num_workers, make):
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        ds = make(seed=1)
        loader = DataLoader(ds, batch_size=2, num_workers=num_workers, on_error="replace", seed=1,
                            item_concurrency=2)
        assert len(list(loader)) == N // 2
        assert [r.index for r in loader.failures][:2] == [0, substitute_index(1, 0, 0, 0, 0, N)]
        refs = [weakref.ref(loader)]
        if make is _FailingSubstitute:  # a failed async item's lane keeps its dataset until gc (async_run)
            refs.append(weakref.ref(ds))
        del loader, ds
        deadline = time.monotonic() + 5
        while any(r() is not None for r in refs) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not [type(r()).__name__ for r in refs if r() is not None]
    finally:
        if enabled:
            gc.enable()
        gc.collect()
