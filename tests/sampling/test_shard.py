"""Tests for dataloader.shard.ShardSampler: partition, determinism, env defaults, bad args."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader._native._permute import KEY_WORDS, Permutation
from dataloader.shard import ShardSampler


@pytest.fixture(autouse=True)
def _no_torchrun_env(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), num_shards=st.integers(1, 70), shuffle=st.booleans(),
       seed=st.integers(0, 2**32))
def test_shards_partition_range_exactly_once(n, num_shards, shuffle, seed):
    shards = [ShardSampler(n, num_shards, s, shuffle=shuffle, seed=seed) for s in range(num_shards)]
    seen = []
    for s, sampler in enumerate(shards):
        items = list(sampler)
        assert len(items) == len(sampler)
        assert sorted(items) == list(range(s * n // num_shards, (s + 1) * n // num_shards))
        assert all(type(i) is int for i in items)
        seen.extend(items)
    assert sorted(seen) == list(range(n))
    lengths = [len(s) for s in shards]
    assert max(lengths) - min(lengths) <= 1


@given(n=st.integers(0, 2**62), num_shards=st.integers(1, 2**20))
def test_shard_bounds_tile_huge_ranges(n, num_shards):
    shards = [ShardSampler(n, num_shards, s) for s in sorted({0, num_shards // 2, num_shards - 1})]
    assert shards[0].start == 0 and shards[-1].stop == n
    for sh in shards:
        nxt = ShardSampler(n, num_shards, sh.shard_id + 1) if sh.shard_id + 1 < num_shards else None
        assert nxt is None or nxt.start == sh.stop
        assert len(sh) in (n // num_shards, n // num_shards + 1)


def test_order_is_a_pure_function_of_seed_and_epoch():
    a = ShardSampler(1000, 3, 1, seed=5)
    b = ShardSampler(1000, 3, 1, seed=5)
    first = list(a)
    assert first == list(b)
    second = list(a)  # epoch auto-advances
    assert second != first and sorted(second) == sorted(first)
    for _ in range(3):
        list(b)
    b.set_epoch(1)  # history does not matter, only (seed, epoch)
    assert list(b) == second
    a.set_epoch(0)
    assert list(a) == first and a.epoch == 1
    assert list(ShardSampler(1000, 3, 1, seed=6)) != first


def test_permutation_matches_the_documented_generator():
    s = ShardSampler(100, 4, 2, seed=11)
    s.set_epoch(3)
    # Re-pinned for the Feistel shuffle: the shard's range permuted by the Permutation keyed
    # by the first ROUNDS draws of Generator(PCG64(SeedSequence([seed, epoch]))).
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([11, 3])))
    keys = rng.integers(0, 2**64, size=KEY_WORDS, dtype=np.uint64).tolist()
    expected = [Permutation(25, keys).index_at(p) + 50 for p in range(25)]
    assert list(s) == expected
    assert s.indices(3).tolist() == expected


def test_no_shuffle_yields_the_range_in_order():
    s = ShardSampler(10, 3, 2, shuffle=False)
    assert list(s) == [6, 7, 8, 9] and list(s) == [6, 7, 8, 9]


def test_length_from_a_dataset():
    assert len(ShardSampler([0] * 10, 2, 1)) == 5
    assert len(ShardSampler(np.int64(7), 2, 0)) == 3


def test_defaults_come_from_torchrun_env(monkeypatch):
    s = ShardSampler(10)
    assert (s.num_shards, s.shard_id, len(s)) == (1, 0, 10)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    s = ShardSampler(10, shuffle=False)
    assert (s.num_shards, s.shard_id, list(s)) == (4, 3, [7, 8, 9])
    assert ShardSampler(10, num_shards=2, shard_id=0).num_shards == 2  # explicit wins


@pytest.mark.parametrize("env, match", [
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0"),
    ({"RANK": "x"}, "RANK='x'"),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2"),
    ({"RANK": "-1"}, "RANK=-1"),
])
def test_bad_env_values(monkeypatch, env, match):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ValueError, match=match):
        ShardSampler(10)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(num_shards=0), ValueError, "num_shards=0"),
    (dict(num_shards=2, shard_id=2), ValueError, "shard_id=2"),
    (dict(num_shards=2, shard_id=-1), ValueError, "shard_id=-1"),
    (dict(seed=-1), ValueError, "seed=-1"),
    (dict(num_shards=2.0), TypeError, "num_shards"),
    (dict(num_shards=True), TypeError, "num_shards"),
    (dict(seed="0"), TypeError, "seed"),
])
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        ShardSampler(10, **kwargs)


def test_bad_lengths_and_epochs():
    with pytest.raises(ValueError, match="n=-1"):
        ShardSampler(-1)
    with pytest.raises(TypeError, match="__len__"):
        ShardSampler(object())
    with pytest.raises(ValueError, match="epoch=-1"):
        ShardSampler(5).set_epoch(-1)
    with pytest.raises(TypeError, match="epoch"):
        ShardSampler(5).set_epoch(1.5)


def test_shuffle_of_a_huge_shard_starts_at_once_within_its_range():
    s = ShardSampler(10**12, 4, 1, seed=2)
    first = list(itertools.islice(iter(s), 5000))
    assert len(set(first)) == 5000
    assert all(s.start <= i < s.stop for i in first)
    assert first != sorted(first)
