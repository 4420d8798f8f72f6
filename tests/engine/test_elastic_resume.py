"""``DataLoader.load_state_dict`` at another world size: N old ranks' epoch continued by M ranks.

Each old rank's loader is stopped after ``k`` batches (or its own count) and its state goes
through JSON; each new rank builds its loader as usual (the sampler with the new
``num_replicas``/``rank``) and loads one state (ranks in step) or the list of all of them.
Across old and new ranks every row of the epoch is seen exactly once (plus
``DistributedSampler``'s documented padding of the remainder), whatever ``num_workers``; the
next epoch is a fresh M-rank run's (``dataloader._engine.elastic``).
"""

from __future__ import annotations

import collections
import itertools
import json
import re

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, IterableDataset
from dataloader.distributed import DistributedSampler
from dataloader.sampler import BatchSampler, Sampler
from dataloader.shard import ShardSampler

pytestmark = pytest.mark.timeout(60)
N_ROWS, SEED = 53, 5


def loader(kind, world, rank, *, workers=0, batch=4, drop_last=False, sampler_drop=False, n=N_ROWS, **kw):
    ds = ArrayDataset(np.arange(n)) if kind.startswith("array") else list(range(n))
    if kind.endswith("shard"):
        sampler = ShardSampler(ds, num_shards=world, shard_id=rank, seed=SEED)
    else:
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=SEED, drop_last=sampler_drop)
    return DataLoader(ds, batch_size=batch, sampler=sampler, num_workers=workers, drop_last=drop_last, **kw)


def ids(batch):
    return np.asarray(batch[0] if isinstance(batch, (tuple, list)) and len(batch) == 1 else batch).ravel().tolist()


def run(lo, epoch, limit=None):
    """Rows of ``lo``'s epoch (sampler epoch ``epoch``), stopped after ``limit`` batches; its state."""
    lo.sampler.set_epoch(epoch)
    out, it = [], iter(lo)
    for batch in it if limit is None else itertools.islice(it, limit):
        out += ids(batch)
    sd = json.loads(json.dumps(lo.state_dict()))
    it.close()
    return out, sd


def check_once(kind, old_rows, new_rows, n, padded_remainder):
    counts = collections.Counter(old_rows + new_rows)
    assert set(counts) == set(range(n))
    extra = sum(counts.values()) - n
    if kind.endswith("shard"):
        assert extra == 0
    else:  # the old epoch's padding (not consumed here) and the remainder's: repeated heads only
        assert extra == padded_remainder and max(counts.values()) <= 2


