"""Exact mid-epoch resume: ``DataLoader.state_dict`` / ``load_state_dict``.

The property: "run k batches, state_dict, JSON round-trip, a new loader (other worker
settings), load_state_dict, run to the end" yields the batches and error positions of an
uninterrupted run, in the resumed epoch and in the epochs after it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._support import RecordingDataset, json_roundtrip
from dataloader import IterableDataset, get_worker_info
from dataloader.distributed import DistributedSampler
from dataloader._rng import rng_for
from dataloader._sampling.permute import permutation_from
from dataloader.loader import DataLoader
from dataloader.sampler import RandomSampler, Sampler, SequentialSampler


def take(it, k=None):
    """Up to ``k`` positions of ``it`` (all when None): batches as lists, errors as tuples."""
    out = []
    while k is None or len(out) < k:
        try:
            batch = next(it)
        except StopIteration:
            break
        except Exception as exc:  # noqa: BLE001 - error positions are compared too
            out.append(("error", type(exc).__name__, exc.args))
        else:
            out.append(np.asarray(batch).tolist())
    return out


def epochs(loader, count):
    return [take(iter(loader)) for _ in range(count)]


@pytest.mark.timeout(600)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 40),
    batch_size=st.integers(1, 6),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    fail=st.sets(st.integers(0, 39), max_size=3),
    workers=st.tuples(st.integers(0, 4), st.integers(0, 4)),
    prefetch_depth=st.tuples(st.integers(1, 4), st.integers(1, 4)),
    item_concurrency=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    position=st.floats(0, 2),
    boundary=st.booleans(),
    seed=st.integers(0, 2**40),
)
def test_resumed_loader_yields_the_rest_of_an_uninterrupted_run(
    n, batch_size, drop_last, shuffle, fail, workers, prefetch_depth, item_concurrency, position, boundary, seed
):
    fail = {i for i in fail if i < n}

    def loader(i):
        return DataLoader(
            RecordingDataset(n, fail), batch_size=batch_size, drop_last=drop_last, shuffle=shuffle,
            num_workers=workers[i], prefetch_depth=prefetch_depth[i], item_concurrency=item_concurrency[i],
            seed=seed,
        )

    with loader(0) as reference:
        full = epochs(reference, 4)
    length = len(full[0])
    k = min(int(position * length), 2 * length)  # a position in epoch 0 or 1, ends included
    epoch, k_in = divmod(k, length) if length else (0, 0)
    if epoch == 2:
        epoch, k_in = 1, length
    with loader(0) as first:
        seen = epochs(first, epoch)
        it = iter(first)
        seen.append(take(it, k_in))
        if boundary and k_in == length:
            seen[-1] += take(it)  # StopIteration seen: the state is the next epoch's start
            epoch, k_in = epoch + 1, 0
            seen.append([])
        sd = json_roundtrip(first.state_dict())
        it.close()
    assert sd["epoch"] == epoch and sd["yielded"] == k_in
    with loader(1) as second:
        second.load_state_dict(sd)
        rest = epochs(second, 2)
    assert seen[-1] + rest[0] == full[epoch]
    assert rest[1] == full[epoch + 1]
    assert seen[:-1] == full[:epoch]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 3])
def test_prefetched_batches_are_built_again_after_resume(num_workers):
    ds = RecordingDataset(50)
    loader = DataLoader(ds, batch_size=2, shuffle=True, seed=3, num_workers=num_workers, prefetch_depth=4)
    full = take(iter(loader))
    first = DataLoader(ds, batch_size=2, shuffle=True, seed=3, num_workers=num_workers, prefetch_depth=4)
    it = iter(first)
    head = take(it, 5)
    sd = first.state_dict()  # the workers are ahead of the consumer by now
    assert sd["yielded"] == 5
    again = DataLoader(ds, batch_size=2, shuffle=True, seed=3, num_workers=num_workers)
    again.load_state_dict(sd)
    assert head + take(iter(again)) == full
    for lo in (loader, first, again):
        lo.close()


def test_state_dict_is_small_json_and_names_its_parts():
    loader = DataLoader(RecordingDataset(10**6), batch_size=10, shuffle=True, seed=11)
    it = iter(loader)
    take(it, 3)
    sd = loader.state_dict()
    assert sd == json_roundtrip(sd)
    assert {k: sd[k] for k in ("version", "seed", "epoch", "yielded", "dataset")} == {
        "version": 2, "seed": 11, "epoch": 0, "yielded": 3, "dataset": None
    }
    assert sd["sampler"] == {"sampler": {"start": 0, "epoch": 0}, "start": 0}
    assert sd["loader"] == {
        "dataset_len": 10**6, "batch_size": 10, "drop_last": False, "sampler": "RandomSampler",
        "batch_sampler": "BatchSampler", "world_size": None, "rank": None,
    }
    assert len(json.dumps(sd)) < 400


def test_a_fresh_loader_state_is_the_first_epoch_and_an_ended_epoch_gives_the_next():
    loader = DataLoader(RecordingDataset(7), batch_size=2, shuffle=True, seed=1)
    assert (loader.state_dict()["epoch"], loader.state_dict()["yielded"]) == (0, 0)
    take(iter(loader))
    assert (loader.state_dict()["epoch"], loader.state_dict()["yielded"]) == (1, 0)


class ListSampler(Sampler[int]):
    """A user sampler without state_dict: the same order every epoch."""

    def __init__(self, order):
        self.order = order
        self.draws = 0

    def __iter__(self):
        for i in self.order:
            self.draws += 1
            yield i

    def __len__(self):
        return len(self.order)


class CountingSampler(ListSampler):
    """A user sampler with state_dict / load_state_dict (an epoch counter, no position)."""

    def __init__(self, n):
        super().__init__(list(range(n)))
        self.epoch = 0

    def __iter__(self):
        rng = np.random.default_rng(self.epoch)
        self.epoch += 1
        for i in rng.permutation(self.order).tolist():
            self.draws += 1
            yield i

    def state_dict(self):
        return {"epoch": self.epoch}

    def load_state_dict(self, sd):
        self.epoch = sd["epoch"]


@pytest.mark.parametrize("make", [lambda: ListSampler([5, 3, 9, 0, 1, 2, 8, 7]), lambda: CountingSampler(10)])
def test_a_user_sampler_is_fast_forwarded_by_drawing_the_yielded_batches(make):
    ds = RecordingDataset(10)
    full = epochs(DataLoader(ds, batch_size=3, sampler=make()), 2)
    first = DataLoader(ds, batch_size=3, sampler=make())
    it = iter(first)
    head = take(it, 2)
    sd = json_roundtrip(first.state_dict())
    sampler = make()
    again = DataLoader(ds, batch_size=3, sampler=sampler, num_workers=2)
    again.load_state_dict(sd)
    assert head + take(iter(again)) == full[0]
    assert take(iter(again)) == full[1]
    again.close()


def test_builtin_samplers_start_late_without_drawing_the_skipped_indices():
    loader = DataLoader(RecordingDataset(10**12), batch_size=4, shuffle=True, seed=5)
    sd = {"version": 1, "seed": 5, "epoch": 3, "yielded": 10**12 // 4 - 2, "sampler":
          {"sampler": {"start": 0, "epoch": 3}, "start": 0}, "dataset": None}
    loader.load_state_dict(sd)
    it = iter(loader)  # O(1): 10**12 - 8 skipped indices are never computed
    assert len(it) == 2
    last = [item[0] for batch in take(it) for item in batch]  # an item is [i, 2 * i]
    perm = permutation_from(10**12, rng_for(5, 3))  # RandomSampler's epoch 3
    assert last == [perm.index_at(p) for p in range(10**12 - 8, 10**12)]


def test_distributed_sampler_state_follows_set_epoch():
    ds = RecordingDataset(20)
    def loader():
        return DataLoader(ds, batch_size=3, sampler=DistributedSampler(ds, num_replicas=2, rank=1, seed=4))
    ref = loader()
    ref.sampler.set_epoch(5)
    full = take(iter(ref))
    first = loader()
    first.sampler.set_epoch(5)
    it = iter(first)
    head = take(it, 2)
    again = loader()
    again.load_state_dict(json_roundtrip(first.state_dict()))
    assert head + take(iter(again)) == full


def test_batch_size_none_resumes_per_index():
    ds = RecordingDataset(9)
    full = take(iter(DataLoader(ds, batch_size=None, shuffle=True, seed=2)))
    first = DataLoader(ds, batch_size=None, shuffle=True, seed=2)
    it = iter(first)
    head = take(it, 4)
    again = DataLoader(ds, batch_size=None, shuffle=True, seed=2, num_workers=2)
    again.load_state_dict(json_roundtrip(first.state_dict()))
    assert head + take(iter(again)) == full
    again.close()


class CountingStream(IterableDataset):
    """This worker's share of 0, 1, ..., n - 1 (``i % num_workers == id``); item ``bad`` raises."""

    def __init__(self, n, bad=-1):
        self.n = n
        self.bad = bad
        self.next = 0

    def __iter__(self):
        info = get_worker_info()
        wid, step = (info.id, info.num_workers) if info is not None else (0, 1)
        start, self.next = self.next, 0
        for i in range(max(start, wid), self.n, step):
            if i % step != wid:
                continue
            self.next = i + step
            if i == self.bad:
                yield ValueError(f"item {i}")  # collated into a failure by the collate_fn below
            else:
                yield i


