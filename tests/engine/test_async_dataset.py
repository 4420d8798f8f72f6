"""AsyncDataset on the one engine: bound on coroutines in flight, transforms on workers,
order, per-batch errors, cancellation, aclose and the loader's event loop thread."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import AsyncDataset, DataLoader, Dataset
from dataloader._engine.async_loop import ASYNC_THREAD_NAME

from tests._support import batches_as_lists, collect, loop_threads


class Sleepy(AsyncDataset):
    """Item i is i after a short sleep; ``fail`` raises KeyError(i); records what runs."""

    def __init__(self, n, fail=frozenset(), delay_s=0.002, hang=frozenset()):
        self.n, self.fail, self.delay_s, self.hang = n, frozenset(fail), delay_s, frozenset(hang)
        self.lock = threading.Lock()
        self.in_flight = self.peak = self.cancelled = self.started = 0
        self.threads: set[str] = set()
        self.aclosed = 0

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        with self.lock:
            self.started += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.threads.add(threading.current_thread().name)
        try:
            await asyncio.sleep(3600 if index in self.hang else self.delay_s * (1 + index % 3))
            if index in self.fail:
                raise KeyError(index)
            return np.int64(index)
        except asyncio.CancelledError:
            with self.lock:
                self.cancelled += 1
            raise
        finally:
            with self.lock:
                self.in_flight -= 1

    async def aclose(self):
        with self.lock:  # one aclose() per event loop, and the loops run in parallel on 3.13t
            self.aclosed += 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("num_workers", "item_concurrency"), [(0, 1), (0, 4), (2, 3), (3, 8)])
def test_batches_in_order_with_at_most_workers_times_concurrency_in_flight(num_workers, item_concurrency):
    ds = Sleepy(96)
    with DataLoader(ds, batch_size=8, num_workers=num_workers, item_concurrency=item_concurrency) as loader:
        batches = [b.tolist() for b in loader]
    assert batches == [list(range(i, i + 8)) for i in range(0, 96, 8)]
    assert 1 <= ds.peak <= max(num_workers, 1) * item_concurrency
    assert ds.threads == {ASYNC_THREAD_NAME}
    assert ds.aclosed == 1 and not loop_threads()


@pytest.mark.timeout(60)
def test_transform_and_collate_run_on_worker_threads_as_items_arrive():
    where = []
    ds = Sleepy(16)

    def transform(item):
        where.append(threading.current_thread().name)
        return item * 10

    def collate(items):
        where.append(("collate", threading.current_thread().name))
        return [int(x) for x in items]

    with DataLoader(ds, batch_size=4, num_workers=2, item_concurrency=4, transform=transform, collate_fn=collate) as ld:
        assert [x for b in ld for x in b] == [10 * i for i in range(16)]
    names = {w if isinstance(w, str) else w[1] for w in where}
    assert names and all(n.startswith("dataloader-worker") for n in names)


@pytest.mark.timeout(60)
def test_an_error_belongs_to_its_batch_and_is_the_first_by_position():
    ds = Sleepy(24, fail={5, 6, 17})
    with DataLoader(Sleepy(24, fail={5, 6, 17}), batch_size=4, collate_fn=list) as sequential:
        expected = collect(sequential)
    with DataLoader(ds, batch_size=4, num_workers=3, item_concurrency=4, collate_fn=list) as loader:
        got = collect(loader)
    assert got == expected
    assert [kind for kind, _ in got] == ["batch", "error", "batch", "batch", "error", "batch"]
    assert got[1][1] == ("KeyError", (5,)) and got[4][1] == ("KeyError", (17,))


@pytest.mark.timeout(60)
def test_a_failing_transform_fails_its_batch_like_the_sequential_loader():
    def transform(x):
        if int(x) in (3, 9):
            raise ValueError(int(x))
        return x

    def run(nw, k):
        with DataLoader(Sleepy(12), batch_size=4, num_workers=nw, item_concurrency=k, transform=transform,
                        collate_fn=list) as loader:
            return collect(loader)

    assert run(2, 4) == run(0, 1)
    assert [k for k, _ in run(2, 4)] == ["error", "batch", "error"]


@pytest.mark.timeout(30)
def test_breaking_early_cancels_coroutines_in_flight_and_leaves_no_thread():
    ds = Sleepy(10_000, hang=set(range(8, 10_000)))
    before = threading.active_count()
    with DataLoader(ds, batch_size=4, num_workers=2, item_concurrency=50) as loader:
        for i, _ in enumerate(loader):
            if i == 1:
                deadline = time.monotonic() + 5
                while ds.in_flight < 8 and time.monotonic() < deadline:  # batches 2 and 3 hang
                    time.sleep(0.01)
                break
        deadline = time.monotonic() + 5
        while ds.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ds.in_flight == 0 and ds.cancelled == 8
        started = ds.started
        time.sleep(0.2)
        assert ds.started == started  # nothing starts after the epoch closed
    assert ds.aclosed == 1 and not loop_threads()
    assert threading.active_count() <= before


@pytest.mark.timeout(30)
def test_dropping_an_epoch_cancels_its_coroutines():
    ds = Sleepy(400, hang=set(range(4, 400)))
    loader = DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=8)
    it = iter(loader)
    next(it)
    deadline = time.monotonic() + 5
    while ds.in_flight < 4 and time.monotonic() < deadline:  # batch 1 hangs
        time.sleep(0.01)
    del it
    deadline = time.monotonic() + 5
    while ds.in_flight and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ds.in_flight == 0 and ds.cancelled >= 4
    loader.close()


@pytest.mark.timeout(30)
def test_loader_timeout_applies_on_the_async_path():
    from dataloader._engine.errors import LoaderTimeoutError

    ds = Sleepy(8, hang={2})
    with DataLoader(ds, batch_size=2, num_workers=1, item_concurrency=2, timeout=0.2) as loader:
        it = iter(loader)
        next(it)
        with pytest.raises(LoaderTimeoutError):
            next(it)
    assert ds.in_flight == 0


@pytest.mark.timeout(30)
def test_close_awaits_aclose_and_stops_the_loop_and_a_later_epoch_starts_a_new_one():
    ds = Sleepy(8)
    loader = DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=2)
    assert not loop_threads()  # started by the first epoch
    assert len(list(loader)) == 2
    assert len(loop_threads()) == 1
    assert len(list(loader)) == 2
    assert len(loop_threads()) == 1  # one loop per loader, kept between epochs
    loader.close()
    assert ds.aclosed == 1 and not loop_threads()
    assert len(list(loader)) == 2
    loader.close()
    assert ds.aclosed == 2 and not loop_threads()


@pytest.mark.timeout(30)
def test_async_getitems_is_one_coroutine_per_batch_with_item_concurrency_one():
    class Batched(Sleepy):
        calls = 0

        async def __getitems__(self, indices):
            Batched.calls += 1
            return [np.int64(i) for i in indices]

    with DataLoader(Batched(10), batch_size=4, num_workers=2) as loader:
        assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert Batched.calls == 3

    class Short(Sleepy):
        async def __getitems__(self, indices):
            return [1]

    with DataLoader(Short(4), batch_size=4) as loader, pytest.raises(ValueError, match="returned 1 items for 4"):
        next(iter(loader))


def test_batch_size_none_yields_single_items():
    with DataLoader(Sleepy(3), batch_size=None, num_workers=1) as loader:
        assert [int(x) for x in loader] == [0, 1, 2]


@pytest.mark.timeout(30)
def test_a_dropped_loader_awaits_aclose_and_stops_its_event_loop_thread():
    import gc

    ds = Sleepy(4)
    loader = DataLoader(ds, batch_size=2, num_workers=1)
    assert len(list(loader)) == 2 and len(loop_threads()) == 1
    del loader
    gc.collect()
    deadline = time.monotonic() + 5
    while loop_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not loop_threads() and ds.aclosed == 1  # aclose() awaited by the loop itself


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_epoch_of_a_loader_nobody_keeps_runs_to_its_end_then_its_event_loop_stops(num_workers):
    import gc

    # The for statement keeps only the iterator: the loader itself is garbage at once.
    assert [b.tolist() for b in DataLoader(Sleepy(5), batch_size=2, num_workers=num_workers)] == [
        [0, 1], [2, 3], [4]]
    ds = Sleepy(6)
    it = iter(DataLoader(ds, batch_size=3, num_workers=num_workers))
    gc.collect()
    assert [b.tolist() for b in it] == [[0, 1, 2], [3, 4, 5]]
    del it
    gc.collect()
    deadline = time.monotonic() + 5
    while loop_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not loop_threads() and ds.aclosed == 1


def test_the_dataset_kind_is_checked_when_the_loader_is_built():
    class AsyncOnPlain(Dataset):
        def __len__(self):
            return 1

        async def __getitem__(self, i):
            return i

    class PlainOnAsync(AsyncDataset):
        def __len__(self):
            return 1

        def __getitem__(self, i):
            return i

    class Both(Dataset, AsyncDataset):
        def __len__(self):
            return 1

        async def __getitem__(self, i):
            return i

    class NoLen(AsyncDataset):
        async def __getitem__(self, i):
            return i

    class PlainGetitems(Sleepy):
        def __getitems__(self, indices):
            return indices

    for bad, match in ((AsyncOnPlain(), "is not an AsyncDataset"), (PlainOnAsync(), "must be async def"),
                       (Both(), "both Dataset and AsyncDataset"), (NoLen(), "must define __len__"),
                       (PlainGetitems(2), r"__getitems__ must be async def")):
        with pytest.raises(TypeError, match=match):
            DataLoader(bad)


@pytest.mark.timeout(30)
def test_a_getitem_that_raises_or_returns_no_coroutine_fails_its_batch():
    class Eager(Sleepy):
        async def __getitem__(self, index):
            return index

    loader = DataLoader(Eager(4), batch_size=2, num_workers=1, collate_fn=list)

    def raising(self, index):
        raise LookupError(index)

    Eager.__getitem__ = raising  # after the build check: a plain method, raising at once
    with loader:
        assert collect(loader) == [("error", ("LookupError", (0,))), ("error", ("LookupError", (2,)))]
    Eager.__getitem__ = lambda self, index: index  # returns no awaitable
    with loader:
        assert [kind for kind, _ in collect(loader)] == ["error", "error"]


# -- property: every configuration is the sequential loader ----------------------------


class _Items(AsyncDataset):
    """Item i is [i, 2i] after a delay drawn from i; ``fail`` raises KeyError(i)."""

    def __init__(self, n, fail):
        self.n, self.fail = n, frozenset(fail)

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        await asyncio.sleep(0.0005 * (index * 7 % 4))
        if index in self.fail:
            raise KeyError(index)
        return np.array([index, 2 * index], dtype=np.int64)


@pytest.mark.timeout(300)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 40),
    batch_size=st.integers(1, 7),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    fail=st.sets(st.integers(0, 39), max_size=4),
    bad_transform=st.sets(st.integers(0, 39), max_size=2),
    num_workers=st.integers(0, 4),
    prefetch_depth=st.integers(1, 4),
    item_concurrency=st.integers(1, 16),
    seed=st.integers(0, 2**32),
)
def test_any_configuration_gives_the_sequential_batches_and_error_positions(
    n, batch_size, drop_last, shuffle, fail, bad_transform, num_workers, prefetch_depth, item_concurrency, seed
):
    shuffle = shuffle and n > 0

    def transform(item):
        if int(item[0]) in bad_transform:
            raise ValueError(int(item[0]))
        return item

    def run(**kw):
        with DataLoader(_Items(n, fail), batch_size=batch_size, drop_last=drop_last, shuffle=shuffle, seed=seed,
                        transform=transform, **kw) as loader:
            return batches_as_lists(collect(loader))

    expected = run()
    got = run(num_workers=num_workers, prefetch_depth=prefetch_depth, item_concurrency=item_concurrency)
    assert got == expected
