"""IterableDataset epochs through the loader, with PyTorch's rules.

Every worker thread runs its own ``iter(dataset)`` and batches its own items;
``get_worker_info()`` lets the dataset shard itself.  With ``in_order=True`` the
batches come from the workers in turn (0, 1, ..., skipping workers that are
done) — the order of torch's ``DataLoader``, which ``torch_order`` below models
and ``torch/test_parity_loader.py`` checks against torch itself.
"""

from __future__ import annotations

import gc
import math
import threading
import time
import weakref

import numpy as np
import pytest

from tests._support import RangeStream, collect, shard
from dataloader import DataLoader, IterableDataset, get_worker_info
from tests._iterators import Resumable

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10  # generous bound on every Event/Barrier wait: a broken loader fails, never hangs


class ShardedRange(IterableDataset):
    """PyTorch's documentation example: ``range(start, end)`` split between the workers.

    ``fail_at``: the value whose ``next()`` raises ``ValueError(value)`` (the generator then
    ends, as a raising generator does).
    """

    def __init__(self, start, end, fail_at=None):
        self.start, self.end, self.fail_at = start, end, fail_at

    def __len__(self):
        return self.end - self.start

    def __iter__(self):
        lo, hi = shard(self.start, self.end, get_worker_info())
        for value in range(lo, hi):
            if value == self.fail_at:
                raise ValueError(value)
            yield value


class NoLen(IterableDataset):
    def __iter__(self):
        lo, hi = shard(0, 7, get_worker_info())
        return iter(range(lo, hi))


def worker_streams(n, num_workers, batch_size, drop_last, fail_at=None, collate_fails=()):
    """Each worker's outputs: batches (lists, or single items) and ``("error", value)``."""
    shards = (
        [(0, n)]
        if num_workers == 0
        else [
            shard(0, n, type("I", (), {"id": w, "num_workers": num_workers}))
            for w in range(num_workers)
        ]
    )
    streams = []
    for lo, hi in shards:
        out, items = [], []
        for value in range(lo, hi):
            if value == fail_at:
                out.append(("error", value))
                items = None
                break
            if batch_size is None:
                out.append(("error", value) if value in collate_fails else value)
                continue
            items.append(value)
            if len(items) == batch_size:
                bad = set(items) & set(collate_fails)
                out.append(("error", min(bad)) if bad else items)
                items = []
        if items and not drop_last:
            bad = set(items) & set(collate_fails)
            out.append(("error", min(bad)) if bad else items)
        streams.append(out)
    return streams


def torch_order(streams):
    """PyTorch's in-order result: take from the workers in turn, skip those that are done."""
    streams = [list(s) for s in streams]
    live, turn, out = list(range(len(streams))), 0, []
    while live:
        w = live[turn]
        if not streams[w]:
            live.pop(turn)
            turn = turn % len(live) if live else 0
            continue
        out.append(streams[w].pop(0))
        turn = (turn + 1) % len(live)
    return out


def as_lists(out):
    """``collect()`` output as plain values comparable with ``worker_streams``."""
    result = []
    for kind, value in out:
        if kind == "error":
            name, args = value
            assert name == "ValueError"
            result.append(("error", args[0]))
        elif isinstance(value, np.ndarray):
            result.append(value.tolist())
        else:
            result.append(value)
    return result


# -- sharding and order ----------------------------------------------------------------------