class StatefulStream(CountingStream):
    """``CountingStream`` whose state is the next item of its (worker's) iterator."""

    def state_dict(self):
        return {"next": self.next}

    def load_state_dict(self, sd):
        self.next = sd["next"]


def raising_collate(items):
    for item in items:
        if isinstance(item, Exception):
            raise item
    return items


@pytest.mark.parametrize("cls", [CountingStream, StatefulStream])
def test_an_iterable_dataset_resumes_with_num_workers_0(cls):
    full = take(iter(DataLoader(cls(11), batch_size=3)))
    first = DataLoader(cls(11), batch_size=3)
    it = iter(first)
    head = take(it, 2)
    sd = json_roundtrip(first.state_dict())
    assert sd["dataset"] == ({"next": 6} if cls is StatefulStream else None)
    again = DataLoader(cls(11), batch_size=3)
    again.load_state_dict(sd)
    assert head + take(iter(again)) == full


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("k", [0, 1, 2, 4, 7, 100])
@pytest.mark.parametrize("prefetch_depth", [1, 4])
def test_a_stateful_iterable_dataset_resumes_per_worker(num_workers, k, prefetch_depth):
    def loader():
        return DataLoader(StatefulStream(23, bad=9), batch_size=2, num_workers=num_workers,
                          prefetch_depth=prefetch_depth, collate_fn=raising_collate)

    with loader() as reference:
        full = [take(iter(reference)) for _ in range(2)]
    with loader() as first:
        it = iter(first)
        head = take(it, k)
        sd = json_roundtrip(first.state_dict())
        it.close()
    with loader() as again:
        again.load_state_dict(sd)
        rest = take(iter(again))
        after = take(iter(again))
    if k >= len(full[0]):  # the epoch ended: the state is the next epoch's start
        assert (head, rest) == (full[0], full[1])
    else:
        assert head + rest == full[0]
        assert after == full[1]


