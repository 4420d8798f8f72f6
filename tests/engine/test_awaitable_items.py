"""A plain dataset that returns awaitables in place of items: each such item fails its batch
with a TypeError naming the index and the type, the coroutine is closed (never left to warn
"was never awaited"), and the epoch goes on, on every path of the Fetcher."""

from __future__ import annotations

import asyncio
import inspect
import threading
import types

import pytest

from dataloader import DataLoader, Dataset
from dataloader._native._awaitable import first_awaitable, is_awaitable

from tests._support import collect


async def _load(i):
    return i


class HasAwait:
    def __await__(self):
        yield


@types.coroutine
def _generator_coroutine():
    yield


class Mixed(Dataset):
    """Item i is i, except ``bad`` indices, whose plain ``__getitem__`` returns ``_load(i)``;
    ``fail`` indices raise KeyError.  Every coroutine made is kept, to check it was closed."""

    def __init__(self, n, bad=(), fail=()):
        self.n, self.bad, self.fail = n, frozenset(bad), frozenset(fail)
        self.lock = threading.Lock()
        self.made: list = []

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.fail:
            raise KeyError(i)
        if i in self.bad:
            coro = _load(i)
            with self.lock:
                self.made.append(coro)
            return coro
        return i


def all_closed(coros):
    return bool(coros) and all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in coros)


def test_the_native_check_finds_every_kind_of_awaitable_and_nothing_else():
    coro = _load(0)
    loop = asyncio.new_event_loop()
    try:
        awaitables = [coro, loop.create_future(), HasAwait(), _generator_coroutine()]
        assert all(is_awaitable(x) for x in awaitables)
        assert all(inspect.isawaitable(x) for x in awaitables)
        plain = [0, 1.5, b"x", "s", None, [coro], (i for i in range(1)), object(), HasAwait]
        assert not any(is_awaitable(x) for x in plain)
        assert first_awaitable(plain) == -1 and first_awaitable([]) == -1
        assert first_awaitable([1, 2, coro, loop.create_future()]) == 2
    finally:
        coro.close()
        loop.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("item_concurrency", [1, 3])
def test_a_coroutine_item_fails_its_batch_and_the_epoch_goes_on(num_workers, item_concurrency):
    ds = Mixed(12, bad={5})
    seen = []
    loader = DataLoader(ds, batch_size=4, num_workers=num_workers, item_concurrency=item_concurrency,
                        collate_fn=list, transform=lambda x: seen.append(x) or x)
    with loader:
        out = collect(loader)
    assert out[0] == ("batch", [0, 1, 2, 3]) and out[2] == ("batch", [8, 9, 10, 11])
    kind, (name, args) = out[1]
    assert (kind, name) == ("error", "TypeError")
    assert "Mixed.__getitem__(5) returned a coroutine" in args[0] and "AsyncDataset" in args[0]
    assert all_closed(ds.made)
    assert not any(inspect.iscoroutine(x) for x in seen)  # the transform never got it


@pytest.mark.timeout(60)
@pytest.mark.parametrize("item_concurrency", [1, 4])
def test_the_error_is_the_first_by_position_whether_awaitable_or_raised(item_concurrency):
    ds = Mixed(8, bad={1, 6}, fail={3, 4})
    with DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=item_concurrency, collate_fn=list) as loader:
        out = collect(loader)
    assert out[0][0] == "error" and out[0][1][0] == "TypeError" and "__getitem__(1)" in out[0][1][1][0]
    assert out[1][0] == "error" and out[1][1][0] == "KeyError"  # index 4 raises before 6 is reached
    assert all(inspect.getcoroutinestate(c) == inspect.CORO_CLOSED for c in ds.made)


@pytest.mark.timeout(60)
def test_a_future_or_any_object_with_await_is_refused_too():
    loop = asyncio.new_event_loop()
    try:
        future = loop.create_future()

        class Odd(Dataset):
            def __len__(self):
                return 3

            def __getitem__(self, i):
                return {0: 0, 1: future, 2: HasAwait()}[i]

        with DataLoader(Odd(), batch_size=None, collate_fn=lambda x: x) as loader:
            out = collect(loader)
        assert out[0] == ("batch", 0)
        assert out[1][0] == "error" and "Odd.__getitem__(1) returned a Future" in out[1][1][1][0]
        assert out[2][0] == "error" and "Odd.__getitem__(2) returned a HasAwait" in out[2][1][1][0]
    finally:
        loop.close()


@pytest.mark.timeout(60)
def test_batch_size_none_fails_that_item_only():
    ds = Mixed(5, bad={3})
    with DataLoader(ds, batch_size=None, num_workers=2, collate_fn=lambda x: x) as loader:
        out = collect(loader)
    assert [k for k, _ in out] == ["batch", "batch", "batch", "error", "batch"]
    assert out[3][1][0] == "TypeError" and "__getitem__(3) returned a coroutine" in out[3][1][1][0]
    assert all_closed(ds.made)


class Batched(Mixed):
    """``__getitems__`` is plain; with ``whole`` it returns ``_many(indices)``, a coroutine."""

    def __init__(self, n, bad=(), whole=False):
        super().__init__(n, bad)
        self.whole = whole

    def __getitems__(self, indices):
        if self.whole:
            coro = _many(indices)
            self.made.append(coro)
            return coro
        return [self[i] for i in indices]


async def _many(indices):
    return list(indices)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_getitems_returning_a_coroutine_fails_its_batch(num_workers):
    ds = Batched(8, whole=True)
    with DataLoader(ds, batch_size=4, num_workers=num_workers, collate_fn=list) as loader:
        out = collect(loader)
    assert [k for k, _ in out] == ["error", "error"]
    assert out[0][1][0] == "TypeError"
    assert "Batched.__getitems__([0, 1, 2, 3]) returned a coroutine, not an item" in out[0][1][1][0]
    assert all_closed(ds.made) and len(ds.made) == 2


@pytest.mark.timeout(60)
def test_getitems_with_coroutines_among_its_items_names_the_first_and_closes_them_all():
    ds = Batched(8, bad={5, 6})
    with DataLoader(ds, batch_size=4, collate_fn=list, transform=lambda x: x) as loader:
        out = collect(loader)
    assert out[0] == ("batch", [0, 1, 2, 3])
    assert out[1][0] == "error" and out[1][1][0] == "TypeError"
    assert "returned a coroutine as the item of index 5" in out[1][1][1][0]
    assert all_closed(ds.made) and len(ds.made) == 2


def test_getitems_columns_are_not_read_item_by_item_for_the_check():
    # A BatchedItems (NdfDataset, ArrayDataset) holds columns: the check must not build rows.
    class Columns:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __iter__(self):
            raise AssertionError("iterated item by item")

        def __getitem__(self, i):
            raise AssertionError("indexed item by item")

    class Columnar:
        def __len__(self):
            return 8

        def __getitem__(self, i):
            raise AssertionError("not used")

        def __getitems__(self, indices):
            return Columns(len(indices))

    loader = DataLoader(Columnar(), batch_size=4, collate_fn=lambda b: len(b))
    assert list(loader) == [4, 4]
