"""AsyncDataset: a batch is complete or it fails, and closing ends an epoch cleanly.

- An item coroutine that ends cancelled by anything but the loader fails its batch with
  ``ItemCancelledError`` (never a ``None`` item); so does an ``async def __getitems__``.
- ``close()`` of the epoch or the loader, from another thread, wakes a ``next()`` that waits
  for coroutines, cancels them and makes it raise ``StopIteration``, with any ``num_workers``.
- ``KeyboardInterrupt``/``SystemExit`` from a coroutine is that batch's error; the event loop
  runs on.
- Coroutines that ignore cancellation: ``DataLoader.close()`` keeps to one 5 s budget, then
  abandons the loop thread with a ``RuntimeWarning`` naming them; the thread ends by itself.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
import warnings

import numpy as np
import pytest

from dataloader import AsyncDataset, DataLoader, Dataset, ItemCancelledError
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S

from tests._support import collect, loop_threads


def wait_until(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.01)
    return predicate()


class SharedRequest(AsyncDataset):
    """Items 3 and 11 await one shared in-flight request, which another task cancels."""

    def __init__(self, n=16):
        self.n = n

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        if index in (3, 11):
            shared = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.01, shared.cancel)  # "another caller" gave up
            await shared
        await asyncio.sleep(0.001)
        return np.int64(index)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("num_workers", "item_concurrency"), [(0, 1), (0, 4), (2, 1), (2, 4)])
def test_an_item_cancelled_by_another_task_fails_its_batch(num_workers, item_concurrency):
    with DataLoader(SharedRequest(), batch_size=4, num_workers=num_workers, item_concurrency=item_concurrency,
                    collate_fn=list) as loader:
        got = collect(loader)
    assert [kind for kind, _ in got] == ["error", "batch", "error", "batch"]
    assert got[1][1] == [4, 5, 6, 7] and got[3][1] == [12, 13, 14, 15]
    with DataLoader(SharedRequest(), batch_size=4, num_workers=num_workers, item_concurrency=item_concurrency,
                    collate_fn=list) as loader:
        it = iter(loader)
        with pytest.raises(ItemCancelledError, match=r"SharedRequest.__getitem__\(3\)") as info:
            next(it)
        assert info.value.index == 3 and isinstance(info.value.__cause__, asyncio.CancelledError)
        assert isinstance(info.value, RuntimeError)  # what `except Exception` catches
        assert next(it) == [4, 5, 6, 7]


class CancelledBatch(AsyncDataset):
    def __len__(self):
        return 8

    async def __getitem__(self, index):
        return index

    async def __getitems__(self, indices):
        if 0 in indices:
            raise asyncio.CancelledError()  # as when awaiting something another task cancelled
        return list(indices)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_async_getitems_that_ends_cancelled_fails_its_batch(num_workers):
    with DataLoader(CancelledBatch(), batch_size=4, num_workers=num_workers, collate_fn=list) as loader:
        it = iter(loader)
        with pytest.raises(ItemCancelledError, match=r"__getitems__\(\[0, 1, 2, 3\]\)") as info:
            next(it)
        assert info.value.index == [0, 1, 2, 3]
        assert next(it) == [4, 5, 6, 7]


class NotASequence(CancelledBatch):
    async def __getitems__(self, indices):
        return None if 0 in indices else list(indices)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_async_getitems_that_returns_no_sequence_fails_its_batch(num_workers):
    with DataLoader(NotASequence(), batch_size=4, num_workers=num_workers, collate_fn=list) as loader:
        it = iter(loader)
        with pytest.raises(TypeError, match=r"__getitems__\(\[0, 1, 2, 3\]\) returned a NoneType, not a sequence"):
            next(it)
        assert next(it) == [4, 5, 6, 7]


class Counting(AsyncDataset):
    """Item i is i after ``delay_s``; items in ``hang`` sleep an hour.  Counts cancellations."""

    def __init__(self, n, delay_s=0.0005, hang=frozenset()):
        self.n, self.delay_s, self.hang = n, delay_s, frozenset(hang)
        self.lock = threading.Lock()
        self.in_flight = self.cancelled = 0

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        with self.lock:
            self.in_flight += 1
        try:
            await asyncio.sleep(3600 if index in self.hang else self.delay_s)
            return index
        except asyncio.CancelledError:
            with self.lock:
                self.cancelled += 1
            raise
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_closing_the_loader_from_another_thread_never_yields_an_incomplete_batch(num_workers):
    # One thread iterates epoch after epoch; another closes the loader again and again.
    loader = DataLoader(Counting(64), batch_size=4, num_workers=num_workers, item_concurrency=4, collate_fn=list)
    stop = time.monotonic() + 2.0
    batches, ends, errors = [], [], []

    def consume():
        while time.monotonic() < stop:
            it = iter(loader)
            while True:
                try:
                    batches.append(next(it))
                except StopIteration:
                    ends.append(1)
                    break
                except BaseException as exc:  # noqa: BLE001 - recorded, the assertion names it
                    errors.append(repr(exc))
                    break

    consumer = threading.Thread(target=consume)
    consumer.start()
    while consumer.is_alive():
        time.sleep(0.005)
        loader.close()
    consumer.join()
    loader.close()
    assert not errors, errors[:3]
    assert batches and ends
    assert all(len(b) == 4 and None not in b for b in batches), [b for b in batches if None in b][:3]
    assert wait_until(lambda: not loop_threads())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("closer", ["iterator", "loader"])
def test_close_from_another_thread_wakes_next_and_cancels_its_coroutines(num_workers, closer):
    ds = Counting(64, hang=range(4, 64))
    loader = DataLoader(ds, batch_size=4, num_workers=num_workers, item_concurrency=4, collate_fn=list)
    it = iter(loader)
    assert next(it) == [0, 1, 2, 3]
    # The next batch's requests hang (started by next() itself with num_workers=0).
    closing = threading.Timer(0.3, it.close if closer == "iterator" else loader.close)
    closing.start()
    t0 = time.monotonic()
    with pytest.raises(StopIteration):
        next(it)
    assert time.monotonic() - t0 < SHUTDOWN_JOIN_TIMEOUT_S  # woken by close(), not by an item
    assert wait_until(lambda: ds.in_flight == 0)  # the requests were cancelled, not completed
    assert ds.cancelled >= 4
    with pytest.raises(StopIteration):
        next(it)
    closing.join()
    loader.close()
    assert not loop_threads()


class ClosesFromAnItem(AsyncDataset):
    """Item 9's coroutine closes the epoch (or the loader) it is fetched for, on the event loop
    thread, and records how long that ``close()`` took."""

    def __init__(self):
        self.target = None
        self.took = None

    def __len__(self):
        return 64

    async def __getitem__(self, index):
        if index == 9 and self.took is None:
            t0 = time.monotonic()
            self.target.close()
            self.took = time.monotonic() - t0
        await asyncio.sleep(0)
        return index


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2, "auto"])
@pytest.mark.parametrize("closer", ["iterator", "loader"])
def test_close_from_an_item_coroutine_returns_at_once_and_ends_the_epoch(num_workers, closer):
    # The workers wait for the event loop thread: close() called on it must not wait for them
    # (the loop, and every request on it, would stall for the 5 s budget, and the workers be
    # abandoned as stuck), as close() from a worker thread does not.
    ds = ClosesFromAnItem()
    loader = DataLoader(ds, batch_size=4, num_workers=num_workers, collate_fn=list)
    it = iter(loader)
    ds.target = it if closer == "iterator" else loader
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no worker abandoned as stuck
        t0 = time.monotonic()
        batches = list(it)
        assert time.monotonic() - t0 < 2.0
        assert wait_until(lambda: ds.took is not None)
        assert ds.took < 1.0
        assert all(b == list(range(4 * k, 4 * k + 4)) for k, b in enumerate(batches)) and len(batches) <= 2
        assert [x for b in loader for x in b] == list(range(64))  # the next epoch runs in full
        loader.close()
    assert not loop_threads()


class Exits(AsyncDataset):
    """Item 9 raises ``exc``; items before it take longer, so they are in flight meanwhile."""

    def __init__(self, exc):
        self.exc = exc

    def __len__(self):
        return 16

    async def __getitem__(self, index):
        await asyncio.sleep(0.01 if index < 8 else 0.001)
        if index == 9:
            raise self.exc
        return index


class PlainExits(Dataset):
    def __init__(self, exc):
        self.exc = exc

    def __len__(self):
        return 16

    def __getitem__(self, index):
        if index == 9:
            raise self.exc
        return index


def _outcomes(loader):
    out = []
    it = iter(loader)
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            return out
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt/SystemExit are the subject
            out.append(type(exc).__name__)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["SystemExit", "KeyboardInterrupt"])
def test_a_coroutine_raising_system_exit_is_raised_at_its_batch_and_the_loop_runs_on(num_workers, exc):
    # As for a plain Dataset: raised at its batch's position, not counted, and the epoch ends
    # (an interrupt is never a batch's own error: errors.INTERRUPTS), so state_dict() resumes there.
    with DataLoader(PlainExits(exc), batch_size=4, num_workers=num_workers, collate_fn=list) as plain:
        expected = _outcomes(plain)
        assert plain.state_dict()["yielded"] == 2
    assert expected == [[0, 1, 2, 3], [4, 5, 6, 7], type(exc).__name__]
    with DataLoader(Exits(exc), batch_size=4, num_workers=num_workers, item_concurrency=4, collate_fn=list) as ld:
        assert _outcomes(ld) == expected
        assert ld.state_dict()["yielded"] == 2
        assert len(loop_threads()) == 1 and _outcomes(ld) == expected  # the same loop, still running


# -- coroutines that ignore cancellation ------------------------------------------------


async def _ignore_cancellation(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            pass


class Stubborn(AsyncDataset):
    """Items from 4 on, or ``aclose()``, ignore cancellation for ``seconds``."""

    def __init__(self, items=False, aclose=False, seconds=30.0):
        self.items, self.stubborn_aclose, self.seconds = items, aclose, seconds

    def __len__(self):
        return 8

    async def __getitem__(self, index):
        if self.items and index >= 4:
            await _ignore_cancellation(self.seconds)
        return index

    async def aclose(self):
        if self.stubborn_aclose:
            await _ignore_cancellation(self.seconds)


def _destroyed_pending(caplog):
    gc.collect()  # an abandoned task is freed here
    return [r for r in caplog.records if "Task was destroyed but it is pending" in r.getMessage()]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_close_abandons_items_that_ignore_cancellation_after_one_budget(num_workers, caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    loader = DataLoader(Stubborn(items=True), batch_size=4, num_workers=num_workers, collate_fn=list)
    it = iter(loader)
    assert next(it) == [0, 1, 2, 3]
    if num_workers == 0:  # a next() stuck in the stubborn batch, on another thread
        threading.Thread(target=lambda: pytest.raises(StopIteration, next, it), daemon=True).start()
    time.sleep(0.2)
    t0 = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"Stubborn.__getitem__\(4\).*(dropped|abandoned)"):
        loader.close()
    took = time.monotonic() - t0
    assert took < SHUTDOWN_JOIN_TIMEOUT_S + 2.0, took  # one budget, not two in a row (10 s)
    assert wait_until(lambda: not loop_threads(), 5.0)  # abandoned: it ends, it is not kept
    assert not _destroyed_pending(caplog)


@pytest.mark.timeout(60)
def test_close_abandons_an_aclose_that_ignores_cancellation_after_one_budget(caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    loader = DataLoader(Stubborn(aclose=True), batch_size=4, collate_fn=list)
    assert list(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    t0 = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"Stubborn.aclose\(\)"):
        loader.close()
    took = time.monotonic() - t0
    assert took < SHUTDOWN_JOIN_TIMEOUT_S + 2.0, took  # was 11 s
    assert wait_until(lambda: not loop_threads(), 5.0)
    assert not _destroyed_pending(caplog)


@pytest.mark.timeout(60)
def test_a_collected_loader_whose_aclose_ignores_cancellation_lets_its_thread_end(caplog):
    caplog.set_level(logging.ERROR, logger="asyncio")
    loader = DataLoader(Stubborn(aclose=True), batch_size=4, collate_fn=list)
    assert len(list(loader)) == 2 and len(loop_threads()) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del loader
        gc.collect()
        # The loop thread warns by itself (nobody waits for it), within the budget.
        assert wait_until(lambda: not loop_threads(), SHUTDOWN_JOIN_TIMEOUT_S + 5.0)
    assert any(issubclass(w.category, RuntimeWarning) and "Stubborn.aclose()" in str(w.message) for w in caught)
    assert not _destroyed_pending(caplog)
