"""The loader's native batch path: an ``ArrayDataset`` collated by ``default_collate`` is built
from ``take_columns`` without a ``BatchedItems`` in between (``_engine/native.py``,
``GatherFetcher``).  Its batches must be exactly those of the general path
(``__getitems__`` + ``default_collate``), and it must step aside whenever that path would differ.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._support import collect
from dataloader import ArrayDataset, DataLoader, item_rng
from dataloader._collation import default as default_module
from dataloader._engine.build import BuilderKind
from dataloader._engine.builders import MapBuild, map_builder
from dataloader.collate import default_collate

N = 40


def _fetcher(dataset, **kw):
    args = dict(auto_collation=True, collate_fn=default_collate, transform=None, lanes=None,
                item_concurrency=1, workers=False)
    args.update(kw)
    return map_builder(MapBuild(dataset, **args), (0, 0))[0]


def _native(fetch):
    return fetch.kind is BuilderKind.NATIVE_GATHER


class SubArrays(ArrayDataset):
    def __getitems__(self, indices, out=None):
        batch = super().__getitems__(indices, out)
        return type(batch)(tuple(c * 0 for c in batch.columns))


def test_native_path_is_taken_only_where_it_gives_the_general_paths_batches():
    ds = ArrayDataset(np.zeros((N, 2)))
    assert _native(_fetcher(ds))
    assert not _native(_fetcher(SubArrays(np.zeros((N, 2)))))  # its own __getitems__ must run
    assert not _native(_fetcher(ds, transform=lambda item: item))
    assert not _native(_fetcher(ds, collate_fn=lambda items: default_collate(items)))
    assert not _native(_fetcher(ds, item_concurrency=2))
    assert not _native(_fetcher(ds, auto_collation=False))


COLUMNS = {
    "f64 and int64": lambda: (np.arange(N * 3, dtype=np.float64).reshape(N, 3), np.arange(N) * 7),
    "int8 (N, 2, 2) and bool": lambda: (
        np.arange(N * 4, dtype=np.int8).reshape(N, 2, 2), np.arange(N) % 3 == 0
    ),
    "structured": lambda: (np.array([(i, i / 2) for i in range(N)], dtype=[("a", "<i4"), ("b", "<f8")]),),
    "strided (not native)": lambda: (np.arange(N * 4.0).reshape(N, 4)[:, ::2], np.arange(N)),
}


def _same(got, expected):
    assert type(got) is type(expected)
    if isinstance(expected, list):
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _same(g, e)
    else:
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype
        assert got.shape == expected.shape and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("make", COLUMNS.values(), ids=list(COLUMNS))
def test_batches_equal_getitems_then_default_collate(make):
    columns = make()
    ds = ArrayDataset(*columns)
    loader = DataLoader(ds, batch_size=7, shuffle=True, seed=3)
    reference = DataLoader(ds, batch_size=7, shuffle=True, seed=3, collate_fn=lambda b: default_collate(b))
    got, expected = collect(loader), collect(reference)  # batches, or errors (a structured
    assert len(got) == len(expected) == -(-N // 7)       # dtype's rows do not collate)
    for (kind, g), (expected_kind, e) in zip(got, expected, strict=True):
        assert kind == expected_kind
        if kind == "error":
            assert g == e
        else:
            _same(g, e)


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_are_the_samplers_rows_in_its_order(shuffle):
    x = np.random.default_rng(0).standard_normal((N, 5))
    ids = np.arange(N, dtype=np.int64)
    loader = DataLoader(ArrayDataset(x, ids), batch_size=6, shuffle=shuffle, seed=11)
    batches = list(loader)
    order = np.concatenate([b[1] for b in batches])
    assert sorted(order.tolist()) == list(range(N))
    assert (order.tolist() == list(range(N))) is not shuffle
    for xs, idx in batches:
        assert xs.flags.c_contiguous and xs.tobytes() == x[idx].tobytes()


def test_a_changed_collate_map_is_honoured(monkeypatch):
    calls = []

    def arrays(batch, *, collate_fn_map=None):
        calls.append(len(batch))
        return np.stack(batch) + 1

    monkeypatch.setitem(default_module.default_collate_fn_map, np.ndarray, arrays)
    x = np.arange(N * 2.0).reshape(N, 2)
    (batch,) = list(DataLoader(ArrayDataset(x), batch_size=N))
    assert calls == [N]
    assert np.array_equal(batch[0], x + 1)


def test_bad_index_from_a_batch_sampler_is_raised_for_its_batch():
    ds = ArrayDataset(np.zeros((N, 2)))
    loader = DataLoader(ds, batch_sampler=[[0, 1], [2, N], [3]])
    it = iter(loader)
    assert len(next(it)[0]) == 2
    with pytest.raises(IndexError, match=f"index {N} is out of bounds for axis 0 with size {N}"):
        next(it)
    assert len(next(it)[0]) == 1


def test_item_rng_epoch_is_bound_during_a_native_batch_and_restored_after():
    # A collate_fn-free native batch still runs inside Builder.build: the thread's epoch
    # key is set there and restored afterwards (nothing of it stays on the consumer thread).
    ds = ArrayDataset(np.zeros((N, 1)))
    list(DataLoader(ds, batch_size=8, seed=5))
    with pytest.raises(RuntimeError, match="item_rng"):
        item_rng()
