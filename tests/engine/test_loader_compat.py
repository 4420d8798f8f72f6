"""PyTorch compatibility of ``DataLoader`` over map-style datasets.

``len()`` is exact for every sampler and batching mode (PyTorch's rules: the
batch sampler's length, or the sampler's with ``batch_size=None``); the loader
yields the sampler's order; ``batch_size=None`` converts single items with
``default_convert``; empty datasets give empty epochs; ``timeout`` raises
``TimeoutError`` with workers and has no effect without them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter

import numpy as np
import pytest

from tests._support import collect
from dataloader import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10
N = 17


class Items:
    """Item ``i`` is ``(float32 array [i, -i], i)``; records nothing, thread-safe."""

    def __init__(self, n=N):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(index)
        return np.array([index, -index], dtype=np.float32), int(index)


SAMPLERS = {
    "sequential": lambda ds: SequentialSampler(ds),
    "random": lambda ds: RandomSampler(ds, generator=1),
    "random-fewer": lambda ds: RandomSampler(ds, num_samples=7, generator=1),
    "random-more": lambda ds: RandomSampler(ds, num_samples=40, generator=1),
    "random-replacement": lambda ds: RandomSampler(
        ds, replacement=True, num_samples=25, generator=1
    ),
    "subset-random": lambda ds: SubsetRandomSampler([1, 4, 9, 16, 3], generator=1),
    "weighted": lambda ds: WeightedRandomSampler(np.arange(len(ds)) + 1.0, 13, generator=1),
    "weighted-no-replacement": lambda ds: WeightedRandomSampler(
        np.arange(len(ds)) + 1.0, 9, replacement=False, generator=1
    ),
    "distributed": lambda ds: DistributedSampler(ds, num_replicas=3, rank=2, seed=1),
    "distributed-drop-last": lambda ds: DistributedSampler(
        ds, num_replicas=3, rank=2, seed=1, drop_last=True
    ),
    "distributed-unshuffled": lambda ds: DistributedSampler(
        ds, num_replicas=4, rank=1, shuffle=False
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize(
    "batch_size, drop_last", [(None, False), (1, False), (4, False), (4, True), (40, True)]
)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_len_is_exact_and_batches_follow_the_sampler(name, batch_size, drop_last, num_workers):
    ds = Items()
    sampler = SAMPLERS[name](ds)
    expected_order = list(SAMPLERS[name](ds))  # an identical sampler's first epoch
    loader = DataLoader(
        ds, batch_size=batch_size, drop_last=drop_last, sampler=sampler, num_workers=num_workers
    )
    n = len(sampler)
    if batch_size is None:
        expected_len = n
    else:
        expected_len = n // batch_size if drop_last else math.ceil(n / batch_size)
    assert len(loader) == expected_len
    batches = list(loader)
    assert len(batches) == expected_len
    if batch_size is None:
        order = [item[1] for item in batches]
        assert all(isinstance(item, list) and item[0].shape == (2,) for item in batches)
    else:
        order = [int(i) for b in batches for i in b[1]]
        assert all(b[0].dtype == np.float32 and b[0].shape == (len(b[1]), 2) for b in batches)
        assert all(b[1].dtype == np.int64 for b in batches)
    keep = expected_len * batch_size if batch_size is not None and drop_last else n
    assert order == expected_order[:keep]
    loader.close()


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_batch_sampler_object_sets_len_and_batches(drop_last, num_workers):
    ds = Items()
    batch_sampler = BatchSampler(RandomSampler(ds, generator=5), 5, drop_last)
    expected = list(BatchSampler(RandomSampler(ds, generator=5), 5, drop_last))
    loader = DataLoader(ds, batch_sampler=batch_sampler, num_workers=num_workers)
    assert len(loader) == len(batch_sampler) == (3 if drop_last else 4)
    assert [b[1].tolist() for b in loader] == expected
    loader.close()


class BucketsNoLen:
    """A custom batch sampler yielding index lists of varying size, without ``__len__``."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter([list(b) for b in self.batches])


class Buckets(BucketsNoLen):
    def __len__(self):
        return len(self.batches)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_custom_batch_sampler_yielding_index_lists(num_workers):
    batches = [[3], [0, 1, 2, 4, 5], [16, 15], [7, 7, 7]]
    loader = DataLoader(Items(), batch_sampler=Buckets(batches), num_workers=num_workers)
    assert len(loader) == 4
    out = list(loader)
    assert [b[1].tolist() for b in out] == batches
    assert [b[0].shape for b in out] == [(1, 2), (5, 2), (2, 2), (3, 2)]
    no_len = DataLoader(Items(), batch_sampler=BucketsNoLen(batches), num_workers=num_workers)
    with pytest.raises(TypeError):
        len(no_len)
    assert [b[1].tolist() for b in no_len] == batches
    loader.close()
    no_len.close()


