"""A MixDataset whose weights are near the 2**-24 limit (16 Mi-position blocks) is built without
a table of the block's positions (it took 5.6 s and 560 MB), and its final partial block is the
same as reading every position of the block gives."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from dataloader import ArrayDataset, MixDataset
from dataloader.formats._mix_plan import MixPlan, shares_of
from dataloader.formats._mix_stops import stop_plan

pytestmark = pytest.mark.timeout(120)


def first_block(plan, s, target, strict):
    """The smallest block ``b`` with ``T_s(b + 1) > target`` (strict) or ``>= target``, by bisection."""
    lo, hi = 0, 1 << 40
    while lo < hi:
        mid = (lo + hi) // 2
        got = int(plan.drawn_before(mid + 1)[s])
        lo, hi = (lo, mid) if got > target or (not strict and got >= target) else (mid + 1, hi)
    return lo


def final_by_every_position(shares, lengths, stop_on):
    """The old way, as the oracle: ``c_s(r)`` for every ``r`` of the block, the extreme ``r``
    that passes the rule: ``(whole blocks, r)``."""
    first = stop_on == "first_exhausted"
    plan = MixPlan(shares, 0)
    blocks = [first_block(plan, s, int(lengths[s]), first) for s in range(len(shares)) if shares[s] > 0]
    k, bits, cum = (min if first else max)(blocks), plan.bits, np.cumsum(shares).astype(np.uint64)
    table = np.diff(((cum[None, :] * np.arange((1 << bits) + 1, dtype=np.uint64)[:, None]) >> np.uint64(32))
                    .astype(np.int64), axis=1, prepend=np.int64(0))
    need, active = lengths - plan.drawn_before(k), shares > 0
    if first:
        return k, int(np.flatnonzero(np.all((table <= need) | ~active, axis=1)).max())
    hits = np.flatnonzero(np.all((table >= need) | ~active, axis=1))
    return (k, int(hits.min())) if hits.size else (k + 1, 0)


@pytest.mark.parametrize("stop_on", ["first_exhausted", "all_exhausted"])
@pytest.mark.parametrize("weights, lengths", [
    ([1, 2**17], [300, 10**6]), ([2**17, 1], [10**6, 300]), ([3, 2**16 + 1, 5], [7, 10**5, 9]),
    ([0.3, 0.5, 0.2], [1000, 2000, 3000]), ([1, 2**18 - 1], [1, 2**20]), ([5, 1, 2**18], [10, 3, 10**6]),
])
def test_the_final_block_is_the_one_every_position_of_the_block_gives(weights, lengths, stop_on):
    shares, lengths = shares_of(weights, len(weights)), np.array(lengths, dtype=np.int64)
    plan, length = stop_plan(shares, 0, lengths, stop_on)
    k, r = final_by_every_position(shares, lengths, stop_on)
    assert (plan.full_blocks, int(plan.final_cum[-1])) == (k, r) and length == (k << plan.bits) + r


@pytest.mark.parametrize("weights", [[1, 2**23 - 1], [2**23 - 1, 1], [3, 1, 2**24 - 10]])
@pytest.mark.parametrize("stop_on", ["first_exhausted", "all_exhausted"])
def test_weights_near_the_limit_build_in_little_memory_and_keep_the_rule(weights, stop_on):
    sources = [ArrayDataset(np.arange(n)) for n in ([1000, 10**6] if len(weights) == 2 else [77, 1000, 10**6])]
    if weights[0] > weights[-1]:
        sources.reverse()
    tracemalloc.start()
    try:
        mix = MixDataset(sources, weights, stop_on=stop_on)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 2**20  # the position table alone was 16 Mi x 2 x 8 bytes
    lengths = np.array([len(d) for d in sources], dtype=np.int64)
    plan, length = stop_plan(shares_of(weights, len(weights)), 0, lengths, stop_on)
    drawn = plan.drawn_before(plan.full_blocks) + np.diff(plan.final_cum, prepend=0)  # each source's draws
    assert length == len(mix) and drawn.sum() == len(mix)
    if stop_on == "first_exhausted":  # no item twice, and some source gave all of its items
        assert np.all(drawn <= lengths) and np.any(drawn == lengths)
    else:  # every item at least once
        assert np.all(drawn >= lengths)
    src, k = mix.source_of(np.arange(len(mix) - 1000, len(mix)))  # the final block places
    assert src.min() >= 0 and src.max() < len(sources)


@pytest.mark.parametrize("stop_on", ["first_exhausted", "all_exhausted"])
def test_random_weights_and_lengths_give_the_final_block_of_every_position(stop_on):
    rng = np.random.default_rng(24)
    for _ in range(30):
        n = int(rng.integers(1, 5))
        weights = np.exp(rng.uniform(-np.log(2**17), 0, n))  # blocks of 2**12 .. 2**18
        shares = shares_of(weights, n)
        lengths = rng.integers(1, 10 ** int(rng.integers(1, 7)), n)
        plan, length = stop_plan(shares, 0, lengths, stop_on)
        k, r = final_by_every_position(shares, lengths, stop_on)
        assert (plan.full_blocks, int(plan.final_cum[-1]), length) == (k, r, (k << plan.bits) + r), weights