def test_torch_order_model_takes_turns_and_skips_finished_workers():
    assert torch_order([[0, 1, 2], [10], [20, 21]]) == [0, 10, 20, 1, 21, 2]
    assert torch_order(worker_streams(10, 3, 2, False)) == [[0, 1], [4, 5], [8, 9], [2, 3], [6, 7]]


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3, 4])
@pytest.mark.parametrize(
    "batch_size, drop_last", [(None, False), (1, False), (2, False), (3, False), (3, True)]
)
@pytest.mark.parametrize("n", [0, 3, 10, 17])
def test_sharded_range_gives_each_item_once_in_torch_order(n, num_workers, batch_size, drop_last):
    loader = DataLoader(
        ShardedRange(0, n), batch_size=batch_size, drop_last=drop_last, num_workers=num_workers
    )
    expected = torch_order(worker_streams(n, num_workers, batch_size, drop_last))
    for _ in range(2):  # and again in the next epoch
        got = as_lists(collect(loader))
        assert got == expected
    if not drop_last:
        flat = [v for b in got for v in (b if isinstance(b, list) else [b])]
        assert sorted(flat) == list(range(n))
    loader.close()


def test_batches_are_collated_numpy_arrays_and_unbatched_items_converted():
    with DataLoader(ShardedRange(0, 5), batch_size=3, num_workers=2) as loader:
        batch = next(iter(loader))
    assert isinstance(batch, np.ndarray) and batch.dtype == np.int64 and batch.tolist() == [0, 1, 2]
    with DataLoader(ShardedRange(0, 3), batch_size=None, num_workers=2) as loader:
        items = list(loader)
    assert items == [0, 2, 1] and all(type(i) is int for i in items)  # default_convert keeps ints


# -- len() -----------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11])
@pytest.mark.parametrize("batch_size", [None, 1, 3, 10])
@pytest.mark.parametrize("drop_last", [False, True])
def test_len_follows_the_datasets_len(n, batch_size, drop_last):
    if batch_size is None and drop_last:
        return
    loader = DataLoader(ShardedRange(0, n), batch_size=batch_size, drop_last=drop_last)
    if batch_size is None:
        expected = n
    else:
        expected = n // batch_size if drop_last else math.ceil(n / batch_size)
    assert len(loader) == expected
    assert len(list(loader)) == expected  # exact without workers


def test_len_with_workers_is_the_formula_not_the_per_worker_count():
    """As in PyTorch: each worker drops its own short batch, ``len()`` does not know that."""
    loader = DataLoader(ShardedRange(0, 10), batch_size=3, drop_last=True, num_workers=2)
    assert len(loader) == 3
    assert as_lists(collect(loader)) == [[0, 1, 2], [5, 6, 7]]
    loader.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_len_without_dataset_len_raises_type_error_but_iteration_works(num_workers):
    loader = DataLoader(NoLen(), batch_size=2, num_workers=num_workers)
    with pytest.raises(TypeError):
        len(loader)
    it = iter(loader)
    with pytest.raises(TypeError):
        len(it)
    assert sorted(v for b in it for v in b.tolist()) == list(range(7))
    loader.close()


# -- duplicates without sharding -------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_a_dataset_that_does_not_shard_yields_its_items_once_per_worker(num_workers):
    """Every worker runs its own ``iter(dataset)``; a dataset that ignores ``get_worker_info()``
    is read once per worker.  PyTorch does the same (its documentation warns about it)."""
    loader = DataLoader(RangeStream(6), batch_size=4, num_workers=num_workers)
    flat = [v for b in loader for v in b.tolist()]
    assert sorted(flat) == sorted(list(range(6)) * num_workers)
    loader.close()


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
@pytest.mark.parametrize("batch_size", [None, 2, 3])
def test_an_error_in_the_datasets_iterator_is_raised_for_its_batch(num_workers, batch_size):
    ds = ShardedRange(0, 12, fail_at=5)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=num_workers)
    expected = torch_order(worker_streams(12, num_workers, batch_size, False, fail_at=5))
    assert ("error", 5) in expected
    assert as_lists(collect(loader)) == expected
    loader.close()


def failing_collate(fail_on):
    def collate(batch):
        values = batch if isinstance(batch, list) else [batch]
        bad = sorted(set(values) & fail_on)
        if bad:
            raise ValueError(bad[0])
        return np.array(values, dtype=np.int64) if isinstance(batch, list) else batch

    return collate


