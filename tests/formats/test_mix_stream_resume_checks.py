"""MixStream's resume refuses what it cannot continue from with a ValueError that says why:
a replayed source that no longer yields the items the state drew, a state that is not one."""

from __future__ import annotations

import json

import pytest

from dataloader import MixDataset
from tests.formats._mix_sources import Counter, state_after

pytestmark = pytest.mark.timeout(60)


def saved_state(n0: int = 50) -> dict:
    return state_after(MixDataset([Counter(0, n0), Counter(100, 50)], [1, 1], seed=0), 30)


def test_a_replayed_source_that_yields_fewer_items_than_were_drawn_is_named():
    state = saved_state()
    shorter = MixDataset([Counter(0, 3), Counter(100, 50)], [1, 1], seed=0)
    shorter.load_state_dict(state)
    with pytest.raises(ValueError, match=rf"sources\[0\] \(Counter\) yielded 3 items when replayed, but the "
                                         rf"resumed state had drawn {state['drawn'][0]} from it"):
        list(shorter)


@pytest.mark.parametrize("change, message", [
    (lambda s: s.pop("shares"), r"the keys \['shares'\] are missing"),
    (lambda s: s.update(shares=[1 << 32]), r"state has 1 sources in 'shares', this mix has 2"),
    (lambda s: s.update(shares=[1, 2]), r"shares must be >= 0 and sum to 2\*\*32, got \[1, 2\]"),
    (lambda s: s.update(done=[False]), r"state has 1 sources in 'done', this mix has 2"),
])
def test_a_state_that_is_not_a_mix_streams_is_refused_naming_what_is_wrong(change, message):
    state = saved_state()
    change(state)
    mix = MixDataset([Counter(0, 50), Counter(100, 50)], [1, 1], seed=0)
    with pytest.raises(ValueError, match=message):
        mix.load_state_dict(state)
    with pytest.raises(ValueError, match="not a MixStream state: a dict with the keys"):
        mix.load_state_dict([0, 0])


def test_a_good_state_still_resumes_exactly():
    mix = MixDataset([Counter(0, 50), Counter(100, 50)], [1, 1], seed=0)
    it = iter(mix)
    head = [next(it) for _ in range(30)]
    again = MixDataset([Counter(0, 50), Counter(100, 50)], [1, 1], seed=0)
    again.load_state_dict(json.loads(json.dumps(mix.state_dict())))
    assert head + list(again) == list(MixDataset([Counter(0, 50), Counter(100, 50)], [1, 1], seed=0))
