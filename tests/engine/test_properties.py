"""Property: every (num_workers, prefetch_depth, item_concurrency, in_order=True), "auto"
included, gives the
sequential loader's output — the same batches, and errors of the same type at the same places —
for map-style and for iterable epochs (both run on the one engine), with every named builder
(``BuilderKind``): each test draws the options that select its builders and checks the kind
they select (``KINDS``: every kind is drawn by one of them)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._support import RecordingDataset, batches_as_lists, collect
from dataloader import ArrayDataset, AsyncDataset, IterableDataset, get_worker_info
from dataloader._engine import autotune
from dataloader._engine.build import BuilderKind
from dataloader._engine.builders import MapBuild, map_builder
from dataloader.collate import default_collate
from dataloader.loader import DataLoader


class BatchedRecording(RecordingDataset):
    """The same items through ``__getitems__`` (one call per batch)."""

    def __getitems__(self, indices):
        return [self[i] for i in indices]


_EAGER_LOCK = threading.Lock()
_eager_users = 0
_eager_saved: tuple = ()


@contextlib.contextmanager
def eager_autotune():
    """``num_workers="auto"`` deciding after every batch, on a pool of 4: short epochs then
    admit and withdraw workers mid-epoch (a hypothesis test cannot take monkeypatch).
    Reference-counted under a lock: copies of this test may run at once (pytest-run-parallel)."""
    global _eager_users, _eager_saved
    with _EAGER_LOCK:
        if _eager_users == 0:
            _eager_saved = autotune.AUTO_PERIOD_S, autotune.AUTO_MIN_BATCHES, autotune.auto_max_workers
            autotune.AUTO_PERIOD_S, autotune.AUTO_MIN_BATCHES, autotune.auto_max_workers = 0.0, 1, lambda: 4
        _eager_users += 1
    try:
        yield
    finally:
        with _EAGER_LOCK:
            _eager_users -= 1
            if _eager_users == 0:
                autotune.AUTO_PERIOD_S, autotune.AUTO_MIN_BATCHES, autotune.auto_max_workers = _eager_saved


# The builder kinds each property test draws (the options that select them).
KINDS = {
    "test_any_worker_configuration_equals_the_sequential_loader": {
        BuilderKind.ITEMS, BuilderKind.GETITEMS, BuilderKind.LANES},
    "test_any_worker_configuration_of_an_array_dataset_gives_numpys_rows_in_sampler_order": {
        BuilderKind.NATIVE_GATHER, BuilderKind.NATIVE_ROWS, BuilderKind.LANES, BuilderKind.GETITEMS},
    "test_any_worker_configuration_without_auto_batching_equals_the_sequential_loader": {BuilderKind.SINGLE},
    "test_any_worker_configuration_of_an_async_dataset_equals_the_sequential_loader": {BuilderKind.ASYNC},
    "test_any_worker_configuration_of_an_iterable_epoch_equals_the_sequential_loader": {BuilderKind.STREAM},
}


def test_the_properties_draw_every_builder_kind():
    assert set().union(*KINDS.values()) == set(BuilderKind)
    assert set(KINDS) <= set(globals())


def _map_kind(dataset, batch_size, num_workers, item_concurrency):
    """The kind ``map_builder`` picks for a plain map-style epoch of the loader's options (lanes
    where a batch uses more than one: ``DataLoader._num_lanes``)."""
    lanes = object() if batch_size is not None and min(batch_size, item_concurrency) > 1 else None
    build = MapBuild(dataset, batch_size is not None, default_collate, None, item_concurrency,
                     workers=num_workers != 0, lanes=lanes)
    return map_builder(build, (0, 0))[0].kind


examples = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# What both properties draw: the epoch, the failing and slow items.
EPOCHS = dict(
    n=st.integers(0, 60),
    batch_size=st.integers(1, 9),
    drop_last=st.booleans(),
    fail=st.sets(st.integers(0, 59), max_size=4),
    slow=st.sets(st.integers(0, 59), max_size=3),
)


@pytest.mark.timeout(300)
@examples
@given(
    **EPOCHS,
    shuffle=st.booleans(),
    num_workers=st.one_of(st.integers(0, 8), st.just("auto")),  # "auto": the gated pool, and its probe
    prefetch_depth=st.one_of(st.integers(1, 4), st.just("auto")),
    item_concurrency=st.integers(1, 4),
    batched=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_any_worker_configuration_equals_the_sequential_loader(
    n, batch_size, drop_last, shuffle, fail, slow, num_workers, prefetch_depth, item_concurrency, batched, seed
):
    cls = BatchedRecording if batched else RecordingDataset
    kind = _map_kind(cls(n), batch_size, num_workers, item_concurrency)
    assert kind in KINDS["test_any_worker_configuration_equals_the_sequential_loader"]
    assert (kind is BuilderKind.LANES) is (min(batch_size, item_concurrency) > 1)
    shuffle = shuffle and n > 0  # RandomSampler rejects an empty dataset, as in PyTorch
    fail = {i for i in fail if i < n}
    delay = {i: 0.002 for i in slow if i < n}

    def run(**kw):
        ds = cls(n, fail=fail, delay_s=delay)
        loader = DataLoader(ds, batch_size=batch_size, drop_last=drop_last, shuffle=shuffle, seed=seed, **kw)
        out = batches_as_lists(collect(loader))
        loader.close()
        return out

    expected = run()
    with eager_autotune():
        got = run(num_workers=num_workers, prefetch_depth=prefetch_depth, item_concurrency=item_concurrency)
    assert got == expected
    n_batches = n // batch_size if drop_last else -(-n // batch_size)
    assert len(expected) == n_batches  # never a short epoch: failed batches still count


@pytest.mark.timeout(300)
@examples
@given(
    **{k: v for k, v in EPOCHS.items() if k not in ("fail", "slow")},
    shuffle=st.booleans(),
    num_workers=st.one_of(st.integers(0, 4), st.just("auto")),
    prefetch_depth=st.one_of(st.integers(1, 4), st.just("auto")),
    item_concurrency=st.integers(1, 3),  # 1: the native builders (_engine/native.py), else lanes
    seed=st.integers(0, 2**32),
)
def test_any_worker_configuration_of_an_array_dataset_gives_numpys_rows_in_sampler_order(
    n, batch_size, drop_last, shuffle, num_workers, prefetch_depth, item_concurrency, seed
):
    shuffle = shuffle and n > 0
    x = np.arange(n * 3, dtype=np.float64).reshape(n, 3) / 4
    kind = _map_kind(ArrayDataset(x, np.arange(n)), batch_size, num_workers, item_concurrency)
    native = BuilderKind.NATIVE_ROWS if num_workers != 0 and n > 0 else BuilderKind.NATIVE_GATHER
    if min(batch_size, item_concurrency) > 1:
        native = BuilderKind.LANES
    elif item_concurrency > 1:  # a batch of one item: no lanes, and not the native builders' options
        native = BuilderKind.GETITEMS
    assert kind is native
    epoch = dict(batch_size=batch_size, drop_last=drop_last, shuffle=shuffle, seed=seed)
    # The sampler's order, from the general per-item path (items [i, 2i]).
    order = [v[:, 0] for _, v in collect(DataLoader(RecordingDataset(n), **epoch))]
    with eager_autotune():
        loader = DataLoader(
            ArrayDataset(x, np.arange(n)), num_workers=num_workers, prefetch_depth=prefetch_depth,
            item_concurrency=item_concurrency, **epoch,
        )
        got = collect(loader)
        loader.close()
    assert [kind for kind, _ in got] == ["batch"] * len(order)
    for (_, (rows, ids)), idx in zip(got, order, strict=True):
        assert ids.tolist() == idx.tolist()
        assert rows.tobytes() == x[idx].tobytes() and rows.shape == (len(idx), 3)


@pytest.mark.timeout(300)
@examples
@given(
    **{k: v for k, v in EPOCHS.items() if k not in ("batch_size", "drop_last")},
    shuffle=st.booleans(),
    num_workers=st.one_of(st.integers(0, 4), st.just("auto")),
    prefetch_depth=st.one_of(st.integers(1, 4), st.just("auto")),
    item_concurrency=st.integers(1, 3),
    batched=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_any_worker_configuration_without_auto_batching_equals_the_sequential_loader(
    n, shuffle, fail, slow, num_workers, prefetch_depth, item_concurrency, batched, seed
):
    cls = BatchedRecording if batched else RecordingDataset
    assert _map_kind(cls(n), None, num_workers, item_concurrency) is BuilderKind.SINGLE
    shuffle = shuffle and n > 0
    fail = {i for i in fail if i < n}
    delay = {i: 0.002 for i in slow if i < n}

    def run(**kw):
        loader = DataLoader(cls(n, fail=fail, delay_s=delay), batch_size=None, shuffle=shuffle, seed=seed, **kw)
        out = batches_as_lists(collect(loader))
        loader.close()
        return out

    expected = run()
    with eager_autotune():
        got = run(num_workers=num_workers, prefetch_depth=prefetch_depth, item_concurrency=item_concurrency)
    assert got == expected
    assert len(expected) == n


class AsyncRecording(AsyncDataset):
    """``RecordingDataset``'s items (``[i, 2i]``, ``KeyError(i)`` for ``fail``) from coroutines."""

    def __init__(self, n, fail, delay_s):
        self.n, self.fail, self.delay_s = n, frozenset(fail), delay_s

    def __len__(self):
        return self.n

    async def __getitem__(self, index):
        await asyncio.sleep(self.delay_s.get(index, 0))
        if index in self.fail:
            raise KeyError(index)
        return np.array([index, index * 2], dtype=np.int64)