@pytest.mark.parametrize("num_workers", [0, 2, 3])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_an_error_in_collate_fn_is_raised_for_its_batch_and_iteration_continues(
    num_workers, batch_size
):
    fails = {3, 8}
    loader = DataLoader(
        ShardedRange(0, 12),
        batch_size=batch_size,
        num_workers=num_workers,
        collate_fn=failing_collate(fails),
    )
    expected = torch_order(worker_streams(12, num_workers, batch_size, False, collate_fails=fails))
    assert as_lists(collect(loader)) == expected
    loader.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_error_from_iter_dataset_is_raised_then_the_epoch_ends(num_workers):
    class CannotStart(IterableDataset):
        def __iter__(self):
            raise OSError("cannot open stream")

    loader = DataLoader(CannotStart(), batch_size=2, num_workers=num_workers)
    out = collect(loader)
    assert out == [("error", ("OSError", ("cannot open stream",)))] * max(num_workers, 1)
    loader.close()




class ResumableDataset(IterableDataset):
    def __iter__(self):
        return Resumable()


@pytest.mark.parametrize("num_workers", [0, 1])
@pytest.mark.parametrize("batch_size", [None, 2, 3])
def test_iteration_stops_at_the_first_stop_iteration_like_torch(num_workers, batch_size):
    loader = DataLoader(ResumableDataset(), batch_size=batch_size, num_workers=num_workers)
    flat = [v for b in loader for v in (b.tolist() if isinstance(b, np.ndarray) else [b])]
    assert flat == [1, 2, 3, 4, 5]
    loader.close()


# -- cancellation ------------------------------------------------------------------------------


class Endless(IterableDataset):
    """An infinite stream per worker; records when a worker's generator is finalized.

    Each worker thread iterates its own shallow copy of the dataset (as each torch
    worker process does), so the counters live in a dict the copies share.
    """

    def __init__(self):
        self.cond = threading.Condition()
        self.counts = {"started": 0, "finished": 0}

    @property
    def started(self):
        return self.counts["started"]

    @property
    def finished(self):
        return self.counts["finished"]

    def __iter__(self):
        with self.cond:
            self.counts["started"] += 1
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            with self.cond:
                self.counts["finished"] += 1
                self.cond.notify_all()


@pytest.mark.parametrize("num_workers", [1, 2, 4])
@pytest.mark.parametrize("how", ["break", "close"])
def test_early_break_or_close_ends_the_workers_streams_promptly(num_workers, how):
    ds = Endless()
    loader = DataLoader(ds, batch_size=3, num_workers=num_workers)
    t0 = time.monotonic()
    if how == "break":
        for i, _ in enumerate(loader):
            if i == 5:
                break
        gc.collect()  # a dropped iterator closes its epoch
    else:
        it = iter(loader)
        for _ in range(5):
            next(it)
        it.close()
        with pytest.raises(StopIteration):
            next(it)
        del it  # a closed epoch still holds its loader, as torch's iterator does
    with ds.cond:
        assert ds.cond.wait_for(lambda: ds.finished == ds.started, WAIT_S)
    assert time.monotonic() - t0 < WAIT_S
    assert 1 <= ds.started <= num_workers
    # the pool is idle and reusable: the next epoch works
    assert len(next(iter(loader))) == 3
    ref = weakref.ref(ds)
    loader.close()
    loader = ds = None
    gc.collect()
    assert ref() is None  # no thread keeps the dataset


# -- bounded window ------------------------------------------------------------------------


def counting_collate(ds):
    def collate(items):
        with ds.cond:
            ds.built += 1
            ds.cond.notify_all()
        return items

    return collate


