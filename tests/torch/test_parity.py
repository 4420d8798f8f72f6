"""Differential tests: the same configurations through ``torch.utils.data`` and through ours.

Runs only where torch is installed (here: /work/venvs/torch311); skipped elsewhere:
    /work/venvs/torch311/bin/python -m pytest -q tests/torch/test_parity.py

Deterministic samplers must agree exactly; random ones on lengths and index multisets (exact
draws differ by design); collation on output structure, types, shapes, dtypes and values.
"""

from __future__ import annotations

import collections
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

from dataloader import collate as ours_collate  # noqa: E402
from dataloader import dataset as ours_dataset  # noqa: E402
from dataloader import distributed as ours_distributed  # noqa: E402
from dataloader import sampler as ours_sampler  # noqa: E402

Point = collections.namedtuple("Point", ["x", "y"])


def torch_gen(seed=0):
    return torch.Generator().manual_seed(seed)


def multiplicities(xs):
    return sorted(Counter(xs).values())


# --- samplers ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 7, 64])
def test_sequential(n):
    assert list(ours_sampler.SequentialSampler(range(n))) == list(tud.SequentialSampler(range(n)))
    assert len(ours_sampler.SequentialSampler(range(n))) == len(tud.SequentialSampler(range(n)))


@pytest.mark.parametrize("replacement", [False, True])
@pytest.mark.parametrize("n, num_samples", [(10, None), (10, 3), (10, 25), (7, 70), (1, 5)])
def test_random_sampler(n, num_samples, replacement):
    t = tud.RandomSampler(range(n), replacement, num_samples, generator=torch_gen())
    o = ours_sampler.RandomSampler(range(n), replacement, num_samples, generator=0)
    t_out, o_out = list(t), list(o)
    assert len(t) == len(o) == len(t_out) == len(o_out)
    assert all(0 <= i < n for i in o_out)
    if not replacement:
        assert multiplicities(t_out) == multiplicities(o_out)
        if len(o) >= n:
            assert set(t_out) == set(o_out) == set(range(n))


@pytest.mark.parametrize(
    "kwargs",
    [{"replacement": 1}, {"num_samples": 0}, {"num_samples": -2}, {"num_samples": 1.5}],
)
def test_random_sampler_errors(kwargs):
    with pytest.raises(Exception) as t_err:
        tud.RandomSampler(range(4), **kwargs)
    with pytest.raises(t_err.type):
        ours_sampler.RandomSampler(range(4), **kwargs)


def test_random_sampler_empty_dataset():
    with pytest.raises(ValueError, match="num_samples=0") as t_err:
        tud.RandomSampler([])
    with pytest.raises(ValueError, match=str(t_err.value)):
        ours_sampler.RandomSampler([])


def test_subset_random_sampler():
    idx = [3, 9, 27, 81]
    t = list(tud.SubsetRandomSampler(idx, generator=torch_gen()))
    o = list(ours_sampler.SubsetRandomSampler(idx, generator=0))
    assert sorted(t) == sorted(o) and len(t) == len(o)


@pytest.mark.parametrize("replacement", [True, False])
def test_weighted_sampler(replacement):
    w = [0.0, 2.0, 0.5, 0.0, 1.0]
    t = tud.WeightedRandomSampler(w, 3, replacement, generator=torch_gen())
    o = ours_sampler.WeightedRandomSampler(w, 3, replacement, generator=0)
    t_out, o_out = list(t), list(o)
    assert len(t) == len(o) == len(o_out) == len(t_out) == 3
    assert not {0, 3} & set(o_out)
    if not replacement:
        assert sorted(t_out) == sorted(o_out) == [1, 2, 4]


@pytest.mark.parametrize(
    "args",
    [([1.0, 2.0], 0), ([1.0, 2.0], True), ([1.0], -1), ([[1.0, 2.0]], 2)],
)
def test_weighted_sampler_errors(args):
    with pytest.raises(Exception) as t_err:
        tud.WeightedRandomSampler(*args)
    with pytest.raises(t_err.type):
        ours_sampler.WeightedRandomSampler(*args)


@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 100])
@pytest.mark.parametrize("bs", [1, 3, 10, 128])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler(n, bs, drop_last):
    t = tud.BatchSampler(tud.SequentialSampler(range(n)), bs, drop_last)
    o = ours_sampler.BatchSampler(ours_sampler.SequentialSampler(range(n)), bs, drop_last)
    assert len(t) == len(o)
    assert list(t) == list(o) == [a.tolist() for a in o._index_arrays()]


