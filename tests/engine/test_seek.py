"""``DataLoader.seek(epoch, batch)``: the batches from there are an uninterrupted run's.

Also the state dict as a user edits it: JSON, small, and ``epoch`` / ``yielded`` edited in a
saved state then loaded give what ``seek`` gives.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests._support import RangeStream, RecordingDataset, json_roundtrip
from dataloader.distributed import DistributedSampler
from dataloader.loader import DataLoader
from dataloader.sampler import RandomSampler, Sampler
from dataloader.shard import ShardSampler

pytestmark = pytest.mark.timeout(60)

N, BATCH = 53, 4  # 14 batches an epoch, the last one short


def rows(batches):
    return [np.asarray(b).tolist() for b in batches]


def make(kind: str, workers: int, shuffle: bool = True) -> DataLoader:
    ds = list(range(N))
    if kind == "own":
        return DataLoader(ds, batch_size=BATCH, shuffle=shuffle, seed=11, num_workers=workers)
    if kind == "distributed":
        sampler = DistributedSampler(ds, num_replicas=3, rank=1, shuffle=shuffle, seed=5)
    else:
        sampler = ShardSampler(ds, num_shards=3, shard_id=2, shuffle=shuffle, seed=5)
    return DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=workers)


def straight(loader: DataLoader, epochs: int) -> list[list]:
    """An uninterrupted run; a ``DistributedSampler`` gets ``set_epoch(e)`` as a training loop gives it."""
    out = []
    for e in range(epochs):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(e)
        out.append(rows(loader))
    return out


@pytest.mark.parametrize("kind", ["own", "distributed", "shard"])
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("epoch,batch", [(0, 0), (0, 5), (2, 3), (1, 99)])
def test_seek_yields_what_an_uninterrupted_run_yields_from_there(kind, shuffle, workers, epoch, batch):
    expected = straight(make(kind, 0, shuffle), epoch + 2)
    loader = make(kind, workers, shuffle)
    batch = min(batch, len(loader))
    loader.seek(epoch, batch)
    assert loader.state_dict()["epoch"] == epoch and loader.state_dict()["yielded"] == batch
    it = iter(loader)
    assert len(it) == len(loader) - batch
    assert rows(it) == expected[epoch][batch:]
    if isinstance(loader.sampler, DistributedSampler):
        loader.sampler.set_epoch(epoch + 1)
    assert rows(loader) == expected[epoch + 1]  # the following epoch is the run's too
    loader.close()


def test_seek_backwards_and_forwards_on_one_loader():
    expected = straight(make("own", 0), 4)
    loader = make("own", 2)
    assert rows(loader) == expected[0]
    loader.seek(3, 7)
    assert rows(loader) == expected[3][7:]
    loader.seek(0, 13)
    assert rows(loader) == expected[0][13:]
    assert rows(loader) == expected[1]
    loader.close()


class _Huge:
    """10**12 rows; an item is its index (nothing is stored)."""

    def __init__(self) -> None:
        self.fetched = 0

    def __len__(self) -> int:
        return 10**12

    def __getitem__(self, i: int) -> int:
        self.fetched += 1
        return i


@pytest.mark.parametrize("workers", [0, 2])
def test_seek_into_a_billion_batches_draws_nothing_before_the_position(workers):
    # 10**9 batches of 1000 rows: drawing and dropping the 10**12 indices before the position
    # would take hours; the position is computed in O(1) instead.
    ds = _Huge()
    loader = DataLoader(ds, batch_size=1000, shuffle=True, seed=7, num_workers=workers, prefetch_depth=1)
    assert len(loader) == 10**9
    loader.seek(4, 10**9 - 1)
    it = iter(loader)
    last = np.asarray(next(it)).tolist()
    with pytest.raises(StopIteration):
        next(it)
    reference = RandomSampler(ds, generator=7)
    reference.load_state_dict({"start": (10**9 - 1) * 1000, "epoch": 4})
    expected = []
    for i in reference:  # the epoch's last 1000 positions of the permutation
        expected.append(i)
        if len(expected) == 1000:
            break
    assert last == expected
    assert ds.fetched == 1000  # only the batch yielded was fetched
    loader.close()


class CountingSampler(Sampler[int]):
    """A user sampler without state: a fixed shuffled order; counts the indices it yields."""

    def __init__(self, n: int) -> None:
        self.order = np.random.default_rng(3).permutation(n).tolist()
        self.drawn = 0

    def __iter__(self):
        for i in self.order:
            self.drawn += 1
            yield i

    def __len__(self) -> int:
        return len(self.order)


@pytest.mark.parametrize("workers", [0, 2])
def test_seek_with_a_user_sampler_draws_and_drops_the_batches_before(workers):
    ds = RecordingDataset(N)
    expected = rows(DataLoader(ds, batch_size=BATCH, sampler=CountingSampler(N)))
    sampler = CountingSampler(N)
    loader = DataLoader(ds, batch_size=BATCH, sampler=sampler, num_workers=workers)
    ds.calls.clear()
    loader.seek(0, 6)
    assert sampler.drawn == 0  # nothing happens before the next iter()
    assert rows(loader) == expected[6:]
    assert sampler.drawn == N
    assert sorted(ds.calls) == sorted(sampler.order[6 * BATCH:])  # the dropped batches are not fetched
    loader.close()


@pytest.mark.parametrize(
    "epoch,batch,error,words",
    [
        (-1, 0, ValueError, "epoch=-1"),
        (0, -2, ValueError, "batch=-2"),
        (0, 15, ValueError, "batch=15 is beyond the epoch's length (14 batches)"),
        (1.0, 0, TypeError, "epoch"),
        (0, True, TypeError, "batch"),
        ("1", 0, TypeError, "epoch"),
    ],
)
def test_seek_refuses_bad_positions_naming_the_value(epoch, batch, error, words):
    loader = make("own", 0)
    before = loader.state_dict()
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        loader.seek(epoch, batch)
    assert loader.state_dict() == before  # nothing changed


def test_seek_to_the_end_of_an_epoch_gives_an_empty_epoch_then_the_next():
    expected = straight(make("own", 0), 2)
    loader = make("own", 2)
    loader.seek(0, len(loader))
    assert rows(loader) == []
    assert rows(loader) == expected[1]
    loader.close()


def test_seek_while_an_epoch_is_open_applies_to_the_next_iter():
    expected = straight(make("own", 0), 3)
    loader = make("own", 2)
    it = iter(loader)
    first = rows([next(it), next(it)])
    loader.seek(2, 4)
    assert first + rows(it) == expected[0]  # the open epoch goes on unchanged
    assert rows(loader) == expected[2][4:]
    loader.close()


def test_seek_refuses_a_sampler_whose_order_cannot_be_reproduced():
    loader = DataLoader(list(range(N)), batch_size=BATCH, sampler=RandomSampler(list(range(N)), generator=None))
    with pytest.raises(ValueError, match="generator=None"):
        loader.seek(0, 3)


def test_seek_with_a_numpy_generator_sampler_only_within_the_next_epoch():
    def loader_with(seed):
        ds = list(range(N))
        return DataLoader(ds, batch_size=BATCH, sampler=RandomSampler(ds, generator=np.random.default_rng(seed)))

    expected = rows(loader_with(9))
    loader = loader_with(9)
    with pytest.raises(ValueError, match=r"only the next epoch \(0\)"):
        loader.seek(1, 0)
    loader.seek(0, 3)
    assert rows(loader) == expected[3:]


@pytest.mark.parametrize("workers", [0, 2])
def test_seek_an_iterable_dataset_to_an_epoch_start(workers):
    expected = rows(DataLoader(RangeStream(10), batch_size=3, num_workers=workers))
    loader = DataLoader(RangeStream(10), batch_size=3, num_workers=workers)
    loader.seek(5, 0)
    assert loader.state_dict()["epoch"] == 5
    assert rows(loader) == expected  # a stream starts from its beginning; epoch 5's seeds
    assert loader.state_dict()["epoch"] == 6
    loader.close()


def test_seek_an_iterable_dataset_mid_epoch_builds_and_drops_with_no_workers():
    loader = DataLoader(RangeStream(10), batch_size=3)
    loader.seek(0, 2)
    assert rows(loader) == [[6, 7, 8], [9]]


def test_seek_an_iterable_dataset_mid_epoch_with_workers_is_refused():
    loader = DataLoader(RangeStream(10), batch_size=3, num_workers=2)
    with pytest.raises(TypeError, match="IterableDataset's position is its own stream"):
        loader.seek(0, 2)
    loader.close()


@pytest.mark.parametrize("kind", ["own", "distributed", "shard"])
def test_state_dict_is_json_and_under_one_kib(kind):
    loader = make(kind, 2)
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    text = json.dumps(state)
    assert json.loads(text) == state
    assert len(text.encode()) < 1024
    loader.close()


def test_a_state_with_numpy_generator_sampler_is_json_and_under_one_kib():
    ds = list(range(N))
    loader = DataLoader(ds, batch_size=BATCH, sampler=RandomSampler(ds, generator=np.random.default_rng(1)))
    state = loader.state_dict()
    assert json_roundtrip(state) == state and len(json.dumps(state)) < 1024


@pytest.mark.parametrize("workers", [0, 2])
def test_editing_epoch_and_yielded_of_a_saved_state_is_a_seek(workers):
    expected = straight(make("own", 0), 4)
    saved = json_roundtrip(make("own", 0).state_dict())  # epoch 0, batch 0
    saved["epoch"], saved["yielded"] = 3, 9
    loader = make("own", workers)
    loader.load_state_dict(saved)
    assert rows(loader) == expected[3][9:]
    other = make("own", workers)
    other.seek(3, 9)
    sought = other.state_dict()
    assert (sought["epoch"], sought["yielded"], sought["seed"]) == (3, 9, saved["seed"])
    assert rows(other) == expected[3][9:]
    loader.close()
    other.close()


def test_editing_a_user_samplers_epoch_with_the_loaders_is_a_seek():
    expected = straight(make("distributed", 0), 3)
    saved = json_roundtrip(make("distributed", 0).state_dict())
    saved["epoch"], saved["yielded"] = 2, 1
    saved["sampler"]["sampler"]["epoch"] = 2  # DistributedSampler's own epoch counter
    loader = make("distributed", 2)
    loader.load_state_dict(saved)
    assert rows(loader) == expected[2][1:]
    loader.close()
