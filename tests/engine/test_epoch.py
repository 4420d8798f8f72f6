"""Epochs over map-style datasets: order, per-batch errors, window bound, cancellation."""

from __future__ import annotations

import gc
import threading
import time
import traceback
import weakref

import numpy as np
import pytest

from tests._support import RecordingDataset, collect
from dataloader.dataset import ArrayDataset, IterableDataset
from dataloader.loader import DataLoader

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("num_workers", [0, 1, 3])
def test_batches_come_in_epoch_order_whatever_finishes_first(num_workers):
    delays = {i: 0.02 for i in range(0, 40, 7)}  # some slow batches
    ds = RecordingDataset(40, delay_s=delays)
    out = [b[:, 0].tolist() for b in DataLoader(ds, batch_size=4, num_workers=num_workers)]
    assert out == [list(range(i, i + 4)) for i in range(0, 40, 4)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_error_belongs_to_its_batch_and_iteration_continues(num_workers):
    ds = RecordingDataset(12, fail={5})
    out = collect(DataLoader(ds, batch_size=4, num_workers=num_workers))
    assert [kind for kind, _ in out] == ["batch", "error", "batch"]
    assert out[1][1] == ("KeyError", (5,))
    assert out[2][1][:, 0].tolist() == [8, 9, 10, 11]


def test_worker_exception_keeps_original_type_and_traceback():
    ds = RecordingDataset(8, fail={6})
    it = iter(DataLoader(ds, batch_size=4, num_workers=2))
    next(it)
    with pytest.raises(KeyError) as info:
        next(it)
    frames = "".join(traceback.format_tb(info.value.__traceback__))
    assert "__getitem__" in frames  # the worker's frame is in the traceback
    it.close()


class BrokenSampler:
    def __init__(self, fail_at):
        self.fail_at = fail_at

    def __len__(self):
        return 6

    def __iter__(self):
        for i in range(6):
            if i == self.fail_at:
                raise RuntimeError(f"sampler broke at {i}")
            yield i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_sampler_error_raised_at_its_position_then_epoch_ends(num_workers):
    loader = DataLoader(RecordingDataset(6), batch_size=2, sampler=BrokenSampler(4), num_workers=num_workers)
    out = collect(loader)
    assert [k for k, _ in out] == ["batch", "batch", "error"]
    assert out[2][1] == ("RuntimeError", ("sampler broke at 4",))


class FailsToStart:
    def __len__(self):
        return 4

    def __iter__(self):
        raise OSError("cannot start")


@pytest.mark.parametrize("num_workers", [0, 2])
def test_failure_to_start_is_reported_once_by_first_next(num_workers):
    it = iter(DataLoader(RecordingDataset(4), sampler=FailsToStart(), num_workers=num_workers))
    with pytest.raises(OSError, match="cannot start"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize("in_order", [True, False])
def test_timeout_raises_timeout_error_naming_the_batch(in_order):
    ds = RecordingDataset(4, delay_s={0: 0.3, 1: 0.3})
    it = iter(DataLoader(ds, batch_size=2, num_workers=1, timeout=0.1, in_order=in_order))
    with pytest.raises(TimeoutError, match="timeout=0.1"):
        next(it)
    for _ in range(100):  # the batch still arrives afterwards; the iterator stays usable
        try:
            batch = next(it)
            break
        except TimeoutError:
            continue
    assert batch[:, 0].tolist() == [0, 1]
    it.close()


def test_in_order_false_yields_in_completion_order():
    ds = RecordingDataset(6, delay_s={0: 0.3})
    out = [b[:, 0].tolist() for b in DataLoader(ds, batch_size=2, num_workers=2, in_order=False)]
    assert sorted(out) == [[0, 1], [2, 3], [4, 5]]
    assert out[0] != [0, 1]  # the slow first batch did not hold the others back


class StallCounter(RecordingDataset):
    """Counts distinct batches started (by first index of each batch of 2)."""

    def __getitems__(self, indices):
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return [self[i] for i in indices]


@pytest.mark.parametrize("num_workers,depth", [(1, 1), (2, 2), (3, 1), (4, 4)])
def test_window_bounds_batches_in_flight_with_a_stalled_consumer(num_workers, depth):
    ds = StallCounter(200)
    it = iter(DataLoader(ds, batch_size=2, num_workers=num_workers, prefetch_depth=depth))
    time.sleep(0.3)  # the consumer stalls: workers fill the window and stop
    assert ds.in_flight == num_workers + depth
    for taken in range(1, 6):  # take a few, stalling after each: the bound still holds
        next(it)
        time.sleep(0.1)
        assert ds.in_flight <= num_workers + depth + taken
    it.close()


def test_prefetch_factor_sets_window_like_torch():
    ds = StallCounter(200)
    it = iter(DataLoader(ds, batch_size=2, num_workers=2, prefetch_factor=3))
    time.sleep(0.3)
    assert ds.in_flight == 6
    it.close()


def test_huge_epoch_starts_instantly_with_lazy_indices():
    class Huge:
        def __len__(self):
            return 10**9

        def __getitem__(self, i):
            return i

    t = time.perf_counter()
    loader = DataLoader(Huge(), batch_size=1000, num_workers=2)
    it = iter(loader)
    first = next(it)
    assert time.perf_counter() - t < 5
    assert first.shape == (1000,) and first[-1] == 999
    assert len(loader) == 10**6
    it.close()


@pytest.mark.thread_unsafe(reason="compares the whole process's threads before and after")
def test_a_thousand_early_breaks_leave_thread_count_unchanged():
    baseline = set(threading.enumerate())
    loader = DataLoader(RecordingDataset(64), batch_size=4, num_workers=2)
    for _ in loader:
        break
    mine = set(threading.enumerate()) - baseline  # this loader's threads (others may end meanwhile)
    assert len(mine) == 2
    for _ in range(1000):
        for _ in loader:
            break
    assert set(threading.enumerate()) - baseline == mine
    loader.close()
    assert not any(t.is_alive() for t in mine)


def test_close_stops_work_promptly_and_no_batch_starts_afterwards():
    ds = RecordingDataset(10_000, delay_s={i: 0.001 for i in range(10_000)})
    it = iter(DataLoader(ds, batch_size=4, num_workers=2))
    next(it)
    it.close()
    n = len(ds.calls)
    time.sleep(0.2)
    assert len(ds.calls) == n
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.thread_unsafe(reason="compares the whole process's threads before and after")
def test_dropping_iterator_and_loader_releases_dataset_and_threads():
    ds = RecordingDataset(1000, delay_s={i: 0.001 for i in range(1000)})
    ref = weakref.ref(ds)
    before = set(threading.enumerate())
    loader = DataLoader(ds, batch_size=4, num_workers=3, item_concurrency=2)
    it = iter(loader)
    next(it)
    del it, ds, loader
    gc.collect()
    assert ref() is None  # no thread keeps the dataset
    deadline = time.monotonic() + 5
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(threading.enumerate()) - before  # the loader's threads ended


def test_with_statement_closes_the_epoch():
    ds = RecordingDataset(400, delay_s={i: 0.001 for i in range(400)})
    loader = DataLoader(ds, batch_size=4, num_workers=2)
    with iter(loader) as it:
        next(it)
    n = len(ds.calls)
    time.sleep(0.1)
    assert len(ds.calls) == n
    loader.close()


@pytest.mark.thread_unsafe(reason="compares the whole process's threads before and after")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_epochs_are_independent_like_torch(num_workers):
    loader = DataLoader(ArrayDataset(np.arange(6)), batch_size=2, num_workers=num_workers)
    pairs = [(int(a[0][0]), int(b[0][0])) for a in loader for b in loader]
    assert pairs == [(i, j) for i in (0, 2, 4) for j in (0, 2, 4)]  # nested loops: the full product
    assert len(list(zip(loader, loader))) == 3
    before = set(threading.enumerate())
    first = iter(loader)
    next(first)
    second = iter(loader)  # the first is still open: the second runs on a pool of its own
    assert len(list(second)) == 3 and len(list(first)) == 2
    loader.close()
    deadline = time.monotonic() + 10
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not set(threading.enumerate()) - before  # the extra pool ended with its epoch


# -- edge cases: closing from other threads, nesting, StopIteration, thread limits ------------


class _CloseDuringSample:
    """A batch sampler that, while the consumer draws batch ``at``, has another thread close the epoch."""

    def __init__(self, n_batches: int, at: int) -> None:
        self.n_batches = n_batches
        self.at = at
        self.iterator = None

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self):
        for b in range(self.n_batches):
            if b == self.at:
                t = threading.Thread(target=self.iterator.close)
                t.start()
                t.join()
            yield [b]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_close_from_other_thread_during_next_ends_cleanly(num_workers: int) -> None:
    sampler = _CloseDuringSample(n_batches=8, at=4)
    dl = DataLoader(list(range(8)), batch_sampler=sampler, num_workers=num_workers, prefetch_depth=0)
    it = iter(dl)
    sampler.iterator = it
    got = []
    try:
        for batch in it:
            got.append(batch.tolist())
    finally:
        dl.close()
    # Any prefix of the epoch is fine (the epoch was cancelled); an exception is not.
    assert got == [[b] for b in range(len(got))]


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_close_from_other_thread_never_yields_none() -> None:
    anomalies: list[str] = []
    deadline = time.monotonic() + 20.0
    rng = np.random.default_rng(0)
    while not anomalies and time.monotonic() < deadline:
        dl = DataLoader(list(range(200)), batch_size=2, num_workers=int(rng.integers(1, 4)),
                        prefetch_depth=int(rng.integers(0, 3)))
        it = iter(dl)
        delay = float(rng.random()) * 0.002
        closer = threading.Thread(target=lambda: (time.sleep(delay), it.close()))
        closer.start()
        prev = -2
        try:
            for batch in it:
                if batch is None or batch.tolist()[0] != prev + 2:
                    anomalies.append(repr(batch))
                    break
                prev = batch.tolist()[0]
        except Exception as exc:  # noqa: BLE001
            anomalies.append(repr(exc))
        closer.join()
        dl.close()
    assert anomalies == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_nested_iteration_is_not_silently_short(num_workers: int) -> None:
    dl = DataLoader(list(range(6)), batch_size=2, num_workers=num_workers)
    pairs = [(a.tolist(), b.tolist()) for a in dl for b in dl]
    dl.close()
    assert len(pairs) == 9


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_stopiteration_in_getitem_is_not_a_short_epoch(num_workers: int) -> None:
    class DS:
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> int:
            if i == 1:
                raise StopIteration
            return i

    dl = DataLoader(DS(), batch_size=1, num_workers=num_workers)
    with pytest.raises(RuntimeError):
        list(dl)
    dl.close()


class Boom(BaseException):
    pass


class BaseExceptionSampler:
    """Yields 0..19 and raises ``Boom`` (a BaseException) in place of index ``at``."""

    def __init__(self, at):
        self.at = at

    def __len__(self):
        return 20

    def __iter__(self):
        for i in range(20):
            if i == self.at:
                raise Boom("from the sampler")
            yield i


def _drain_positions(loader):
    it = iter(loader)
    got, raised = [], []
    for _ in range(40):
        try:
            got.append(int(next(it)[0]))
        except StopIteration:
            break
        except Boom:
            raised.append(len(got))
    loader.close()
    return got, raised


# A BaseException (KeyboardInterrupt, SystemExit, a user subclass) from the sampler, with any
# num_workers, is as with num_workers=0: the batches before it in order, none lost, then the
# exception at its position, then the end of the epoch; in the first fill, next() raises it
# (iter() does not).
@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sampler_base_exception_loses_no_batch_and_is_raised_at_its_position(num_workers):
    sampler = BaseExceptionSampler(10)
    got, raised = _drain_positions(DataLoader(list(range(20)), batch_size=1, num_workers=num_workers, sampler=sampler))
    assert got == list(range(10))
    assert raised == [10]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sampler_base_exception_in_the_first_fill_is_raised_by_next_not_iter(num_workers):
    loader = DataLoader(list(range(20)), batch_size=1, num_workers=num_workers, sampler=BaseExceptionSampler(2))
    it = iter(loader)
    assert int(next(it)[0]) == 0
    assert int(next(it)[0]) == 1
    with pytest.raises(Boom):
        next(it)
    loader.close()


# An IterableDataset whose __iter__ raises StopIteration is a RuntimeError from next(), never an
# empty epoch (torch lets it escape iter(loader)).
@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_stopiteration_from_iter_dataset_is_a_runtime_error_not_an_empty_epoch(num_workers):
    class Bad(IterableDataset):
        def __iter__(self):
            raise StopIteration
    loader = DataLoader(Bad(), batch_size=2, num_workers=num_workers)
    with pytest.raises(RuntimeError):
        list(loader)
    loader.close()