@pytest.mark.parametrize(
    "bs, drop_last", [(0, False), (-1, False), (True, False), (2.0, False), (2, 1), (2, None)]
)
def test_batch_sampler_errors(bs, drop_last):
    with pytest.raises(Exception) as t_err:
        tud.BatchSampler(range(4), bs, drop_last)
    with pytest.raises(t_err.type, match=str(t_err.value).split(",")[0]):
        ours_sampler.BatchSampler(range(4), bs, drop_last)


@pytest.mark.parametrize("n", [0, 1, 2, 9, 10, 11, 103])
@pytest.mark.parametrize("replicas", [1, 2, 3, 4, 16])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_unshuffled_exact(n, replicas, drop_last):
    for rank in range(replicas):
        t = tud.DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        o = ours_distributed.DistributedSampler(
            range(n), replicas, rank, shuffle=False, drop_last=drop_last
        )
        assert (len(t), t.num_samples, t.total_size) == (len(o), o.num_samples, o.total_size)
        assert list(t) == list(o)


@pytest.mark.parametrize("n", [1, 10, 11, 103])
@pytest.mark.parametrize("replicas", [2, 3, 16])
@pytest.mark.parametrize("drop_last", [False, True])
def test_distributed_shuffled_properties(n, replicas, drop_last):
    t_all, o_all = [], []
    for rank in range(replicas):
        t = tud.DistributedSampler(range(n), replicas, rank, seed=5, drop_last=drop_last)
        o = ours_distributed.DistributedSampler(
            range(n), replicas, rank, seed=5, drop_last=drop_last
        )
        t.set_epoch(2)
        o.set_epoch(2)
        t_out, o_out = list(t), list(o)
        assert len(t_out) == len(o_out) == len(t) == len(o)
        t_all += t_out
        o_all += o_out
    assert multiplicities(t_all) == multiplicities(o_all)
    assert len(set(t_all)) == len(set(o_all))


def test_distributed_bad_rank():
    with pytest.raises(ValueError, match="Invalid rank 3") as t_err:
        tud.DistributedSampler(range(4), 3, 3)
    with pytest.raises(ValueError, match=str(t_err.value).replace("[", r"\[").replace("]", r"\]")):
        ours_distributed.DistributedSampler(range(4), 3, 3)


# --- collate -------------------------------------------------------------------------------


