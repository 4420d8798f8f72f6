"""DistributedSampler: PyTorch's padding / drop_last layout, lengths, seeding and defaults."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader._native._permute import KEY_WORDS, Permutation
from dataloader.distributed import DistributedSampler
from dataloader.sampler import BatchSampler

FAST = settings(max_examples=80, deadline=None)


def documented_order(n, seed, epoch):
    """The documented shuffle: a Permutation keyed by SeedSequence([seed, epoch])'s draws."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))
    keys = rng.integers(0, 2**64, size=KEY_WORDS, dtype=np.uint64).tolist()
    return Permutation(n, keys).fill(0, np.empty(n, dtype=np.int64))


def torch_layout(n, replicas, rank, drop_last, order=None):
    """PyTorch's algorithm, step by step, over a given epoch order (default 0..n-1)."""
    indices = list(range(n)) if order is None else list(order)
    if drop_last and n % replicas != 0:
        num_samples = math.ceil((n - replicas) / replicas)
    else:
        num_samples = math.ceil(n / replicas)
    total = num_samples * replicas
    if not drop_last:
        pad = total - len(indices)
        if pad <= len(indices):
            indices += indices[:pad]
        else:
            indices += (indices * math.ceil(pad / len(indices)))[:pad]
    else:
        indices = indices[:total]
    return indices[rank:total:replicas]


@pytest.mark.parametrize(
    "n, replicas, drop_last, expected",
    [
        (10, 3, False, [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]),
        (10, 3, True, [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),
        (9, 3, True, [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),
        (2, 5, False, [[0], [1], [0], [1], [0]]),
        (2, 5, True, [[], [], [], [], []]),
        (1, 3, False, [[0], [0], [0]]),
        (0, 2, False, [[], []]),
        (7, 1, False, [list(range(7))]),
    ],
)
def test_unshuffled_layout_is_torchs(n, replicas, drop_last, expected):
    got = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        out = list(s)
        assert len(s) == len(out) == s.num_samples
        got.append(out)
    assert got == expected


@FAST
@given(n=st.integers(0, 200), replicas=st.integers(1, 12), drop_last=st.booleans())
def test_lengths_and_layout_match_torch_formulas(n, replicas, drop_last):
    for rank in range(replicas):
        s = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        if drop_last and n % replicas:
            assert s.num_samples == math.ceil((n - replicas) / replicas)
        else:
            assert s.num_samples == math.ceil(n / replicas)
        assert s.total_size == s.num_samples * replicas
        assert list(s) == torch_layout(n, replicas, rank, drop_last)


@FAST
@given(
    n=st.integers(1, 200),
    replicas=st.integers(1, 9),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**31),
    epoch=st.integers(0, 50),
)
def test_shuffled_layout_is_torchs_over_our_permutation(n, replicas, drop_last, seed, epoch):
    order = documented_order(n, seed, epoch).tolist()
    shares = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), replicas, rank, seed=seed, drop_last=drop_last)
        s.set_epoch(epoch)
        out = list(s)
        assert out == torch_layout(n, replicas, rank, drop_last, order)
        shares.extend(out)
    counts = Counter(shares)
    if drop_last:
        assert all(c == 1 for c in counts.values())
        assert len(counts) == n - n % replicas if n >= replicas else len(counts) == 0
    else:
        assert set(counts) == set(range(n))


def test_epoch_changes_only_through_set_epoch():
    s = DistributedSampler(range(100), 2, 0, seed=3)
    e0 = list(s)
    assert list(s) == e0  # PyTorch: no auto-increment
    s.set_epoch(1)
    e1 = list(s)
    assert e1 != e0
    s.set_epoch(0)
    assert list(s) == e0
    assert list(DistributedSampler(range(100), 2, 0, seed=4)) != e0


def test_ranks_share_one_permutation():
    a = list(DistributedSampler(range(50), 2, 0, seed=9))
    b = list(DistributedSampler(range(50), 2, 1, seed=9))
    assert sorted(a + b) == list(range(50))


def test_env_defaults(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    s = DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (1, 0, list(range(10)))
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    s = DistributedSampler(range(10), shuffle=False)
    assert (s.num_replicas, s.rank, list(s)) == (4, 3, [3, 7, 1])
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(ValueError, match="RANK='x' is not an integer"):
        DistributedSampler(range(10))
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="Invalid rank 4"):
        DistributedSampler(range(10))


@pytest.mark.parametrize(
    "kwargs, err, text",
    [
        (
            {"num_replicas": 2, "rank": 2},
            ValueError,
            r"Invalid rank 2, rank should be in the interval \[0, 1\]",
        ),
        ({"num_replicas": 2, "rank": -1}, ValueError, "Invalid rank -1"),
        ({"num_replicas": 0, "rank": 0}, ValueError, "num_replicas=0 must be >= 1"),
        ({"num_replicas": 2.0, "rank": 0}, TypeError, "num_replicas must be an int"),
        ({"num_replicas": 2, "rank": "0"}, TypeError, "rank must be an int"),
        ({"num_replicas": 2, "rank": 0, "seed": -1}, ValueError, "seed=-1 must be >= 0"),
        ({"num_replicas": 2, "rank": 0, "seed": 1.5}, TypeError, "seed must be an int"),
    ],
)
def test_validation(kwargs, err, text):
    with pytest.raises(err, match=text):
        DistributedSampler(range(10), **kwargs)


def test_set_epoch_validation():
    s = DistributedSampler(range(10), 1, 0)
    with pytest.raises(ValueError, match="epoch=-2"):
        s.set_epoch(-2)


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_index_arrays_fast_path_matches_iter(shuffle, drop_last):
    for rank in range(3):
        s = DistributedSampler(range(200_003), 3, rank, shuffle=shuffle, drop_last=drop_last)
        b = BatchSampler(s, 1000, drop_last=False)
        arrays = [a.tolist() for a in b._index_arrays()]
        assert arrays == list(b)
        assert sum(map(len, arrays)) == len(s)


def test_dataset_size_change_is_value_error():
    data = list(range(10))
    s = DistributedSampler(data, 2, 0, shuffle=False)
    data.pop()
    with pytest.raises(ValueError, match="changed from 10 to 9"):
        iter(s)


def test_shuffle_of_a_huge_dataset_starts_at_once_with_disjoint_ranks():
    n, replicas = 10**12, 4
    firsts = []
    for rank in range(replicas):
        s = DistributedSampler(range(n), replicas, rank, seed=3)
        s.set_epoch(2)
        firsts.append(list(itertools.islice(iter(s), 2000)))
    ids = [i for first in firsts for i in first]
    assert len(set(ids)) == len(ids) == 2000 * replicas
    assert all(0 <= i < n for i in ids)
    order = DistributedSampler(range(n), 1, 0, seed=3)
    order.set_epoch(2)
    head = list(itertools.islice(iter(order), 8))
    assert [firsts[p % replicas][p // replicas] for p in range(8)] == head
