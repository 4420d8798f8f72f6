"""How an epoch with workers starts, ends and lets go: fork, several threads, close budgets,
Ctrl-C, garbage collection and interpreter shutdown (issue 14's engine contracts).

Every wait here is bounded: a broken engine fails a test, never hangs it.
"""

from __future__ import annotations

import _thread
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import weakref

import numpy as np
import pytest

import dataloader._engine.engine as engine_module
import dataloader._engine.epoch as epoch_module
import dataloader._engine.handout as handout_module
from tests._fork import fork_and_wait
from tests._support import RangeStream, RecordingDataset
from dataloader import DataLoader, Dataset, IterableDataset

pytestmark = pytest.mark.timeout(120)

WAIT_S = 10
needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


class Gate:
    """A map-style dataset whose item ``stuck`` blocks (once) until ``release`` is set."""

    def __init__(self, n: int, stuck: int) -> None:
        self.n = n
        self.stuck = stuck
        self.started = threading.Event()
        self.release = threading.Event()
        self.blocked_once = False

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        if index == self.stuck and not self.blocked_once:
            self.blocked_once = True
            self.started.set()
            self.release.wait(WAIT_S * 3)
        return index


@pytest.fixture
def short_budget(monkeypatch):
    """Make close()'s budget 0.5 s (the default, 5 s, would only make these tests slow)."""
    monkeypatch.setattr(epoch_module, "SHUTDOWN_JOIN_TIMEOUT_S", 0.5)
    monkeypatch.setattr(engine_module, "SHUTDOWN_JOIN_TIMEOUT_S", 0.5)  # Engine.close's budget
    monkeypatch.setattr(handout_module, "SHUTDOWN_JOIN_TIMEOUT_S", 0.5)
    return 0.5


def _fork_and_wait(child) -> int:
    """Run ``child()`` in a forked child (its exit status is its return value); bounded wait."""
    return fork_and_wait(child, WAIT_S * 3)


# -- fork ------------------------------------------------------------------------------------


@needs_fork
@pytest.mark.parametrize("iterable", [False, True])
def test_a_loader_iterated_before_fork_works_in_the_child(iterable):
    loader = DataLoader(RangeStream(8) if iterable else list(range(8)), batch_size=2, num_workers=2)
    expected = [b.tolist() for b in loader]

    def child():
        got = [b.tolist() for b in loader]  # new threads in the child
        got2 = [b.tolist() for b in loader]
        loader.close()
        return 0 if got == expected == got2 else 3

    assert _fork_and_wait(child) == 0
    assert [b.tolist() for b in loader] == expected  # the parent's pool is untouched
    loader.close()


@needs_fork
def test_an_iterator_started_before_fork_raises_in_the_child_and_close_returns_at_once():
    loader = DataLoader(list(range(40)), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1]

    def child():
        try:
            next(it)
        except RuntimeError as exc:
            if "fork" not in str(exc):
                return 4
        else:
            return 5
        t0 = time.monotonic()
        it.close()
        if time.monotonic() - t0 > 1.0:
            return 6
        return 0 if [b.tolist() for b in loader][:1] == [[0, 1]] else 7

    assert _fork_and_wait(child) == 0
    assert next(it).tolist() == [2, 3]  # the parent's epoch goes on
    it.close()
    loader.close()


def _sum_in_process(loader, queue):
    queue.put(sum(int(b.sum()) for b in loader))


@needs_fork
def test_a_multiprocessing_fork_process_uses_the_parents_loader():
    import multiprocessing

    loader = DataLoader(list(range(10)), batch_size=3, num_workers=2)
    assert sum(int(b.sum()) for b in loader) == 45
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        proc = ctx.Process(target=_sum_in_process, args=(loader, queue))
        proc.start()
    try:
        assert queue.get(timeout=WAIT_S * 3) == 45
    finally:
        proc.join(WAIT_S)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    loader.close()