def refused_mid_epoch(loader, error, match):
    """``state_dict()`` one batch into an epoch raises ``error``."""
    it = iter(loader)
    take(it, 1)
    with pytest.raises(error, match=match):
        loader.state_dict()
    it.close()
    loader.close()


@pytest.mark.timeout(30)
def test_an_iterable_dataset_without_state_and_with_workers_refuses_a_mid_epoch_state():
    refused_mid_epoch(DataLoader(CountingStream(11), batch_size=3, num_workers=2), TypeError, "num_workers=0")
    sequential = DataLoader(CountingStream(11), batch_size=3)
    it = iter(sequential)
    take(it, 1)
    state = sequential.state_dict()
    with pytest.raises(TypeError, match="num_workers=0"):
        DataLoader(CountingStream(11), batch_size=3, num_workers=2).load_state_dict(state)


def test_per_worker_states_need_the_same_num_workers():
    sd = {**GOOD, "sampler": None, "dataset": {"workers": [None, None], "last": 0, "live": [0, 1]}}
    with pytest.raises(ValueError, match="for 2 workers; this loader has num_workers=3"):
        DataLoader(StatefulStream(5), batch_size=2, num_workers=3).load_state_dict(sd)
    with pytest.raises(ValueError, match="'live'"):
        DataLoader(StatefulStream(5), batch_size=2, num_workers=2).load_state_dict(
            {**sd, "dataset": {"workers": [None, None], "last": 0, "live": [1, 0]}}
        )
    # num_workers=0 too: the per-worker dict is no state of the dataset itself
    with pytest.raises(ValueError, match="for 2 workers; this loader has num_workers=0"):
        DataLoader(StatefulStream(5), batch_size=2).load_state_dict(sd)


