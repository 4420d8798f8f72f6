"""DataLoader: argument rules, len(), batches and seeds (single-threaded behaviour)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dataloader.dataset import ArrayDataset
from dataloader.loader import DataLoader
from dataloader.sampler import BatchSampler, SequentialSampler
from tests._support import RangeStream

DS = ArrayDataset(np.arange(20.0).reshape(10, 2), np.arange(10))


# -- one test per argument rule -----------------------------------------------------

@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(num_workers=-1), ValueError, "num_workers"),
        (dict(num_workers=1.5), TypeError, "num_workers"),
        (dict(num_workers=True), TypeError, "num_workers"),
        (dict(batch_size=0), ValueError, "batch_size=0"),
        (dict(batch_size=-3), ValueError, "batch_size=-3"),
        (dict(batch_size=2.0), TypeError, "batch_size"),
        (dict(batch_size=True), TypeError, "batch_size"),
        (dict(timeout=-1), ValueError, "timeout"),
        (dict(timeout="1"), TypeError, "timeout"),
        (dict(prefetch_factor=2), ValueError, "prefetch_factor"),
        (dict(num_workers=2, prefetch_factor=0), ValueError, "prefetch_factor=0"),
        (dict(persistent_workers=True), ValueError, "persistent_workers"),
        (dict(prefetch_depth=-1), ValueError, "prefetch_depth=-1"),
        (dict(item_concurrency=0), ValueError, "item_concurrency=0"),
        (dict(drop_last=1), ValueError, "drop_last should be a boolean value"),  # torch's BatchSampler
        (dict(in_order=None), TypeError, "in_order"),
        (dict(shuffle=True, sampler=SequentialSampler(DS)), ValueError, "mutually exclusive with shuffle"),
        (dict(batch_sampler=[[0, 1]], batch_size=2), ValueError, "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0, 1]], shuffle=True), ValueError, "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0, 1]], sampler=[0]), ValueError, "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=[[0, 1]], drop_last=True), ValueError, "batch_sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), ValueError, "mutually exclusive with drop_last"),
        (dict(collate_fn=3), TypeError, "collate_fn"),
        (dict(worker_init_fn="x"), TypeError, "worker_init_fn"),
        (dict(transform=1), TypeError, "transform"),
        (dict(seed=-1), ValueError, "seed=-1"),
        (dict(seed=2**63), ValueError, "seed="),
        (dict(seed="a"), TypeError, "seed"),
        (dict(generator=3), TypeError, "generator"),
        (dict(seed=1, generator=np.random.default_rng(0)), ValueError, "seed or generator"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DataLoader(DS, **kwargs)


@pytest.mark.parametrize("kwargs", [dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])])
def test_iterable_dataset_rejects_sampling_options(kwargs):
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(RangeStream(5), **kwargs)


def test_dataset_without_getitem_or_iterable_base():
    with pytest.raises(TypeError, match="map-style"):
        DataLoader(object())


# -- len and batches -------------------------------------------------------------------

@pytest.mark.parametrize("n,bs,drop,expected", [(10, 3, False, 4), (10, 3, True, 3), (9, 3, True, 3), (0, 4, False, 0)])
def test_len_is_exact(n, bs, drop, expected):
    ds = ArrayDataset(np.zeros((n, 1)))
    loader = DataLoader(ds, batch_size=bs, drop_last=drop)
    assert len(loader) == expected
    assert len(list(loader)) == expected


def test_batches_are_numpy_arrays_like_torch_tensor_dataset():
    xb, yb = next(iter(DataLoader(DS, batch_size=4)))
    np.testing.assert_array_equal(xb, DS.arrays[0][:4] if hasattr(DS, "arrays") else np.arange(8.0).reshape(4, 2))
    assert xb.dtype == np.float64 and yb.dtype == DS[0][1].dtype
    assert yb.tolist() == [0, 1, 2, 3]


def test_batch_size_none_yields_items_without_batching():
    items = list(DataLoader(DS, batch_size=None))
    assert len(items) == 10
    np.testing.assert_array_equal(items[3][0], [6.0, 7.0])


def test_batch_sampler_given_as_lists():
    loader = DataLoader(DS, batch_sampler=[[0, 1], [5], [9, 8, 7]])
    assert loader.batch_size is None and loader.drop_last is False
    assert [b[1].tolist() for b in loader] == [[0, 1], [5], [9, 8, 7]]
    assert len(loader) == 3


def test_pin_memory_is_accepted_and_changes_nothing():
    a = [b[1].tolist() for b in DataLoader(DS, batch_size=3, pin_memory=True)]
    b = [b[1].tolist() for b in DataLoader(DS, batch_size=3)]
    assert a == b


def test_sampler_and_batch_sampler_attributes_like_torch():
    loader = DataLoader(DS, batch_size=4, drop_last=True)
    assert isinstance(loader.sampler, SequentialSampler)
    assert isinstance(loader.batch_sampler, BatchSampler)
    assert loader.batch_size == 4 and loader.drop_last is True


def test_custom_collate_fn_sees_per_row_items():
    seen = []

    def collate(items):
        seen.append([(item[0].tolist(), int(item[1])) for item in items])
        return len(items)

    assert list(DataLoader(DS, batch_size=4, collate_fn=collate)) == [4, 4, 2]
    assert seen[0][1] == ([2.0, 3.0], 1)


# -- seeds -------------------------------------------------------------------------------

def _order(loader):
    return [int(i) for b in loader for i in b[1]]


def test_shuffle_is_a_pure_function_of_seed_and_epoch():
    a = DataLoader(DS, batch_size=4, shuffle=True, seed=7)
    b = DataLoader(DS, batch_size=4, shuffle=True, seed=7)
    e0, e1 = _order(a), _order(a)
    assert sorted(e0) == list(range(10)) and e0 != e1
    for _ in range(3):  # b's history differs: iterate and break a few epochs first
        for _ in b:
            break
    b2 = DataLoader(DS, batch_size=4, shuffle=True, seed=7)
    assert _order(b2) == e0 and _order(b2) == e1


def test_generator_seeds_the_loader_once():
    a = DataLoader(DS, batch_size=4, shuffle=True, generator=np.random.default_rng(3))
    b = DataLoader(DS, batch_size=4, shuffle=True, generator=np.random.default_rng(3))
    assert a.seed == b.seed
    assert _order(a) == _order(b)


def test_without_seed_epochs_differ_between_loaders():
    ds = ArrayDataset(np.arange(50))
    orders = {tuple(next(iter(DataLoader(ds, batch_size=50, shuffle=True)))[0].tolist()) for _ in range(3)}
    assert len(orders) > 1


# -- edge cases: closing from other threads, nesting, StopIteration, thread limits ------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["prefetch_depth=2**62", "prefetch_factor=2**61"])
def test_huge_prefetch_raises_instead_of_aborting(option: str) -> None:
    code = (
        "from dataloader import DataLoader\n"
        "try:\n"
        f"    list(DataLoader(list(range(4)), num_workers=2, {option}))\n"
        "except (ValueError, MemoryError, OverflowError) as e:\n"
        "    print('clean', type(e).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "clean" in proc.stdout
