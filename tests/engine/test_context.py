"""Per-thread context through the loader: ``get_worker_info()`` and ``item_rng()``.

PyTorch's rules: ``get_worker_info()`` is None outside worker threads (also on the
consumer with ``num_workers=0``) and describes the worker inside ``__getitem__``.
Our contract on top: ``item_rng()`` depends only on (seed, epoch, index), never on
``num_workers`` or ``item_concurrency``, and a loader leaves no context behind on
the thread that iterated it.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dataloader import DataLoader, get_worker_info, item_rng
from dataloader._context import epoch_seed
from tests._support import RangeStream

pytestmark = pytest.mark.timeout(60)


def outside_rng(index):
    """What ``item_rng(index)`` is documented to be outside a loader: seed 0, epoch 0."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, 0, index])))


class InfoDataset:
    """Records ``get_worker_info()`` and the thread name seen by every ``__getitem__``."""

    def __init__(self, n):
        self.n = n
        self.lock = threading.Lock()
        self.seen = []

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        info = get_worker_info()
        with self.lock:
            self.seen.append((index, info, threading.current_thread().name))
        return index


class RngDataset:
    """Each item is ``item_rng().random()`` (and checks it equals ``item_rng(index)``)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        value = item_rng().random()
        if value != item_rng(index).random():
            raise AssertionError(f"item_rng() and item_rng({index}) differ")
        return value


class IndexDataset:
    """Items are their index (``__getitem__`` and a batched ``__getitems__``)."""

    def __init__(self, n, batched):
        self.n = n
        if batched:
            self.__getitems__ = lambda indices: [int(i) for i in indices]

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return int(index)


def with_noise(item):
    """A random transform: pairs the item with a draw from its generator."""
    return item, item_rng().random()


# -- get_worker_info ----------------------------------------------------------------------


def test_get_worker_info_is_none_on_the_main_thread():
    assert get_worker_info() is None
    loader = DataLoader(InfoDataset(8), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    assert get_worker_info() is None  # the consumer is not a worker
    list(it)
    assert get_worker_info() is None
    loader.close()


def test_get_worker_info_is_none_inside_getitem_without_workers():
    ds = InfoDataset(6)
    list(DataLoader(ds, batch_size=2))
    assert [info for _, info, _ in ds.seen] == [None] * 6


@pytest.mark.parametrize("num_workers", [1, 2, 4])
def test_get_worker_info_inside_getitem_on_workers(num_workers):
    ds = InfoDataset(24)
    loader = DataLoader(ds, batch_size=3, num_workers=num_workers, seed=11)
    for epoch in range(2):
        ds.seen.clear()
        assert sorted(int(i) for b in loader for i in b) == list(range(24))
        assert len(ds.seen) == 24
        for _, info, thread in ds.seen:
            assert info is not None
            assert 0 <= info.id < num_workers
            assert info.num_workers == num_workers
            assert info.seed == epoch_seed(11, epoch) + info.id
            assert info.dataset is ds
            assert thread == f"dataloader-worker-{info.id}"
    loader.close()


def test_get_worker_info_on_item_lanes_is_the_batch_workers():
    ds = InfoDataset(24)
    loader = DataLoader(ds, batch_size=6, num_workers=2, item_concurrency=3, seed=5)
    list(loader)
    lanes = [(info, thread) for _, info, thread in ds.seen if thread.startswith("dataloader-lane-")]
    for info, _ in lanes:  # a lane works for the worker that builds the batch
        assert info is not None and info.id in (0, 1) and info.seed == epoch_seed(5, 0) + info.id
    loader.close()


def test_get_worker_info_is_none_on_lanes_without_workers():
    ds = InfoDataset(12)
    loader = DataLoader(ds, batch_size=6, item_concurrency=3)
    list(loader)
    assert {info for _, info, _ in ds.seen} == {None}
    loader.close()


# -- item_rng ----------------------------------------------------------------------------


def rng_epochs(ds, *, epochs=2, **kwargs):
    loader = DataLoader(ds, batch_size=5, seed=123, **kwargs)
    out = [np.concatenate(list(loader)) for _ in range(epochs)]
    loader.close()
    return out


@pytest.mark.parametrize("num_workers", [0, 1, 2, 4])
@pytest.mark.parametrize("item_concurrency", [1, 3])
def test_item_rng_in_getitem_does_not_depend_on_threads(num_workers, item_concurrency):
    ref = rng_epochs(RngDataset(23))
    got = rng_epochs(RngDataset(23), num_workers=num_workers, item_concurrency=item_concurrency)
    for a, b in zip(ref, got, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(ref[0], ref[1])  # a new epoch draws anew
    assert len(np.unique(ref[0])) == 23  # every item has its own stream


@pytest.mark.parametrize("num_workers", [0, 1, 2, 4])
@pytest.mark.parametrize("item_concurrency", [1, 3])
@pytest.mark.parametrize("batched", [False, True], ids=["getitem", "getitems"])
def test_item_rng_in_transform_does_not_depend_on_threads(num_workers, item_concurrency, batched):
    ref = rng_epochs(RngDataset(17))  # item_rng().random() drawn in __getitem__
    loader = DataLoader(
        IndexDataset(17, batched),
        batch_size=5,
        seed=123,
        transform=with_noise,
        num_workers=num_workers,
        item_concurrency=item_concurrency,
    )
    for expected in ref:
        batches = list(loader)
        assert np.concatenate([b[0] for b in batches]).tolist() == list(range(17))
        np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), expected)
    loader.close()


def test_item_rng_with_the_same_seed_is_reproducible_and_seed_dependent():
    a = rng_epochs(RngDataset(10), num_workers=2)
    b = rng_epochs(RngDataset(10), num_workers=2)
    np.testing.assert_array_equal(a[0], b[0])
    other = DataLoader(RngDataset(10), batch_size=5, seed=124)
    assert not np.array_equal(np.concatenate(list(other)), a[0])


def test_item_rng_without_index_outside_a_loader_raises():
    with pytest.raises(RuntimeError, match="index"):
        item_rng()


def test_item_rng_explicit_index_outside_a_loader_uses_seed_0_epoch_0():
    assert item_rng(3).random() == outside_rng(3).random()
    with pytest.raises(TypeError, match="index"):
        item_rng(1.5)


@pytest.mark.parametrize(
    "make_loader",
    [
        lambda: DataLoader(RngDataset(6), batch_size=2, seed=7),
        lambda: DataLoader(RngDataset(6), batch_size=2, seed=7, item_concurrency=2),
        lambda: DataLoader(RngDataset(6), batch_size=None, seed=7),
        lambda: DataLoader(RangeStream(4), batch_size=2, seed=7),
    ],
    ids=["map", "map-lanes", "map-unbatched", "iterable"],
)
def test_a_loader_leaves_no_context_on_the_consumer_thread(make_loader):
    """After a ``num_workers=0`` epoch, ``item_rng(i)`` on the consumer is the outside one again."""
    loader = make_loader()
    list(loader)
    it = iter(loader)
    next(it)  # also mid-epoch, between two next() calls
    assert item_rng(3).random() == outside_rng(3).random()
    with pytest.raises(RuntimeError):
        item_rng()
    it.close()
    loader.close()


class NestedDataset:
    """``__getitem__`` iterates an inner loader, then draws from its own ``item_rng()``."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        before = item_rng(index).random()
        inner = DataLoader(RngDataset(3), batch_size=3, seed=99)
        list(inner)
        after = item_rng().random()
        if before != after:
            raise AssertionError(f"item {index}: the inner loader changed item_rng()")
        return after


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_loader_inside_getitem_does_not_change_the_outer_items_rng(num_workers):
    loader = DataLoader(NestedDataset(), batch_size=2, num_workers=num_workers, seed=1)
    ref = np.concatenate(list(DataLoader(RngDataset(4), batch_size=2, seed=1)))
    np.testing.assert_array_equal(np.concatenate(list(loader)), ref)
    loader.close()


# -- edge cases: closing from other threads, nesting, StopIteration, thread limits ------------


def test_item_rng_outside_loader_is_not_affected_by_a_finished_epoch() -> None:
    def fresh() -> int:
        box: list[int] = []
        t = threading.Thread(target=lambda: box.append(int(item_rng(5).integers(1 << 30))))
        t.start()
        t.join()
        return box[0]

    expected = fresh()
    list(DataLoader(list(range(4)), batch_size=2, seed=123))
    assert int(item_rng(5).integers(1 << 30)) == expected