# -- several threads, one loader -------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_threads_iterating_one_loader_each_get_a_complete_epoch_in_that_epochs_order(num_workers):
    threads, epochs_each = 4, 200
    loader = DataLoader(list(range(12)), batch_size=4, shuffle=True, seed=5, num_workers=num_workers)
    reference = DataLoader(list(range(12)), batch_size=4, shuffle=True, seed=5)
    expected = sorted(tuple(int(i) for b in reference for i in b) for _ in range(threads * epochs_each))
    orders: list[tuple[int, ...]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run():
        try:
            for _ in range(epochs_each):
                order = tuple(int(i) for b in loader for i in b)
                with lock:
                    orders.append(order)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        workers = [threading.Thread(target=run) for _ in range(threads)]
        for t in workers:
            t.start()
        for t in workers:
            t.join(240)
    finally:
        sys.setswitchinterval(old)
    assert not any(t.is_alive() for t in workers), "an epoch hung"
    assert errors == []
    assert all(sorted(o) == list(range(12)) for o in orders)  # every epoch complete
    assert sorted(orders) == expected  # epoch e's order, once for each e
    loader.close()


def test_next_from_two_threads_at_once_raises_a_clear_runtime_error():
    ds = Gate(8, stuck=0)
    loader = DataLoader(ds, batch_size=1, num_workers=2)
    it = iter(loader)
    box: list = []
    first = threading.Thread(target=lambda: box.append(next(it)))
    first.start()
    assert ds.started.wait(WAIT_S)
    time.sleep(0.05)  # the first thread is inside next(), waiting for batch 0
    with pytest.raises(RuntimeError, match="two threads"):
        next(it)
    ds.release.set()
    first.join(WAIT_S)
    assert [b.tolist() for b in box] == [[0]]
    assert [b.tolist() for b in it] == [[i] for i in range(1, 8)]  # nothing lost
    loader.close()


def test_sequential_next_from_two_threads_at_once_raises_a_clear_runtime_error():
    ds = Gate(4, stuck=1)
    it = iter(DataLoader(ds, batch_size=1))
    next(it)
    first = threading.Thread(target=lambda: next(it))
    first.start()
    assert ds.started.wait(WAIT_S)
    with pytest.raises(RuntimeError, match="two threads"):
        next(it)
    ds.release.set()
    first.join(WAIT_S)
    assert [b.tolist() for b in it] == [[2], [3]]


# -- close: budgets, Ctrl-C, from a worker ---------------------------------------------------


def test_a_pool_whose_worker_did_not_come_back_is_never_reused(short_budget):
    ds = Gate(6, stuck=1)
    loader = DataLoader(ds, batch_size=1, num_workers=2, prefetch_depth=0, timeout=WAIT_S)
    it = iter(loader)
    assert next(it).tolist() == [0]
    assert ds.started.wait(WAIT_S)
    it.close()  # gives up on batch 1 after the budget
    old = {t for t in threading.enumerate() if t.name.startswith("dataloader-worker")}
    with pytest.warns(RuntimeWarning, match=r"2 DataLoader worker thread\(s\) .*are abandoned \(2 by this loader"):
        got = [b.tolist() for b in loader]  # fresh threads: never waits on the stuck one
    assert got == [[i] for i in range(6)]
    ds.release.set()
    new = {t for t in threading.enumerate() if t.name.startswith("dataloader-worker")} - old
    assert len(new) == 2
    loader.close()


@pytest.mark.parametrize("timeout_s", [0.0, 0.3])
def test_close_waits_at_most_its_timeout_for_a_stuck_batch(timeout_s):
    ds = Gate(6, stuck=1)
    loader = DataLoader(ds, batch_size=1, num_workers=2, prefetch_depth=0)
    it = iter(loader)
    assert next(it).tolist() == [0]
    assert ds.started.wait(WAIT_S)
    t0 = time.monotonic()
    it.close(timeout_s=timeout_s)  # not the default 5 s
    elapsed = time.monotonic() - t0
    t1 = time.monotonic()
    it.close()  # a second close returns at once, whatever its timeout
    again = time.monotonic() - t1
    ds.release.set()
    assert timeout_s <= elapsed < timeout_s + 2.0, f"close(timeout_s={timeout_s}) took {elapsed:.2f} s"
    assert again < 1.0
    with pytest.raises(StopIteration):
        next(it)
    loader.close()


def test_loader_close_with_a_stuck_worker_has_one_budget_in_total(short_budget):
    ds = Gate(6, stuck=1)
    loader = DataLoader(ds, batch_size=1, num_workers=2, prefetch_depth=0)
    it = iter(loader)
    next(it)
    assert ds.started.wait(WAIT_S)
    t0 = time.monotonic()
    loader.close()  # the epoch's wait and the joins share one budget
    elapsed = time.monotonic() - t0
    ds.release.set()
    assert elapsed < short_budget * 1.9, f"loader.close() took {elapsed:.2f} s for a {short_budget} s budget"
    it.close()


@pytest.mark.parametrize("num_workers", [0, 2, "auto"])
def test_loader_close_ends_every_open_epoch_whatever_its_worker_count(num_workers):
    # With num_workers=0 (and "auto" once it settled inline) close() ended nothing: the open
    # epoch went on yielding its 99 other batches (found by a breaker).
    from dataloader import ArrayDataset

    loader = DataLoader(ArrayDataset(np.arange(1000.0)), batch_size=10, num_workers=num_workers)
    for _ in range(3):  # "auto" settles within these (inline, for batches this cheap)
        list(loader)
    first, second = iter(loader), iter(loader)  # the second one runs on a pool of its own
    assert next(first)[0].tolist() == next(second)[0].tolist()
    loader.close()
    assert next(first, "end") == "end" and next(second, "end") == "end"
    assert len(list(loader)) == 100  # a later epoch starts afresh
    loader.close()


@pytest.mark.parametrize("where", ["worker_init_fn", "collate_fn"])
def test_loader_close_from_inside_a_worker_does_not_stall_the_consumer(where):
    holder: dict = {}

    def close_loader(*args):
        holder["loader"].close()
        return np.asarray(args[0]) if where == "collate_fn" else None

    kwargs = {where: close_loader}
    before = set(threading.enumerate())
    loader = holder["loader"] = DataLoader(list(range(20)), batch_size=2, num_workers=2, **kwargs)
    t0 = time.monotonic()
    got = list(loader)  # ends early (the epoch was closed): never stalls for the budget
    elapsed = time.monotonic() - t0
    assert len(got) <= 10
    assert elapsed < 3.0, f"the consumer stalled {elapsed:.2f} s"
    loader.close()
    deadline = time.monotonic() + WAIT_S
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not set(threading.enumerate()) - before


def _interrupt_main_after(delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, _thread.interrupt_main)
    timer.start()
    return timer


@pytest.mark.usefixtures("sigint_raises")
def test_ctrl_c_during_close_interrupts_its_wait():
    ds = Gate(6, stuck=1)
    loader = DataLoader(ds, batch_size=1, num_workers=2, prefetch_depth=0)
    it = iter(loader)
    next(it)
    assert ds.started.wait(WAIT_S)
    timer = _interrupt_main_after(0.2)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        it.close()  # would wait 5 s for the stuck batch
    assert time.monotonic() - t0 < 4.0
    timer.join()
    ds.release.set()
    loader.close()


@pytest.mark.usefixtures("sigint_raises")
def test_ctrl_c_ends_an_iterable_epoch():
    class Slow(IterableDataset):
        def __iter__(self):
            while True:
                time.sleep(0.2)
                yield 1

    loader = DataLoader(Slow(), batch_size=100, num_workers=1)
    it = iter(loader)
    timer = _interrupt_main_after(0.2)
    with pytest.raises(KeyboardInterrupt):
        next(it)
    timer.join()
    with pytest.raises(StopIteration):
        next(it)  # the epoch ended
    loader.close()


@pytest.mark.timeout(30)
def test_a_blocked_next_on_a_map_epoch_ends_promptly_when_closed_from_another_thread():
    ds = Gate(6, stuck=0)
    loader = DataLoader(ds, batch_size=1, num_workers=1)
    it = iter(loader)
    threading.Timer(0.1, it.close).start()
    t0 = time.monotonic()
    with pytest.raises(StopIteration):
        next(it)
    assert time.monotonic() - t0 < 4.0
    ds.release.set()
    loader.close()


# -- garbage collection ------------------------------------------------------------------------


class SelfReferencing:
    """A dataset that refers to the iterator of its own loader (directly or through a callable)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.iterator = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


@pytest.mark.timeout(300)
@pytest.mark.parametrize("via", ["dataset", "collate_fn", "transform", "worker_init_fn"])
def test_epochs_in_reference_cycles_are_collected_and_their_threads_end(via):
    baseline = threading.active_count()
    count = 1000 if via == "dataset" else 200
    for i in range(count):
        ds = SelfReferencing(8)
        box: dict = {}
        fns = {
            "collate_fn": lambda items, box=box: items,
            "transform": lambda item, box=box: item,
            "worker_init_fn": lambda worker_id, box=box: None,
        }
        kwargs = {via: fns[via]} if via != "dataset" else {}
        loader = DataLoader(ds, batch_size=2, num_workers=2, **kwargs)
        it = iter(loader)
        next(it)
        ds.iterator = it
        box["iterator"] = it
        del ds, box, loader, it, fns, kwargs
        if i % 50 == 49:
            gc.collect()
    gc.collect()
    deadline = time.monotonic() + WAIT_S * 3
    while threading.active_count() > baseline and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert threading.active_count() <= baseline


def test_a_closed_iterator_does_not_keep_its_loader_or_threads_alive():
    before = threading.active_count()
    loader = DataLoader(RecordingDataset(40), batch_size=2, num_workers=4)
    ref = weakref.ref(loader)
    it = iter(loader)
    next(it)
    it.close()
    del loader
    gc.collect()
    assert ref() is None
    deadline = time.monotonic() + WAIT_S
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert threading.active_count() <= before


@pytest.mark.parametrize("num_workers", [1, 3])
def test_a_failing_worker_init_fn_does_not_leak_the_epoch(num_workers):
    def init(worker_id):
        raise OSError("init failed")

    ds = RecordingDataset(20)
    ref = weakref.ref(ds)
    loader = DataLoader(ds, batch_size=2, num_workers=num_workers, worker_init_fn=init)
    it = iter(loader)
    with pytest.raises(OSError, match="init failed"):
        next(it)
    del it, loader, ds
    deadline = time.monotonic() + WAIT_S
    while ref() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    assert ref() is None


# -- interpreter shutdown ----------------------------------------------------------------------


_OPEN_AT_EXIT = textwrap.dedent(
    """
    import time
    import dataloader._engine.epoch, dataloader._engine.handout, dataloader.loader
    from dataloader import DataLoader

    # A close() that waited at exit would now take 30 s, far beyond any interpreter's start.
    for module in (dataloader._engine.epoch, dataloader._engine.handout, dataloader.loader):
        module.SHUTDOWN_JOIN_TIMEOUT_S = 30.0

    class DS:
        def __len__(self):
            return 100
        def __getitem__(self, i):
            if i == 0:
                raise ValueError("boom")
            time.sleep({sleep})
            return i

    loader = DataLoader(DS(), batch_size=1, num_workers=2)
    it = iter(loader)
    try:
        next(it)
    except ValueError:
        pass
    next(it)
    {end}
    """
)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "end, sleep, runs",
    [
        ("pass", 0.0, 20),  # the epoch is still open at exit, its worker raised
        ("raise SystemExit(0)", 0.0, 4),
        ("raise RuntimeError('uncaught')", 2.0, 4),  # a frame holding it in the traceback; slow batches
    ],
)
def test_a_process_exits_promptly_with_an_epoch_open(end, sleep, runs):
    code = _OPEN_AT_EXIT.format(end=end, sleep=sleep)
    for _ in range(runs):
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - t0
        assert proc.returncode in (0, 1), proc.stderr[-800:]
        if "uncaught" in end:
            assert "uncaught" in proc.stderr
        assert elapsed < 20, f"exit took {elapsed:.1f} s (close() must not wait at shutdown)"


# -- arguments ---------------------------------------------------------------------------------


def test_an_absurd_batch_size_fails_at_construction():
    with pytest.raises(ValueError, match=r"batch_size=10+ must be <="):
        DataLoader(list(range(4)), batch_size=10**30)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
def test_close_refuses_a_timeout_that_is_not_seconds_before_closing_anything(workers):
    loader = DataLoader(list(range(8)), batch_size=2, num_workers=workers)
    it = iter(loader)
    next(it)
    for bad, error in [("x", TypeError), (True, TypeError), (float("nan"), ValueError)]:
        with pytest.raises(error, match="timeout_s"):
            it.close(timeout_s=bad)
        assert not it.closed
    assert next(it) is not None
    it.close(timeout_s=float("inf"))  # waits for the batches in flight, at most a year
    assert it.closed
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize("workers", [0, 2])
def test_an_epoch_iterator_refuses_to_be_copied(workers):
    import copy

    it = iter(DataLoader(list(range(8)), batch_size=2, num_workers=workers))
    with pytest.raises(TypeError, match="cannot be copied"):
        copy.copy(it)
    it.close()


@pytest.mark.timeout(60)
def test_a_pool_whose_workers_came_back_after_a_short_close_is_reused_without_warning():
    class Slow(Dataset):
        def __len__(self):
            return 100

        def __getitem__(self, i):
            time.sleep(0.2)
            return i

    loader = DataLoader(Slow(), batch_size=2, num_workers=2, persistent_workers=True)
    it = iter(loader)
    next(it)
    it.close(timeout_s=0.01)  # gives up on the batches in flight: the pool is away
    deadline = time.monotonic() + 10
    time.sleep(1.0)  # the workers finish their batches and come back
    it = iter(loader)
    next(it)
    it.close(timeout_s=0)  # do not wait now: the next iter() waits for this epoch's batches
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "did not come back" warning: the pool is reused
        it = iter(loader)
        assert next(it) is not None
    it.close()
    loader.close()
    assert time.monotonic() < deadline