def test_batch_size_none_converts_each_item_with_default_convert():
    class Scalars:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {"x": np.float32(i), "y": (np.int64(i), "s"), "z": np.arange(i + 1)}

    items = list(DataLoader(Scalars(), batch_size=None))
    assert len(items) == 3
    item = items[2]
    assert (
        isinstance(item["x"], np.ndarray)
        and item["x"].shape == ()
        and item["x"].dtype == np.float32
    )
    assert isinstance(item["y"], list) and item["y"][1] == "s"  # tuples become lists, like torch
    assert item["y"][0].dtype == np.int64 and item["y"][0].shape == ()
    assert item["z"].tolist() == [0, 1, 2]


def test_batch_size_none_rejects_drop_last_like_torch():
    with pytest.raises(ValueError, match="batch_size=None option disables auto-batching"):
        DataLoader(Items(), batch_size=None, drop_last=True)


def test_batch_size_none_with_a_custom_collate_fn_sees_single_items():
    seen = []

    def collate(item):
        seen.append(item)
        return item[1]

    assert list(DataLoader(Items(4), batch_size=None, collate_fn=collate)) == [0, 1, 2, 3]
    assert all(isinstance(item, tuple) for item in seen)


# -- empty datasets ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize(
    "batch_size, drop_last", [(None, False), (1, False), (3, False), (3, True)]
)
def test_empty_map_dataset_has_len_0_and_empty_epochs(num_workers, batch_size, drop_last):
    loader = DataLoader(
        Items(0), batch_size=batch_size, drop_last=drop_last, num_workers=num_workers
    )
    assert len(loader) == 0
    for _ in range(3):
        it = iter(loader)
        assert len(it) == 0
        assert list(it) == []
    loader.close()


def test_random_sampler_on_an_empty_dataset_raises_at_construction_like_torch():
    with pytest.raises(ValueError, match="num_samples"):
        RandomSampler(Items(0))
    with pytest.raises(ValueError, match="num_samples"):
        DataLoader(Items(0), shuffle=True)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_empty_subset_sampler_gives_an_empty_epoch(num_workers):
    loader = DataLoader(
        Items(), sampler=SubsetRandomSampler([], generator=0), num_workers=num_workers
    )
    assert len(loader) == 0 and list(loader) == []
    loader.close()


# -- timeout ------------------------------------------------------------------------------


class Held:
    """Item 0 waits until ``release`` is set."""

    def __init__(self, n):
        self.n = n
        self.release = threading.Event()

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index == 0 and not self.release.wait(WAIT_S):
            raise RuntimeError("never released")
        return index


@pytest.mark.parametrize("batch_size", [None, 2])
def test_slow_batch_beyond_timeout_with_workers_raises_timeout_error_naming_it(batch_size):
    ds = Held(6)
    loader = DataLoader(ds, batch_size=batch_size, num_workers=2, timeout=0.05)
    it = iter(loader)
    with pytest.raises(TimeoutError, match=r"batch 0 .*timeout=0\.05"):
        next(it)
    ds.release.set()
    out = [b.tolist() if isinstance(b, np.ndarray) else b for b in it]
    expected = [0, 1, 2, 3, 4, 5] if batch_size is None else [[0, 1], [2, 3], [4, 5]]
    assert out == expected  # the epoch goes on after a timeout
    loader.close()


def test_timeout_out_of_order_names_the_next_batch():
    ds = Held(6)
    loader = DataLoader(ds, batch_size=2, num_workers=1, timeout=0.05, in_order=False)
    try:
        it = iter(loader)
        with pytest.raises(TimeoutError, match=r"batch 0\b"):
            next(it)
    finally:
        ds.release.set()
        loader.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_timeout_never_raises_assertion_error_and_fast_batches_pass(num_workers):
    loader = DataLoader(Items(), batch_size=4, num_workers=num_workers, timeout=5)
    assert len(collect(loader)) == 5
    assert all(kind == "batch" for kind, _ in collect(loader))
    loader.close()


def test_timeout_without_workers_has_no_effect():
    """torch fails with an AssertionError here; the documented intent (no effect) is kept."""

    class Slow(Items):
        def __getitem__(self, index):
            time.sleep(0.02)
            return super().__getitem__(index)

    loader = DataLoader(Slow(6), batch_size=3, timeout=0.001)
    assert [b[1].tolist() for b in loader] == [[0, 1, 2], [3, 4, 5]]


# -- sampler multisets across epochs ----------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_shuffle_covers_every_index_once_per_epoch_in_a_new_order(num_workers):
    loader = DataLoader(Items(), batch_size=5, shuffle=True, num_workers=num_workers, seed=9)
    epochs = [[int(i) for b in loader for i in b[1]] for _ in range(3)]
    assert all(Counter(e) == Counter(range(N)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3
    loader.close()