def assert_stays_at_most(ds, limit, duration_s=0.2):
    """``ds.built`` never exceeds ``limit`` while the consumer stalls (a hard bound: this can
    only fail when the loader builds too many batches, never because the machine is slow)."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        assert ds.built <= limit
        time.sleep(0.01)


@pytest.mark.parametrize(
    "num_workers, kwargs, window",
    [
        (1, {}, 3),
        (2, {}, 4),
        (3, {"prefetch_depth": 1}, 4),
        (4, {}, 6),
        (2, {"prefetch_factor": 3}, 6),
    ],
)
@pytest.mark.parametrize("in_order", [True, False])
def test_window_bounds_batches_built_or_waiting_while_the_consumer_stalls(
    num_workers, kwargs, window, in_order
):
    ds = Endless()
    ds.built = 0
    loader = DataLoader(
        ds,
        batch_size=2,
        num_workers=num_workers,
        in_order=in_order,
        collate_fn=counting_collate(ds),
        **kwargs,
    )
    try:
        it = iter(loader)
        with ds.cond:
            assert ds.cond.wait_for(
                lambda: ds.built >= window, WAIT_S
            )  # the workers fill the window
        assert_stays_at_most(ds, window)  # ... and stop there
        next(it)
        with ds.cond:
            assert ds.cond.wait_for(lambda: ds.built >= window + 1, WAIT_S)
        assert_stays_at_most(ds, window + 1)  # exactly one more batch once one is taken
    finally:
        loader.close()


# -- in_order=False ------------------------------------------------------------------------


class HeldBack(IterableDataset):
    """Worker 0 waits until ``release`` is set before yielding anything."""

    def __init__(self):
        self.release = threading.Event()

    def __iter__(self):
        info = get_worker_info()
        if info.id == 0 and not self.release.wait(WAIT_S):
            raise RuntimeError("never released")
        lo, hi = shard(0, 8, info)
        return iter(range(lo, hi))


def test_in_order_false_yields_whatever_is_ready_first():
    ds = HeldBack()
    loader = DataLoader(ds, batch_size=2, num_workers=2, in_order=False)
    it = iter(loader)
    first = next(it).tolist()
    assert first == [4, 5]  # worker 1's first batch; worker 0 is held back
    ds.release.set()
    rest = [b.tolist() for b in it]
    assert sorted([first] + rest) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    loader.close()


# -- timeout --------------------------------------------------------------------------------


@pytest.mark.thread_unsafe(reason="needs each batch within 0.05 s; 4 copies on 2 cores miss it")
def test_timeout_with_workers_names_the_batch_then_the_epoch_continues():
    ds = HeldBack()
    loader = DataLoader(ds, batch_size=2, num_workers=2, timeout=0.05)
    it = iter(loader)
    with pytest.raises(TimeoutError, match=r"batch 0 .*timeout=0\.05"):
        next(it)  # batch 0 comes from worker 0, which is held back
    ds.release.set()
    assert [b.tolist() for b in it] == [[0, 1], [4, 5], [2, 3], [6, 7]]
    loader.close()


@pytest.mark.thread_unsafe(reason="needs each batch within 0.05 s; 4 copies on 2 cores miss it")
def test_timeout_out_of_order_names_the_next_batch():
    ds = HeldBack()
    loader = DataLoader(ds, batch_size=2, num_workers=2, timeout=0.05, in_order=False)
    it = iter(loader)
    assert next(it).tolist() == [4, 5]
    assert next(it).tolist() == [6, 7]
    with pytest.raises(TimeoutError, match=r"batch 2 \(from any worker\).*timeout=0\.05"):
        next(it)  # only worker 0's batches are left, and it is held back
    ds.release.set()
    assert [b.tolist() for b in it] == [[0, 1], [2, 3]]
    loader.close()


def test_timeout_without_workers_has_no_effect():
    class Slow(IterableDataset):
        def __iter__(self):
            for i in range(3):
                time.sleep(0.03)
                yield i

    loader = DataLoader(Slow(), batch_size=2, timeout=0.001)
    assert [b.tolist() for b in loader] == [[0, 1], [2]]


# -- worker_init_fn --------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_worker_init_fn_runs_on_every_worker_even_when_the_epoch_is_closed_at_once(num_workers):
    calls = []
    lock = threading.Lock()

    def init(worker_id):
        with lock:
            calls.append((worker_id, threading.current_thread().name))

    loader = DataLoader(Endless(), batch_size=2, num_workers=num_workers, worker_init_fn=init)
    epochs = 10
    for _ in range(epochs):
        iter(loader).close()
    assert sorted(calls) == sorted(
        [(w, f"dataloader-worker-{w}") for w in range(num_workers)] * epochs
    )
    loader.close()


@pytest.mark.parametrize("num_workers", [1, 3])
def test_worker_init_fn_error_is_raised_by_next_for_each_worker_then_the_epoch_ends(num_workers):
    def init(worker_id):
        raise LookupError(f"init {worker_id}")

    loader = DataLoader(
        ShardedRange(0, 10), batch_size=2, num_workers=num_workers, worker_init_fn=init
    )
    out = collect(loader)
    assert out == [("error", ("LookupError", (f"init {w}",))) for w in range(num_workers)]
    loader.close()


# -- empty ---------------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size, drop_last", [(None, False), (2, False), (2, True)])
def test_empty_iterable_dataset_has_len_0_and_an_empty_epoch(num_workers, batch_size, drop_last):
    loader = DataLoader(
        ShardedRange(0, 0), batch_size=batch_size, drop_last=drop_last, num_workers=num_workers
    )
    assert len(loader) == 0
    for _ in range(2):
        assert list(loader) == []
    loader.close()


class ConfiguredByWorkerInit(IterableDataset):
    """PyTorch's documented example 2: worker_init_fn narrows each worker's copy."""

    def __init__(self, start, end):
        self.start, self.end = start, end

    def __iter__(self):
        return iter(range(self.start, self.end))


def _split_range(worker_id):
    info = get_worker_info()
    ds = info.dataset  # this worker's own copy
    per_worker = -(-(ds.end - ds.start) // info.num_workers)
    ds.start = ds.start + worker_id * per_worker
    ds.end = min(ds.start + per_worker, ds.end)


@pytest.mark.parametrize("persistent", [False, True])
def test_worker_init_fn_can_configure_each_workers_copy_like_torchs_docs(persistent):
    ds = ConfiguredByWorkerInit(3, 7)
    loader = DataLoader(ds, num_workers=2, worker_init_fn=_split_range, persistent_workers=persistent)
    for _ in range(2):  # the second epoch too (persistent workers keep their configured copy)
        assert sorted(int(b[0]) for b in loader) == [3, 4, 5, 6]
    assert (ds.start, ds.end) == (3, 7)  # the user's object is untouched
    loader.close()


# -- edge cases: closing from other threads, nesting, StopIteration, thread limits ------------


class _SlowIterable(IterableDataset):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n = n
        self.delay_s = delay_s

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.delay_s)
            yield i


def _next_in_thread(it, budget_s: float) -> tuple[bool, list]:
    """Call next(it) on a helper thread; (finished within budget_s, [result or exception])."""
    box: list = []

    def run() -> None:
        try:
            box.append(next(it))
        except BaseException as exc:  # noqa: BLE001 - we report whatever happened
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(budget_s)
    return not t.is_alive(), box


@pytest.mark.timeout(30)
def test_iterable_close_from_other_thread_unblocks_next() -> None:
    dl = DataLoader(_SlowIterable(4, 0.5), batch_size=1, num_workers=1)
    it = iter(dl)
    threading.Timer(0.1, it.close).start()
    finished, box = _next_in_thread(it, 8.0)
    assert finished, "next() still blocked 8 s after close() from another thread"
    assert isinstance(box[0], StopIteration) or isinstance(box[0], np.ndarray)
    dl.close()