@pytest.mark.timeout(300)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    **EPOCHS,
    shuffle=st.booleans(),
    num_workers=st.integers(0, 4),
    prefetch_depth=st.integers(1, 4),
    item_concurrency=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_any_worker_configuration_of_an_async_dataset_equals_the_sequential_loader(
    n, batch_size, drop_last, shuffle, fail, slow, num_workers, prefetch_depth, item_concurrency, seed
):
    shuffle = shuffle and n > 0
    fail = {i for i in fail if i < n}
    delay = {i: 0.002 for i in slow if i < n}
    epoch = dict(batch_size=batch_size, drop_last=drop_last, shuffle=shuffle, seed=seed)
    # The reference: the same items from the sequential loader of a plain dataset.
    expected = batches_as_lists(collect(DataLoader(RecordingDataset(n, fail=fail), **epoch)))
    with DataLoader(AsyncRecording(n, fail, delay), num_workers=num_workers, prefetch_depth=prefetch_depth,
                    item_concurrency=item_concurrency, **epoch) as loader:
        got = batches_as_lists(collect(loader))
    assert got == expected


class BlockStream(IterableDataset):
    """``range(n)`` cut into blocks of ``block`` items, block ``j`` read by worker
    ``j % num_workers``: round-robin over the workers' batches (PyTorch's order) then gives
    the sequential order back, so every worker configuration must equal ``num_workers=0``."""

    def __init__(self, n, block, slow):
        self.n, self.block, self.slow = n, block, slow

    def __iter__(self):
        info = get_worker_info()
        w, nw = (0, 1) if info is None else (info.id, info.num_workers)
        for start in range(w * self.block, self.n, nw * self.block):
            for value in range(start, min(start + self.block, self.n)):
                if value in self.slow:
                    time.sleep(0.002)
                yield value


