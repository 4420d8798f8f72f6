"""A MixStream state whose counters are not ints in ``[0, 2**63)`` (``epoch`` may be None),
whose ``segment`` is past its ``position``, or whose ``done`` is not bools, is refused on load
with a ValueError naming the value: a negative position or count, a segment past the position
or a string in ``done`` resumed into a wrong mix silently; others failed deep in NumPy."""

from __future__ import annotations

import json

import pytest

from dataloader import MixDataset
from tests.formats._mix_sources import Counter, state_after

pytestmark = pytest.mark.timeout(60)


def mix() -> MixDataset:
    return MixDataset([Counter(0, 15), Counter(100, 15)], [1, 1], seed=3, stop_on="all_exhausted")


def saved_state() -> dict:
    return state_after(mix(), 6)


@pytest.mark.parametrize("key, value, message", [
    ("position", -5, r"'position' must be an int in \[0, 2\*\*63\), got -5"),
    ("position", "3", r"'position' must be an int in \[0, 2\*\*63\), got '3'"),
    ("position", 10**30, r"'position' must be an int in \[0, 2\*\*63\), got 10{30}"),
    ("segment", -3, r"'segment' must be an int"),
    ("segment", 10, r"'segment' \(10\) must be <= its 'position' \(6\)"),
    ("epoch", -1, r"'epoch' must be an int in \[0, 2\*\*64\) or None, got -1"),
    ("epoch", 1 << 64, r"'epoch' must be an int in \[0, 2\*\*64\) or None, got 18446744073709551616"),
    ("epoch", "x", r"'epoch' must be an int .* or None, got 'x'"),
    ("drawn", [-1, 2], r"'drawn' must hold ints in \[0, 2\*\*63\), got \[-1, 2\]"),
    ("drawn", ["a", 1], r"'drawn' must hold ints"),
    ("passes", [-1, 0], r"'passes' must hold ints"),
    ("done", ["no", False], r"'done' must hold bools \(true/false\), got \['no', False\]"),
])
def test_a_malformed_counter_is_refused_naming_it(key, value, message):
    m = mix()
    with pytest.raises(ValueError, match=r"state's " + message):
        m.load_state_dict(dict(saved_state(), **{key: value}))


def test_a_state_not_yet_started_and_a_mid_epoch_one_still_load():
    fresh = mix().state_dict()
    assert fresh["epoch"] is None
    m = mix()
    m.load_state_dict(fresh)
    assert list(m) == list(mix())
    state = saved_state()
    m = mix()
    m.load_state_dict(state)
    assert len(list(m)) == len(list(mix())) - 6


def test_a_state_of_an_epoch_past_2_63_still_loads():
    m = mix()
    m.set_epoch((1 << 64) - 1)
    it = iter(m)
    head = [next(it) for _ in range(4)]
    state = json.loads(json.dumps(m.state_dict()))
    again = mix()
    again.load_state_dict(state)
    assert head + list(again) == head + list(it)
