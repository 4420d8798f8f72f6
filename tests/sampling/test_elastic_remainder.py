"""Elastic resume at the sampler level: what N old ranks left of an epoch, split among M new ranks.

The old ranks (``DistributedSampler`` / ``ShardSampler`` with ``num_replicas=N``) each consume
the first ``k`` batches of their share; new samplers (``M`` ranks) load the cut as an
``"elastic"`` state.  The reference is brute force over the old samplers' own outputs: the
epoch's sequence, the positions consumed, the remainder in position order, and PyTorch's
padding (or ``drop_last`` cut) applied to it (``dataloader._sampling.remainder``).
"""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dataloader.distributed import DistributedSampler
from dataloader.shard import ShardSampler

EPOCH, SEED = 3, 11
FAST = settings(max_examples=120, deadline=None)


def sampler(kind, n, world, rank, shuffle, drop_last):
    if kind == "shard":
        return ShardSampler(n, num_shards=world, shard_id=rank, shuffle=shuffle, seed=SEED)
    return DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=SEED, drop_last=drop_last)


def epoch_of(s, epoch=EPOCH):
    s.set_epoch(epoch)
    return [int(i) for i in s]


def consumed(share, k, batch, drop_last):
    """Samples of a share consumed after k batches: all of them once the last batch is out."""
    batches = share // batch if drop_last else -(-share // batch)
    return share if k >= batches else min(k * batch, share)