@pytest.mark.timeout(30)
def test_in_order_false_refuses_a_mid_epoch_state():
    refused_mid_epoch(
        DataLoader(RecordingDataset(10), batch_size=2, num_workers=2, in_order=False), ValueError, "in_order=True"
    )


def test_a_sampler_without_a_seed_has_no_state():
    loader = DataLoader(RecordingDataset(10), batch_size=2, sampler=RandomSampler(range(10)))
    with pytest.raises(ValueError, match="generator=None"):
        loader.state_dict()


GOOD = {"version": 1, "seed": 1, "epoch": 0, "yielded": 2, "sampler": {"sampler": {"start": 0}, "start": 0},
        "dataset": None}


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"version": 3}, ValueError, "'version'=3"),
        ({"version": True}, ValueError, "'version'=True"),
        ({"seed": -1}, ValueError, "'seed'=-1"),
        ({"seed": 2**63}, ValueError, "'seed'"),
        ({"epoch": "0"}, TypeError, "'epoch' must be an int"),
        ({"yielded": 1.5}, TypeError, "'yielded' must be an int"),
        ({"yielded": -3}, ValueError, "'yielded'=-3"),
        ({"sampler": [1]}, TypeError, "'sampler' must be a dict or None, got list"),
        ({"sampler": {"start": 0}}, ValueError, "BatchSampler state is missing key 'sampler'"),
        ({"sampler": {"sampler": {"start": 0, "epoch": 1}, "start": 0}}, ValueError, "unknown key 'epoch'"),
        ({"sampler": {"sampler": {"start": -1}, "start": 0}}, ValueError, "'start'=-1"),
        ({"dataset": {"x": 1}}, TypeError, "has no load_state_dict"),
        ({"extra": 1}, ValueError, "unknown key 'extra'"),
    ],
)
def test_load_state_dict_names_the_bad_key(change, error, match):
    loader = DataLoader(RecordingDataset(10), batch_size=2, sampler=SequentialSampler(range(10)))
    sd = {**GOOD, **change}
    with pytest.raises(error, match=match):
        loader.load_state_dict(sd)


def test_load_state_dict_rejects_a_missing_key_and_a_non_dict():
    loader = DataLoader(RecordingDataset(10), batch_size=2)
    with pytest.raises(ValueError, match="missing key 'yielded'"):
        loader.load_state_dict({k: v for k, v in GOOD.items() if k != "yielded"})
    with pytest.raises(TypeError, match="must be a dict, got str"):
        loader.load_state_dict("state")