def _collate_failing_on(fail):
    def collate(items):
        bad = sorted(set(items) & fail)
        if bad:
            raise ValueError(bad[0])
        return np.asarray(items, dtype=np.int64)

    return collate


@pytest.mark.timeout(300)
@examples
@given(**EPOCHS, num_workers=st.integers(1, 8), prefetch_depth=st.integers(0, 4))
def test_any_worker_configuration_of_an_iterable_epoch_equals_the_sequential_loader(
    n, batch_size, drop_last, fail, slow, num_workers, prefetch_depth
):
    fail = {i for i in fail if i < n}
    assert BuilderKind.STREAM in KINDS["test_any_worker_configuration_of_an_iterable_epoch_equals_the_sequential_loader"]

    def run(**kw):
        loader = DataLoader(
            BlockStream(n, batch_size, frozenset(slow)), batch_size=batch_size, drop_last=drop_last,
            collate_fn=_collate_failing_on(fail), **kw,
        )
        out = batches_as_lists(collect(loader))
        loader.close()
        return out

    expected = run()
    # drop_last drops each worker's short batch; only the last block can be short here.
    got = run(num_workers=num_workers, prefetch_depth=prefetch_depth)
    assert got == expected
    n_batches = n // batch_size if drop_last else -(-n // batch_size)
    assert len(expected) == n_batches