def same(ours, theirs, where="batch"):
    """Assert that our collated output mirrors torch's (tensor <-> ndarray)."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, np.ndarray), f"{where}: {type(ours)}"
        expected = theirs.numpy()
        assert ours.dtype == expected.dtype, f"{where}: {ours.dtype} != {expected.dtype}"
        assert ours.shape == expected.shape, f"{where}: {ours.shape} != {expected.shape}"
        np.testing.assert_array_equal(ours, expected)
        return
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(theirs, collections.abc.Mapping):
        assert list(ours) == list(theirs)
        for k in theirs:
            same(ours[k], theirs[k], f"{where}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs)
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, where


BATCHES = {
    "f32 arrays": [np.ones((3, 2), np.float32), np.zeros((3, 2), np.float32)],
    "u8 images": [np.full((4, 4, 3), i, np.uint8) for i in range(3)],
    "0-d arrays": [np.array(1.5), np.array(2.5)],
    "np f32 scalars": [np.float32(1), np.float32(2)],
    "np bool scalars": [np.bool_(True), np.bool_(False)],
    "np int16 scalars": [np.int16(1), np.int16(2)],
    "floats": [1.5, 2.5],
    "ints": [1, 2, 3],
    "bools": [True, False],
    "int then float": [1, 2.5],
    "int then bool": [1, True],
    "strings": ["a", "b"],
    "bytes": [b"a", b"b"],
    "tuples": [(np.zeros(2), 1, "a"), (np.ones(2), 2, "b")],
    "lists": [[0, 1], [2, 3]],
    "dicts": [
        {"x": np.zeros(2, np.float32), "y": 1, "s": "a"},
        {"x": np.ones(2, np.float32), "y": 2, "s": "b"},
    ],
    "nested": [{"a": [(1, 2.0), (3, 4.0)], "b": {"c": np.int8(1)}}] * 3,
    "namedtuples": [Point(1, np.zeros(3)), Point(2, np.ones(3))],
    "ordered dicts": [collections.OrderedDict(b=1, a=2)] * 2,
    "defaultdicts": [collections.defaultdict(list, k=1.0)] * 2,
    "ranges": [range(2), range(2)],
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_default_collate(name):
    batch = BATCHES[name]
    same(ours_collate.default_collate(batch), tud.default_collate(batch))


ERROR_BATCHES = {
    "none": [None, None],
    "ragged lists": [[1, 2], [1]],
    "ragged in dict": [{"x": [1, 2]}, {"x": [1]}],
    "array shapes": [np.zeros(2), np.zeros(3)],
    "missing key": [{"a": 1, "b": 2}, {"a": 1}],
    "string arrays": [np.array(["a"]), np.array(["b"])],
    "object arrays": [np.array([None], dtype=object)] * 2,
    "objects": [object(), object()],
    "int overflow": [2**70, 1],
}


@pytest.mark.parametrize("name", list(ERROR_BATCHES))
def test_default_collate_error_types(name):
    batch = ERROR_BATCHES[name]
    with pytest.raises(Exception) as t_err:
        tud.default_collate(batch)
    with pytest.raises(t_err.type):
        ours_collate.default_collate(batch)


def test_batched_items_collates_like_torch_rows():
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    y = np.array([3, 1, 4, 1])
    items = ours_dataset.BatchedItems((x, y))
    same(ours_collate.default_collate(items), tud.default_collate(list(items)))


@pytest.mark.parametrize(
    "data",
    [
        np.zeros(3, np.float32),
        np.float32(2.0),
        1,
        2.5,
        "s",
        (np.int8(1), 2),
        [np.zeros(2)],
        {"k": np.float64(1)},
        Point(np.int16(1), "a"),
    ],
)
def test_default_convert(data):
    same(ours_collate.default_convert(data), tud.default_convert(data))


# --- datasets ------------------------------------------------------------------------------


def test_array_dataset_matches_tensor_dataset_through_torchs_loader():
    """Our ArrayDataset inside torch's own DataLoader: __getitems__ -> BatchedItems works."""
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    y = np.arange(10)
    ours = tud.DataLoader(ours_dataset.ArrayDataset(x, y), batch_size=4)
    theirs = tud.DataLoader(
        tud.TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=4
    )
    for a, b in zip(ours, theirs, strict=True):
        for ta, tb in zip(a, b, strict=True):
            assert ta.dtype == tb.dtype and torch.equal(ta, tb)
    sampler = ours_sampler.BatchSampler(ours_sampler.SequentialSampler(range(10)), 4, False)
    ds = ours_dataset.ArrayDataset(x, y)
    for idx, b in zip(sampler._index_arrays(), theirs, strict=True):
        same(ours_collate.default_collate(ds.__getitems__(idx)), b)


def test_concat_dataset_rules():
    parts = [list(range(2)), [], list(range(10, 13))]
    t = tud.ConcatDataset(parts)
    o = ours_dataset.ConcatDataset(parts)
    assert t.cumulative_sizes == o.cumulative_sizes and len(t) == len(o)
    assert [t[i] for i in range(-5, 5)] == [o[i] for i in range(-5, 5)]
    for bad in (-6, 5):
        with pytest.raises(Exception) as t_err:
            t[bad]
        with pytest.raises(t_err.type):
            o[bad]


@pytest.mark.parametrize(
    "n, lengths",
    [
        (10, [0.3, 0.3, 0.4]),
        (11, [0.5, 0.5]),
        (7, [0.2] * 5),
        (30, [0.25, 0.25, 0.5]),
        (10, [3, 7]),
        (5, [1, 1, 3]),
    ],
)
def test_random_split_lengths(n, lengths):
    t = tud.random_split(range(n), lengths, generator=torch_gen())
    o = ours_dataset.random_split(range(n), lengths, generator=0)
    assert [len(p) for p in t] == [len(p) for p in o]
    assert sorted(i for p in o for i in p) == list(range(n))


def test_random_split_bad_sum():
    with pytest.raises(ValueError, match="Sum of input lengths") as t_err:
        tud.random_split(range(5), [2, 2], generator=torch_gen())
    with pytest.raises(t_err.type, match="Sum of input lengths"):
        ours_dataset.random_split(range(5), [2, 2], generator=0)


def test_subset_and_dataset_add():
    base = list(range(100, 110))
    assert [tud.Subset(base, [3, 1])[i] for i in range(2)] == [
        ours_dataset.Subset(base, [3, 1])[i] for i in range(2)
    ]
    assert len(ours_dataset.Subset(base, range(0, 10, 3))) == len(tud.Subset(base, range(0, 10, 3)))
    both = ours_dataset.Subset(base, [0]) + ours_dataset.Subset(base, [9])
    theirs = tud.Subset(base, [0]) + tud.Subset(base, [9])
    assert [both[0], both[1]] == [theirs[0], theirs[1]]