def split(kind, seq, world, drop_last):
    """Each rank's list of positions in ``seq`` (PyTorch's layout, or contiguous shards)."""
    s = len(seq)
    if kind == "shard":
        return [list(range(r * s // world, (r + 1) * s // world)) for r in range(world)]
    ns = (s - 1) // world if drop_last and s % world else -(-s // world)
    return [[(r + world * j) % s for j in range(ns)] for r in range(world)]


def remainder(kind, seq, world, counts, drop_last):
    """``seq`` without the positions the ranks consumed, in order (the tail past the
    ``drop_last`` cut stays dropped; a consumed padding position is the head it repeats)."""
    parts = split(kind, seq, world, drop_last)
    taken = {p for part, c in zip(parts, counts) for p in part[:c]}
    limit = sum(len(p) for p in parts) if kind == "distributed" and drop_last else len(seq)
    return [seq[x] for x in range(min(limit, len(seq))) if x not in taken]


def cut(samplers, counts):
    for s in samplers:
        sd = s.state_dict()
        s.load_state_dict({**sd, "epoch": EPOCH, "start": 0, "elastic": [*sd.get("elastic", []), *counts]})


@FAST
@given(
    kind=st.sampled_from(["distributed", "shard"]), n=st.integers(0, 70), batch=st.integers(1, 6),
    k=st.integers(0, 12), old=st.integers(1, 5), new=st.integers(1, 5), drop_last=st.booleans(),
    shuffle=st.booleans(), uneven=st.lists(st.integers(0, 3), min_size=5, max_size=5),
)
# Ranks 2 and 3 consumed their padding (positions 10, 11: rows at 0, 1), ranks 0 and 1 nothing:
# the head positions 0 and 1 are consumed through the padding that repeats them.
@example(kind="distributed", n=10, batch=3, k=0, old=4, new=3, drop_last=False, shuffle=True, uneven=[0, 0, 1, 1, 0])
@example(kind="distributed", n=3, batch=1, k=0, old=5, new=2, drop_last=False, shuffle=False, uneven=[0, 1, 0, 1, 1])
def test_the_new_ranks_see_every_remaining_row_once_and_then_a_fresh_epoch(
    kind, n, batch, k, old, new, drop_last, shuffle, uneven
):
    drop_last = drop_last and kind == "distributed"
    olds = [sampler(kind, n, old, r, shuffle, drop_last) for r in range(old)]
    shares = [epoch_of(s) for s in olds]
    # Rank r stopped after k + uneven[r] batches (ranks at different steps).
    counts = [consumed(len(sh), k + uneven[r], batch, drop_last) for r, sh in enumerate(shares)]
    if kind == "shard":
        seq = [i for sh in shares for i in sh]
    else:
        seq = epoch_of(sampler(kind, n, 1, 0, shuffle, False))  # the epoch's order, unpadded
    rest = remainder(kind, seq, old, counts, drop_last)
    news = [sampler(kind, n, new, r, shuffle, drop_last) for r in range(new)]
    cut(news, [{"world_size": old, "consumed": counts}])
    lengths = [len(s) for s in news]
    got = [epoch_of(s) for s in news]
    assert [len(g) for g in got] == lengths
    expected = [[rest[p] for p in part] for part in split(kind, rest, new, drop_last)]
    assert got == expected
    # Exactly once: the rows the old ranks consumed and the remainder cover the epoch's rows.
    seen = [i for sh, c in zip(shares, counts) for i in sh[:c]]
    assert not set(seen) & set(rest) and len(set(rest)) == len(rest)
    if not drop_last:
        assert set(seen) | set(rest) == set(range(n))
        padded = [rest[p % len(rest)] for p in range(sum(lengths))]  # the remainder, then its head again
        assert collections.Counter(i for g in got for i in g) == collections.Counter(padded)
    # The next epoch is a fresh M-rank run's.
    for r, s in enumerate(news):
        assert epoch_of(s, EPOCH + 1) == epoch_of(sampler(kind, n, new, r, shuffle, drop_last), EPOCH + 1)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["distributed", "shard"]), n=st.integers(1, 60), worlds=st.lists(st.integers(1, 4), min_size=3,
       max_size=3), steps=st.lists(st.integers(0, 9), min_size=8, max_size=8), drop_last=st.booleans())
def test_an_epoch_resumed_elastically_can_be_cut_again(kind, n, worlds, steps, drop_last):
    drop_last = drop_last and kind == "distributed"
    a, b, c = worlds
    first = [sampler(kind, n, a, r, True, drop_last) for r in range(a)]
    shares = [epoch_of(s) for s in first]
    counts = [min(steps[r], len(sh)) for r, sh in enumerate(shares)]
    seq = [i for sh in shares for i in sh] if kind == "shard" else epoch_of(sampler(kind, n, 1, 0, True, False))
    rest = remainder(kind, seq, a, counts, drop_last)
    middle = [sampler(kind, n, b, r, True, drop_last) for r in range(b)]
    cut(middle, [{"world_size": a, "consumed": counts}])
    counts2 = [min(steps[4 + r], len(s)) for r, s in enumerate(middle)]
    rest2 = remainder(kind, rest, b, counts2, drop_last)
    last = [sampler(kind, n, c, r, True, drop_last) for r in range(c)]
    cut(last, [{"world_size": a, "consumed": counts}, {"world_size": b, "consumed": counts2}])
    assert [epoch_of(s) for s in last] == [[rest2[p] for p in part] for part in split(kind, rest2, c, drop_last)]


@pytest.mark.parametrize("kind", ["distributed", "shard"])
def test_a_huge_epoch_is_cut_in_constant_memory(kind):
    n = 10**12  # nothing n-sized may be built: the remainder is computed per chunk
    s = sampler(kind, n, 3, 1, True, False)
    cut([s], [{"world_size": 5, "consumed": [7, 9, 7, 8, 7]}])
    u = n - 38
    assert len(s) == (-(-u // 3) if kind == "distributed" else 2 * u // 3 - u // 3)
    head = np.fromiter(itertools.islice(iter(s), 1000), dtype=np.int64)
    assert len(head) == 1000 and 0 <= head.min() and head.max() < n and len(set(head.tolist())) == 1000


def test_a_remainder_belongs_to_its_epoch_and_its_state_round_trips():
    s = sampler("distributed", 20, 2, 0, True, False)
    cut([s], [{"world_size": 4, "consumed": [2, 2, 1, 1]}])
    sd = s.state_dict()
    assert sd["elastic"] == [{"world_size": 4, "consumed": [2, 2, 1, 1]}] and len(s) == 7
    again = sampler("distributed", 20, 2, 0, True, False)
    again.load_state_dict(sd)
    assert list(again) == list(s)
    other = sampler("distributed", 20, 2, 0, True, False)
    other.load_state_dict(sd)
    other.set_epoch(EPOCH + 1)  # another epoch: the cut does not apply to it
    assert len(other) == 10 and epoch_of(other, EPOCH + 1) == epoch_of(sampler("distributed", 20, 2, 0, True, False), EPOCH + 1)


@pytest.mark.parametrize("levels, error, match", [
    ([{"world_size": 4, "consumed": [1, 1, 1]}], ValueError, "3 consumed counts for world size 4"),
    ([{"world_size": 2, "consumed": [11, 0]}], ValueError, "rank 0 consumed 11 samples of its 10"),
    ([{"world_size": 2, "consumed": [1, -1]}], ValueError, "'consumed' item"),
    ([{"world_size": 2}], ValueError, "missing key 'consumed'"),
    ({"world_size": 2}, TypeError, "'elastic' must be a list"),
])
def test_a_malformed_cut_is_refused_naming_it(levels, error, match):
    s = sampler("distributed", 20, 2, 0, True, False)
    with pytest.raises(error, match=match):
        s.load_state_dict({**s.state_dict(), "elastic": levels})
