"""Item lanes (``item_concurrency``): the items of one batch fetched by several threads.

The output must be the sequential loader's, batch for batch and error for error:
when several items of a batch fail, the batch fails with the first one by
position, whichever failed first in time.  Concurrency is asserted with
barriers (deterministic), never with timings.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tests._support import RecordingDataset, collect
from dataloader import DataLoader
from dataloader._engine.lanes import LanePool, fetch_with_lanes

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10  # bound on every Barrier/Event wait: a broken loader fails, never hangs


def comparable(out):
    return [(kind, value.tolist() if kind == "batch" else value) for kind, value in out]


def failing_transform(item):
    if int(item[0]) in (6, 17):
        raise ValueError(f"transform {int(item[0])}")
    return item * 10


# -- same output as the sequential loader -----------------------------------------------------


@pytest.mark.parametrize("item_concurrency", [1, 2, 3, 4])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size", [3, 5])
@pytest.mark.parametrize("transform", [None, failing_transform], ids=["plain", "transform"])
def test_batches_and_errors_are_the_sequential_loaders(
    item_concurrency, num_workers, batch_size, transform
):
    fail = {2, 3, 11, 22}  # several failures in one batch, and failures in several batches
    ref = comparable(
        collect(
            DataLoader(RecordingDataset(23, fail=fail), batch_size=batch_size, transform=transform)
        )
    )
    assert any(kind == "error" for kind, _ in ref)
    loader = DataLoader(
        RecordingDataset(23, fail=fail),
        batch_size=batch_size,
        transform=transform,
        num_workers=num_workers,
        item_concurrency=item_concurrency,
    )
    for _ in range(2):
        assert comparable(collect(loader)) == ref
    loader.close()


class FirstErrorDataset:
    """Item 1 fails, but only after item 3 (later in the batch) has failed."""

    def __init__(self, n):
        self.n = n
        self.later_failed = threading.Event()
        self.failures = []

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index == 1:
            if not self.later_failed.wait(WAIT_S):
                raise RuntimeError("item 3 was never fetched while item 1 was in flight")
            self.failures.append(1)
            raise KeyError(1)
        if index == 3:
            self.failures.append(3)
            self.later_failed.set()
            raise KeyError(3)
        return index


@pytest.mark.parametrize("item_concurrency", [2, 3, 4])
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_the_first_error_by_position_wins_even_when_a_later_item_fails_first(
    item_concurrency, num_workers
):
    ds = FirstErrorDataset(8)
    loader = DataLoader(
        ds, batch_size=4, num_workers=num_workers, item_concurrency=item_concurrency
    )
    out = collect(loader)
    assert ds.failures == [3, 1]  # item 3 failed first in time
    assert out[0] == ("error", ("KeyError", (1,)))  # what the sequential loader raises
    assert out[1][0] == "batch" and out[1][1].tolist() == [4, 5, 6, 7]
    assert len(out) == 2
    loader.close()


# -- lanes really overlap ------------------------------------------------------------------


class MeetDataset:
    """Every item waits until ``parties`` items are in ``__getitem__`` at once."""

    def __init__(self, n, parties):
        self.n = n
        self.barrier = threading.Barrier(parties, timeout=WAIT_S)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.threads = set()

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.threads.add(threading.current_thread().name)
        try:
            self.barrier.wait()
        finally:
            with self.lock:
                self.in_flight -= 1
        return index


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("num_workers", [0, 1])
def test_all_items_of_a_batch_are_in_flight_together(k, num_workers):
    ds = MeetDataset(3 * k, parties=k)  # one batch at a time: only its own items can meet
    loader = DataLoader(ds, batch_size=k, num_workers=num_workers, item_concurrency=k)
    assert [b.tolist() for b in loader] == [list(range(i, i + k)) for i in range(0, 3 * k, k)]
    assert ds.max_in_flight == k  # never more lanes than item_concurrency
    assert any(name.startswith("dataloader-lane-") for name in ds.threads)
    loader.close()


def test_lanes_do_not_use_getitems():
    """With ``item_concurrency > 1`` items are fetched one by one (documented)."""

    class Batched(MeetDataset):
        def __getitems__(self, indices):
            raise AssertionError("__getitems__ used with item lanes")

    loader = DataLoader(Batched(4, parties=2), batch_size=2, item_concurrency=2)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    loader.close()


# -- fetch_with_lanes directly -------------------------------------------------------------


@pytest.fixture
def lanes():
    pool = LanePool(3)
    yield pool
    pool.shutdown()


@pytest.mark.parametrize("k", [1, 2, 4, 10])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_fetch_with_lanes_returns_items_in_position_order(lanes, k, n):
    assert fetch_with_lanes(lanes, lambda i: i * i, list(range(n)), k) == [i * i for i in range(n)]


def test_fetch_with_lanes_carries_any_exception_type(lanes):
    class Custom(BaseException):
        pass

    def fetch(i):
        if i == 2:
            raise Custom("two")
        return i

    with pytest.raises(Custom, match="two"):
        fetch_with_lanes(lanes, fetch, list(range(5)), 3)
    assert fetch_with_lanes(lanes, fetch, [0, 1], 3) == [0, 1]  # the lanes are still usable


def test_lane_pool_threads_are_named_and_stop_on_shutdown():
    pool = LanePool(2)
    assert [t.name for t in pool.threads] == ["dataloader-lane-0", "dataloader-lane-1"]
    assert all(t.daemon for t in pool.threads)
    pool.shutdown()
    for t in pool.threads:  # shutdown asks them to exit; they do once idle
        t.join(WAIT_S)
    assert not any(t.is_alive() for t in pool.threads)


def test_item_lanes_give_numpy_batches_like_the_plain_path():
    ds = RecordingDataset(10)
    with DataLoader(ds, batch_size=4, item_concurrency=3) as loader:
        a = list(loader)
    b = list(DataLoader(ds, batch_size=4))
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype == np.int64
        np.testing.assert_array_equal(x, y)


# -- edge cases: closing from other threads, nesting, StopIteration, thread limits ------------


@pytest.mark.thread_unsafe(reason="counts the threads the whole process starts")
@pytest.mark.timeout(60)
def test_item_concurrency_does_not_start_useless_threads() -> None:
    before = threading.active_count()
    dl = DataLoader(list(range(8)), batch_size=2, num_workers=2, item_concurrency=100)
    try:
        out = [b.tolist() for b in dl]
        started = threading.active_count() - before
    finally:
        dl.close()
    assert out == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # 2 workers + at most 1 helper lane per worker are ever useful with batch_size=2.
    assert started <= 4, f"{started} threads for batch_size=2, num_workers=2"
