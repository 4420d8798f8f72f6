"""TarShardDataset across ranks and worker threads: split once, seeded shuffles, exact resume."""

from __future__ import annotations

import pytest

from tests._support import json_roundtrip
from tests.formats._tars import keys_of, sample_members, write_shards, write_tar

from dataloader import DataLoader, TarShardDataset

ALL = [f"{k:06d}" for k in range(40)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("world_size", "num_workers"), [(1, 3), (2, 2), (3, 0)])
def test_ranks_and_workers_read_every_shard_exactly_once_per_epoch(tmp_path, world_size, num_workers):
    pattern = write_shards(tmp_path, 5, 8)
    seen: list[str] = []
    for rank in range(world_size):
        ds = TarShardDataset(pattern, shuffle_shards=True, shuffle_buffer=5, seed=1, world_size=world_size, rank=rank)
        seen += keys_of(DataLoader(ds, batch_size=3, num_workers=num_workers, collate_fn=list))
    assert sorted(seen) == ALL


def test_world_size_and_rank_default_to_torchruns_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    ds = TarShardDataset(write_shards(tmp_path, 8, 1))
    assert (ds.world_size, ds.rank) == (4, 3)
    assert [s["__key__"] for s in ds] == ["000003", "000007"]


@pytest.mark.timeout(60)
def test_a_seed_fixes_each_epoch_and_epochs_differ(tmp_path):
    pattern = write_shards(tmp_path, 5, 8)

    def epochs(seed, num_workers):
        ds = TarShardDataset(pattern, shuffle_shards=True, shuffle_buffer=6, seed=seed)
        loader = DataLoader(ds, batch_size=4, num_workers=num_workers, collate_fn=list)
        return [keys_of(loader) for _ in range(2)]

    first, second = epochs(7, 0)
    assert sorted(first) == sorted(second) == ALL
    assert first != second and first != ALL
    assert epochs(7, 0) == [first, second] == epochs(7, 1)  # num_workers 0 and 1 agree
    threaded = epochs(7, 2)
    assert threaded == epochs(7, 2) and threaded[0] != threaded[1]  # the loader's epoch reaches the workers
    assert sorted(threaded[0]) == sorted(threaded[1]) == ALL
    assert epochs(8, 0)[0] != first


def test_set_epoch_picks_the_shard_order_outside_a_loader(tmp_path):
    ds = TarShardDataset(write_shards(tmp_path, 6, 1), shuffle_shards=True, seed=2)
    orders = []
    for epoch in (0, 1, 0):
        ds.set_epoch(epoch)
        orders.append([s["__key__"] for s in ds])
    assert orders[0] == orders[2] != orders[1]
    assert orders[0] == [f"{int(name[-6:-4]):06d}" for name in ds.shard_order(0)]


def test_the_buffer_moves_a_sample_at_most_size_minus_one_places_earlier(tmp_path):
    shard = write_tar(tmp_path / "one.tar", sample_members(range(200)))
    size = 10
    out = [int(s["__key__"]) for s in TarShardDataset(str(shard), shuffle_buffer=size, seed=4)]
    assert sorted(out) == list(range(200)) and out != list(range(200))
    assert all(position >= key - (size - 1) for position, key in enumerate(out))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("stop", [1, 4, 9])
def test_resume_continues_exactly_where_the_uninterrupted_run_goes(tmp_path, num_workers, stop):
    # a buffer larger than a shard: resuming must refill it from earlier shards
    pattern = write_shards(tmp_path, 5, 8)

    def loader():
        ds = TarShardDataset(pattern, shuffle_shards=True, shuffle_buffer=11, seed=5)
        return DataLoader(ds, batch_size=3, num_workers=num_workers, collate_fn=list)

    whole = loader()
    full = [keys_of(whole) for _ in range(2)]
    cut = loader()
    keys_of(cut)  # epoch 0 whole, then stop inside epoch 1
    it = iter(cut)
    head = [s["__key__"] for _ in range(stop) for s in next(it)]
    state = json_roundtrip(cut.state_dict())
    it.close()
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + keys_of(resumed) == full[1]


@pytest.mark.timeout(60)
def test_a_state_saved_again_right_after_a_resume_resumes_at_the_same_place(tmp_path):
    pattern = write_shards(tmp_path, 4, 5)

    def loader():
        return DataLoader(TarShardDataset(pattern, shuffle_buffer=3), batch_size=4, collate_fn=list)

    full = keys_of(loader())
    cut = loader()
    it = iter(cut)
    head = [s["__key__"] for _ in range(2) for s in next(it)]
    resumed = loader()
    resumed.load_state_dict(json_roundtrip(cut.state_dict()))
    it = iter(resumed)  # started, nothing read: the loaded position is still the position
    again = loader()
    again.load_state_dict(json_roundtrip(resumed.state_dict()))
    assert head + keys_of(again) == full


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_peek_at_the_dataset_is_not_resumed_by_a_state_saved_at_the_epochs_start(tmp_path, num_workers):
    ds = TarShardDataset(write_shards(tmp_path, 4, 5), shuffle_buffer=3)
    next(iter(ds))  # as docs/usage.md's example does, before making loaders
    cut = DataLoader(ds, batch_size=4, num_workers=num_workers, collate_fn=list)
    it = iter(cut)
    state = json_roundtrip(cut.state_dict())
    it.close()
    resumed = DataLoader(ds, batch_size=4, num_workers=num_workers, collate_fn=list)
    resumed.load_state_dict(state)
    assert sorted(keys_of(resumed)) == [f"{k:06d}" for k in range(20)]


def test_a_state_of_another_layout_is_refused(tmp_path):
    pattern = write_shards(tmp_path, 4, 2)
    ds = TarShardDataset(pattern, world_size=2, rank=0)
    it = iter(ds)
    next(it)
    state = json_roundtrip(ds.state_dict())
    other = TarShardDataset(pattern, world_size=2, rank=1)
    other.load_state_dict(state)
    with pytest.raises(ValueError, match="saved with rank=0 here with rank=1"):
        list(other)
    bigger = TarShardDataset(pattern, world_size=2, rank=0, shuffle_buffer=4)
    bigger.load_state_dict(state)
    with pytest.raises(ValueError, match="saved with shuffle_buffer=0 here with shuffle_buffer=4"):
        list(bigger)
    with pytest.raises(ValueError, match="not a TarShardDataset state"):
        other.load_state_dict({"epoch": 0})


def test_resuming_over_shards_that_lost_buffered_samples_is_refused(tmp_path):
    shard = write_tar(tmp_path / "a.tar", sample_members(range(20)))
    ds = TarShardDataset(str(shard), shuffle_buffer=8, seed=0)
    it = iter(ds)
    for _ in range(3):
        next(it)
    state = json_roundtrip(ds.state_dict())
    write_tar(shard, sample_members(range(2)))  # the shard now holds 2 samples
    again = TarShardDataset(str(shard), shuffle_buffer=8, seed=0)
    again.load_state_dict(state)
    with pytest.raises(ValueError, match=r"cannot resume: \d+ buffered sample\(s\) are no longer in their shards"):
        list(again)