@pytest.mark.parametrize("kind", ["distributed", "shard", "array-distributed"])
@pytest.mark.parametrize("workers", [(0, 2), (2, 0)])
@pytest.mark.parametrize("old, new", [(4, 2), (4, 3), (2, 4)])
def test_ranks_in_step_resume_on_another_world_size_from_one_state(kind, workers, old, new):
    k = 2
    states, old_rows = [], []
    for r in range(old):
        rows, sd = run(loader(kind, old, r, workers=workers[0]), 1, k)
        states.append(sd)
        old_rows += rows
    assert states[0]["elastic"]["consumed"] == k * 4
    assert states[0]["elastic"]["position"] == sum(s["elastic"]["consumed"] for s in states)
    new_rows = []
    for r in range(new):
        lo = loader(kind, new, r, workers=workers[1], batch=3)  # batch_size may change too
        lo.load_state_dict(states[0])  # saved by old rank 0: the old world size is read from it
        share = len(lo.sampler)  # this rank's share of the remainder, until its epoch starts
        assert len(lo) == -(-share // 3)
        rows, sd = run(lo, 1)
        assert len(rows) == share
        new_rows += rows
        nxt, _ = run(lo, 2)
        assert nxt == run(loader(kind, new, r, batch=3), 2)[0]  # a fresh M-rank run's next epoch
        lo.close()
    remainder = N_ROWS - len(set(old_rows))
    check_once(kind, old_rows, new_rows, N_ROWS, 0 if kind.endswith("shard") else -(-remainder // new) * new - remainder)


@pytest.mark.parametrize("kind", ["distributed", "shard"])
@pytest.mark.parametrize("workers", [0, 2])
def test_ranks_at_different_steps_resume_from_the_list_of_all_states(kind, workers):
    old, new, steps = 4, 3, [1, 3, 0, 2]
    states, old_rows = [], []
    for r in range(old):
        rows, sd = run(loader(kind, old, r, workers=workers), 0, steps[r])
        states.append(sd)
        old_rows += rows
    assert [s["elastic"]["consumed"] for s in states] == [4 * k for k in steps]
    new_rows, total = [], 0
    for r in range(new):
        lo = loader(kind, new, r, workers=2 - workers)
        lo.load_state_dict(states[::-1])  # any order
        total += len(lo.sampler)
        new_rows += run(lo, 0)[0]
    remainder = N_ROWS - len(old_rows)
    check_once(kind, old_rows, new_rows, N_ROWS, total - remainder)


def test_an_epoch_resumed_elastically_is_saved_and_resumed_again():
    # 4 ranks -> 2 ranks (one batch each, saved) -> 3 ranks; and 2 -> 2 (today's exact resume).
    states = [run(loader("distributed", 4, r), 0, 2)[1] for r in range(4)]
    seen = [i for r in range(4) for i in run(loader("distributed", 4, r), 0, 2)[0]]
    middle = []
    for r in range(2):
        lo = loader("distributed", 2, r)
        lo.load_state_dict(states[0])
        rows, sd = run(lo, 0, 1)
        whole = loader("distributed", 2, r)
        whole.load_state_dict(states[0])
        same = loader("distributed", 2, r)
        same.load_state_dict(sd)  # the same world size: the remainder epoch goes on exactly
        assert rows + run(same, 0)[0] == run(whole, 0)[0]
        seen += rows
        middle.append(sd)
    assert middle[0]["sampler"]["sampler"]["elastic"] == [{"world_size": 4, "consumed": [8] * 4}]
    rest = []
    for r in range(3):
        lo = loader("distributed", 3, r)
        lo.load_state_dict(middle[0])
        rest += run(lo, 0)[0]
    counts = collections.Counter(seen + rest)
    assert set(counts) == set(range(N_ROWS)) and max(counts.values()) <= 2


def test_the_same_world_size_is_todays_resume_from_one_state_or_this_ranks_state_of_a_list():
    states = [run(loader("shard", 3, r), 0, r + 1)[1] for r in range(3)]
    for r in range(3):
        lo = loader("shard", 3, r)
        lo.load_state_dict(states)
        assert lo.state_dict()["yielded"] == r + 1
        assert run(lo, 0)[0] == run(loader("shard", 3, r), 0)[0][4 * (r + 1):]


class NoStateSampler(Sampler[int]):
    """A user sampler with a world size and a rank but no state."""

    def __init__(self, n, num_replicas, rank):
        self.n, self.num_replicas, self.rank = n, num_replicas, rank

    def __iter__(self):
        return iter(range(self.rank, self.n, self.num_replicas))

    def __len__(self):
        return len(range(self.rank, self.n, self.num_replicas))


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(10))


def refused(make_new, match, state=None):
    sd = state if state is not None else run(loader("distributed", 4, 0), 0, 2)[1]
    with pytest.raises(ValueError, match=match):
        make_new().load_state_dict(sd)


def test_what_cannot_be_resumed_elastically_is_refused_at_load_saying_why():
    user = DataLoader(list(range(N_ROWS)), batch_size=4, sampler=NoStateSampler(N_ROWS, 4, 0))
    it = iter(user)
    next(it)
    user_state = json.loads(json.dumps(user.state_dict()))
    it.close()
    refused(lambda: DataLoader(list(range(N_ROWS)), batch_size=4, sampler=NoStateSampler(N_ROWS, 2, 0)),
            "world_size=4; this loader has world_size=2, and it cannot be resumed elastically: its sampler is "
            ".*NoStateSampler", user_state)
    refused(lambda: loader("distributed", 2, 0), "cannot be resumed elastically: the state has no 'elastic' record",
            user_state)
    refused(lambda: loader("distributed", 2, 0, in_order=False), "in_order=False")
    refused(lambda: loader("shard", 2, 0), "sampler='DistributedSampler'; this loader's has sampler='ShardSampler'")
    refused(lambda: loader("distributed", 2, 0, sampler_drop=True), "drop_last=False; this loader's has drop_last=True")
    refused(lambda: DataLoader(list(range(N_ROWS)), batch_size=4, sampler=DistributedSampler(
        range(N_ROWS), num_replicas=2, rank=0, seed=SEED + 1)), "seed=5; this loader's has seed=6")
    with pytest.raises(ValueError, match="cannot be: its sampler is no index sampler"):
        DataLoader(Stream(), batch_size=2).load_state_dict([run(loader("distributed", 4, 0), 0, 1)[1]])


def test_an_inconsistent_list_of_states_is_refused_naming_what_differs():
    states = [run(loader("distributed", 4, r), 0, 1)[1] for r in range(4)]
    other_epoch = run(loader("distributed", 4, 1), 1, 1)[1]
    other_world = run(loader("distributed", 2, 1), 0, 1)[1]
    new = loader("distributed", 3, 0)
    with pytest.raises(ValueError, match=r"ranks \[3\] missing, \[\] given twice"):
        new.load_state_dict(states[:3])
    with pytest.raises(ValueError, match=r"ranks \[1\] missing, \[0\] given twice"):
        new.load_state_dict([states[0], states[0], states[2], states[3]])
    with pytest.raises(ValueError, match="state \\[1\\] has sampler 'epoch'=1, state \\[0\\] has 0"):
        new.load_state_dict([states[0], other_epoch, states[2], states[3]])
    with pytest.raises(ValueError, match="'elastic' 'world_size'=2, state \\[0\\] has 4"):
        new.load_state_dict([states[0], other_world, states[2], states[3]])
    with pytest.raises(ValueError, match="empty list"):
        new.load_state_dict([])
    with pytest.raises(TypeError, match="state \\[1\\] of the list must be a dict, got int"):
        new.load_state_dict([states[0], 3])
    assert run(new, 0)[0] == run(loader("distributed", 3, 0), 0)[0]  # nothing was applied


def test_the_state_records_the_global_position_world_size_and_rank():
    rows, sd = run(loader("distributed", 4, 2, batch=5), 0, 2)
    assert sd["elastic"] == {
        "sampler": "DistributedSampler", "world_size": 4, "rank": 2, "n": N_ROWS, "seed": SEED, "shuffle": True,
        "drop_last": False, "samples": 14, "consumed": 10, "position": 40,
    }
    assert DataLoader(list(range(5)), batch_size=2).state_dict()["elastic"] is None


class _FailsOn7:
    """Rows 0..n-1; row ``i`` raises when ``i % 7 == 3``."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i % 7 == 3:
            raise OSError(f"row {i} is corrupt")
        return i


@pytest.mark.parametrize("old, new", [(4, 2), (2, 3)])
def test_failure_counts_of_the_old_ranks_are_spread_over_the_new_ones_and_their_sum_kept(old, new):
    ds = _FailsOn7(N_ROWS)

    def make(world, rank):
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, seed=SEED)
        return DataLoader(ds, batch_size=4, sampler=sampler, on_error="skip")

    states = []
    for r in range(old):
        states.append(run(make(old, r), 0, 2)[1])
    saved = [sd["failures"] for sd in states]
    assert sum(c["failed"] for c in saved) > 0
    loaded = []
    for r in range(new):
        lo = make(new, r)
        lo.load_state_dict(states)
        counts = lo.state_dict().get("failures") or dict.fromkeys(saved[0], 0)  # as loaded
        loaded.append(counts)
        it = iter(lo)
        next(it)  # the epoch goes on counting from them
        assert lo.state_dict()["failures"]["seen"] == counts["seen"] + 4
        it.close()
    for key in saved[0]:
        assert sum(c[key] for c in loaded) == sum(c[key] for c in saved)
    assert loaded[0]["seen"] == sum(saved[j]["seen"] for j in range(old) if j % new == 0)


def test_an_edited_state_past_a_rank_s_share_or_outside_its_world_is_refused_at_load():
    """A ``yielded`` beyond the old rank's batches, or an ``"elastic"`` record with no ranks, a
    rank outside its world or another world than ``"loader"``'s, raises (as the same world size
    refuses a ``yielded`` past the epoch) instead of resuming as another epoch."""
    states = [run(loader("distributed", 4, r), 0, 1)[1] for r in range(4)]
    new = loader("distributed", 3, 0)
    past = [dict(sd) for sd in states]
    past[2]["yielded"] = 99  # rank 2 has 4 batches (14 samples, batch 4)
    with pytest.raises(ValueError, match=r"'yielded'=99 of old rank 2 is more than the 4 batches"):
        new.load_state_dict(past)
    with pytest.raises(ValueError, match=r"'yielded'=99 of old rank 0 is more than the 4 batches"):
        new.load_state_dict(past[2])
    for edit, match in [({"world_size": 0}, "world_size=0, rank=0"), ({"rank": 7}, "world_size=4, rank=7"),
                        ({"world_size": 2}, "'elastic' has world_size=2 but 'loader' has world_size=4")]:
        with pytest.raises(ValueError, match=re.escape(match)):
            new.load_state_dict({**states[0], "elastic": {**states[0]["elastic"], **edit}})
    assert run(new, 0)[0] == run(loader("distributed", 3, 0), 0)[0]  # nothing was applied
