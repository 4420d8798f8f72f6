"""``load_state_dict`` refuses positions this loader cannot have.

A state records how its loader cut the epoch (``"loader"``: dataset length, batch size,
``drop_last``, sampler kinds, world size and rank of a distributed sampler); a mismatch
raises ``ValueError`` naming both values, and a ``yielded`` past the end of this loader's
epoch is refused whatever the state's version.  Before, a 100-row state loaded into a
10-row loader gave an empty epoch, ``batch_size=8`` into ``16`` resumed at row 80 (40 rows
never seen) and ``yielded=10**9`` loaded and yielded nothing.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader.distributed import DistributedSampler
from dataloader.sampler import BatchSampler, RandomSampler, SequentialSampler, SubsetRandomSampler
from dataloader.shard import ShardSampler


def rows(loader):
    return [np.asarray(b).tolist() for b in loader]


def saved(loader, k=5):
    """``loader``'s state ``k`` batches into its first epoch, through JSON."""
    it = iter(loader)
    for _ in range(k):
        next(it)
    sd = json.loads(json.dumps(loader.state_dict()))
    it.close()
    return sd


@pytest.mark.parametrize(
    ("other", "match"),
    [
        (lambda: DataLoader(list(range(10)), batch_size=8), r"len\(dataset\)=100; this loader has len\(dataset\)=10"),
        (lambda: DataLoader(list(range(100)), batch_size=16), "batch_size=8; this loader has batch_size=16"),
        (lambda: DataLoader(list(range(100)), batch_size=8, shuffle=True, seed=1),
         "sampler='SequentialSampler'; this loader has sampler='RandomSampler'"),
        (lambda: DataLoader(list(range(100)), batch_size=None),
         "batch_size=8; this loader has batch_size=None|batch_sampler='BatchSampler'"),
    ],
)
def test_a_state_of_a_loader_that_cuts_its_epoch_otherwise_is_refused_naming_both_values(other, match):
    sd = saved(DataLoader(list(range(100)), batch_size=8))
    loader = other()
    with pytest.raises(ValueError, match=match):
        loader.load_state_dict(sd)
    assert rows(loader) == rows(other())  # nothing was applied


def test_a_sampler_of_another_kind_is_refused_even_with_the_same_state_keys():
    sd = saved(DataLoader(list(range(30)), batch_size=4, sampler=RandomSampler(range(30), generator=2)), 2)
    subset = DataLoader(list(range(30)), batch_size=4, sampler=SubsetRandomSampler(range(30), generator=2))
    with pytest.raises(ValueError, match="sampler='RandomSampler'; this loader has sampler='SubsetRandomSampler'"):
        subset.load_state_dict(sd)


@pytest.mark.parametrize("version", [1, 2])
def test_a_position_past_the_end_of_the_epoch_is_refused_whatever_the_version(version):
    sd = saved(DataLoader(list(range(100)), batch_size=8), 0)
    sd.update(version=version, yielded=10**9)
    if version == 1:
        del sd["loader"]
    with pytest.raises(ValueError, match=r"'yielded'=1000000000 is more than the 13 batches"):
        DataLoader(list(range(100)), batch_size=8).load_state_dict(sd)


def test_a_fully_yielded_epoch_resumes_at_the_next_one():
    loader = DataLoader(list(range(10)), batch_size=4, shuffle=True, seed=3)
    full = [rows(loader), rows(loader)]
    sd = saved(DataLoader(list(range(10)), batch_size=4, shuffle=True, seed=3), 3)  # StopIteration not seen
    assert sd["yielded"] == 3
    again = DataLoader(list(range(10)), batch_size=4, shuffle=True, seed=3)
    again.load_state_dict(sd)
    assert (rows(again), rows(again)) == ([], full[1])


@pytest.mark.parametrize("torch_face", [False, True])
def test_a_version_2_state_without_its_loader_record_or_with_none_is_refused(torch_face):
    # Only a missing key of the record was refused: dropping the whole record (or None) skipped
    # every check, and a batch_size=8 state resumed a batch_size=16 loader 24 rows late.
    if torch_face:
        dt = pytest.importorskip("dataloader.torch")
        make = dt.DataLoader
    else:
        make = DataLoader
    sd = saved(make(list(range(100)), batch_size=8, shuffle=True, generator=None), 3)
    bigger = make(list(range(100)), batch_size=16, shuffle=True)
    gone = {k: v for k, v in sd.items() if k != "loader"}
    with pytest.raises(ValueError, match="has no 'loader' record"):
        bigger.load_state_dict(gone)
    with pytest.raises(TypeError, match="'loader' must be a dict, got NoneType"):
        bigger.load_state_dict({**sd, "loader": None})
    with pytest.raises(ValueError, match="batch_size=8; this loader has batch_size=16"):
        bigger.load_state_dict(sd)


