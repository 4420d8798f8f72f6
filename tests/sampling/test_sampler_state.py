"""Sampler ``state_dict`` / ``load_state_dict``: the next ``__iter__`` starts at ``start``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataloader.distributed import DistributedSampler
from dataloader.sampler import (
    BatchSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from dataloader.shard import ShardSampler

MAKERS = {
    "sequential": lambda: SequentialSampler(range(23)),
    "random": lambda: RandomSampler(range(23), generator=3),
    "random-passes": lambda: RandomSampler(range(10), num_samples=27, generator=3),
    "random-replacement": lambda: RandomSampler(range(10), replacement=True, num_samples=27, generator=3),
    "random-generator": lambda: RandomSampler(range(23), generator=np.random.default_rng(8)),
    "subset": lambda: SubsetRandomSampler(list(range(5, 30)), generator=4),
    "weighted": lambda: WeightedRandomSampler([1, 2, 3, 0, 5], 17, generator=1),
    "weighted-distinct": lambda: WeightedRandomSampler([1, 2, 3, 0, 5], 3, replacement=False, generator=1),
    "distributed": lambda: DistributedSampler(range(23), 3, 1, seed=2),
    "shard": lambda: ShardSampler(23, 3, 1, seed=5),
    "shard-ordered": lambda: ShardSampler(23, 3, 1, shuffle=False),
}


@pytest.mark.parametrize("name", MAKERS)
@pytest.mark.parametrize("start", [0, 1, 7, 10, 100])
def test_a_loaded_start_skips_that_many_positions_of_the_same_iteration(name, start):
    make = MAKERS[name]
    saved = make()
    sd = json.loads(json.dumps({**saved.state_dict(), "start": start}))
    full = list(saved)
    again = make()
    again.load_state_dict(sd)
    assert list(again) == full[start:]
    assert list(again) == list(saved)  # only one iteration starts late; the epochs go on alike


@pytest.mark.parametrize("name", MAKERS)
@pytest.mark.parametrize("start", [0, 2, 5])
def test_batch_sampler_starts_at_a_batch_on_both_paths(name, start):
    make = MAKERS[name]
    full = list(BatchSampler(make(), 4, False))
    sd = {**BatchSampler(make(), 4, False).state_dict(), "start": start}
    for arrays in (False, True):
        again = BatchSampler(make(), 4, False)
        again.load_state_dict(sd)
        got = [a.tolist() for a in again._index_arrays()] if arrays else list(again)
        assert got == full[start:]


def test_batch_sampler_over_a_plain_iterable_draws_and_drops():
    batches = BatchSampler([4, 2, 9, 1, 7, 5, 3], 2, True)
    batches.load_state_dict({"sampler": None, "start": 2})
    assert list(batches) == [[7, 5]]
    assert list(batches) == [[4, 2], [9, 1], [7, 5]]


def test_the_state_names_the_epoch_of_the_next_iteration():
    sampler = RandomSampler(range(5), generator=1)
    list(sampler)
    assert sampler.state_dict() == {"start": 0, "epoch": 1}
    dist = DistributedSampler(range(5), 1, 0)
    dist.set_epoch(4)
    assert dist.state_dict() == {"start": 0, "epoch": 4}
    assert SequentialSampler(range(5)).state_dict() == {"start": 0}


@pytest.mark.parametrize(
    ("sd", "error", "match"),
    [
        ([0], TypeError, "RandomSampler state must be a dict, got list"),
        ({"start": 0}, ValueError, "missing key 'epoch'"),
        ({"start": 0, "epoch": 0, "x": 1}, ValueError, "unknown key 'x'"),
        ({"start": -1, "epoch": 0}, ValueError, "'start'=-1 must be >= 0"),
        ({"start": 0, "epoch": "a"}, TypeError, "'epoch' must be an int"),
        ({"start": 0, "epoch": 0, "bit_generator": {}}, ValueError, "unknown key 'bit_generator'"),
    ],
)
def test_load_state_dict_names_the_bad_key(sd, error, match):
    with pytest.raises(error, match=match):
        RandomSampler(range(5), generator=1).load_state_dict(sd)


def test_a_bad_generator_state_is_a_value_error():
    sampler = RandomSampler(range(5), generator=np.random.default_rng(0))
    with pytest.raises(ValueError, match="'bit_generator' is not a valid generator state"):
        sampler.load_state_dict({"start": 0, "epoch": 0, "bit_generator": {"state": 1}})


def test_an_unseeded_sampler_has_no_state():
    with pytest.raises(ValueError, match="generator=None"):
        RandomSampler(range(5)).state_dict()