def test_a_version_1_state_without_the_record_still_loads():
    sd = saved(DataLoader(list(range(20)), batch_size=3, shuffle=True, seed=4), 2)
    full = rows(DataLoader(list(range(20)), batch_size=3, shuffle=True, seed=4))
    del sd["loader"]
    sd["version"] = 1
    again = DataLoader(list(range(20)), batch_size=3, shuffle=True, seed=4)
    again.load_state_dict(sd)
    assert rows(again) == full[2:]
    assert again.state_dict()["version"] == 2  # saved again: this loader's record


@pytest.mark.parametrize("drop", [(False, True), (True, False)])
def test_drop_last_may_change_only_the_last_short_batch_follows_it(drop):
    def loader(d):
        return DataLoader(list(range(22)), batch_size=4, shuffle=True, seed=9, drop_last=d)

    sd = saved(loader(drop[0]), 2)
    again = loader(drop[1])
    again.load_state_dict(sd)
    assert rows(again) == rows(loader(drop[1]))[2:]


class OwnShardSampler(ShardSampler):
    """A user's subclass: not resumed elastically (its order may be its own)."""


class OwnDistributedSampler(DistributedSampler):
    """A user's subclass: not resumed elastically (its order may be its own)."""


def distributed(world, rank, kind):
    ds = list(range(40))
    if kind.endswith("shard"):
        cls = OwnShardSampler if kind.startswith("own") else ShardSampler
        sampler = cls(ds, num_shards=world, shard_id=rank, seed=6)
    else:
        cls = OwnDistributedSampler if kind.startswith("own") else DistributedSampler
        sampler = cls(ds, num_replicas=world, rank=rank, seed=6)
    return DataLoader(ds, batch_size=2, sampler=sampler)


@pytest.mark.parametrize("kind", ["own-distributed", "own-shard"])
def test_world_size_and_rank_are_recorded_and_another_world_size_is_refused(kind):
    # The built-in samplers resume at another world size (tests/engine/test_elastic_resume.py);
    # a subclass does not, and says why.
    sd = saved(distributed(4, 1, kind), 2)
    assert (sd["loader"]["world_size"], sd["loader"]["rank"]) == (4, 1)
    assert sd["loader"]["sampler"] == ("OwnShardSampler" if kind == "own-shard" else "OwnDistributedSampler")
    assert sd["elastic"] is None
    with pytest.raises(ValueError, match="world_size=4; this loader has world_size=2, and it cannot be resumed "
                       "elastically: its sampler is .*Own"):
        distributed(2, 1, kind).load_state_dict(sd)


@pytest.mark.parametrize("kind", ["distributed", "shard"])
def test_a_state_saved_by_rank_0_resumes_every_rank_at_the_same_count(kind):
    sd = saved(distributed(4, 0, kind), 2)  # ranks in lockstep: the "save on rank 0" checkpoint
    for rank in range(4):
        again = distributed(4, rank, kind)
        again.load_state_dict(sd)
        assert rows(again) == rows(distributed(4, rank, kind))[2:]


def test_a_malformed_record_names_its_key():
    sd = saved(DataLoader(list(range(20)), batch_size=3), 1)
    loader = DataLoader(list(range(20)), batch_size=3)
    with pytest.raises(TypeError, match="'loader' 'batch_size' must be int or None, got str"):
        loader.load_state_dict({**sd, "loader": {**sd["loader"], "batch_size": "3"}})
    with pytest.raises(ValueError, match="unknown key 'shards'"):
        loader.load_state_dict({**sd, "loader": {**sd["loader"], "shards": 2}})
    with pytest.raises(TypeError, match="must be a dict, got list"):
        loader.load_state_dict({**sd, "loader": [1]})


@pytest.mark.parametrize("key", ["dataset_len", "batch_size", "drop_last", "sampler", "batch_sampler", "world_size", "rank"])
def test_a_record_missing_a_key_is_refused_naming_it(key):
    # Unchecked, a record without its batch_size resumed a batch_size=16 loader at the rows
    # of batch_size=8's position.
    sd = saved(DataLoader(list(range(100)), batch_size=8), 3)
    loader = DataLoader(list(range(100)), batch_size=16)
    record = {k: v for k, v in sd["loader"].items() if k != key}
    with pytest.raises(ValueError, match=f"'loader' state is missing key '{key}'"):
        loader.load_state_dict({**sd, "loader": record})
    with pytest.raises(ValueError, match="missing key 'dataset_len'"):
        loader.load_state_dict({**sd, "loader": {}})


def test_a_batch_sampler_given_to_the_loader_records_its_batch_size():
    def loader(size):
        return DataLoader(list(range(20)), batch_sampler=BatchSampler(SequentialSampler(range(20)), size, False))

    sd = saved(loader(4), 1)
    assert (sd["loader"]["batch_size"], sd["loader"]["batch_sampler"]) == (4, "BatchSampler")
    with pytest.raises(ValueError, match="batch_size=4; this loader has batch_size=5"):
        loader(5).load_state_dict(sd)
