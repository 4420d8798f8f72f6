"""A MixStream state whose ``dropped`` is not one bool per source, or marks a source that had
not ended its pass, is refused on load with a ValueError naming the value: taken as it was
(``bool()`` of each entry), a dropped source that never counts as done made an
``all_exhausted`` epoch endless, and a string or a dict made it silently empty."""

from __future__ import annotations

import json

import pytest

from dataloader import MixDataset
from tests.formats._mix_sources import Counter, state_after

pytestmark = pytest.mark.timeout(60)


def mix() -> MixDataset:
    return MixDataset([Counter(0, 0), Counter(100, 15)], [1, 1], seed=3, stop_on="all_exhausted")


def saved_state() -> dict:
    return state_after(mix(), 3)


@pytest.mark.parametrize("dropped, message", [
    (["no", 0], r"must hold bools \(true/false\), got \['no', 0\]"),
    ([1, 0], r"must hold bools \(true/false\), got \[1, 0\]"),
    ([None, None], r"must hold bools"),
    (None, r"must be a list of 2 bools \(one per source\), got None"),
    ("ab", r"must be a list of 2 bools \(one per source\), got 'ab'"),
    ({"a": 1, "b": 2}, r"must be a list of 2 bools"),
    ([True], r"must be a list of 2 bools"),
    ([True, True], r"marks a source that is not 'done' \(\[False, False\]\)"),
])
def test_a_malformed_dropped_is_refused_naming_it(dropped, message):
    state = saved_state()
    assert state["done"] == [False, False]
    m = mix()
    with pytest.raises(ValueError, match=r"state's 'dropped'.*" + message):
        m.load_state_dict(dict(state, dropped=dropped))


def test_a_state_with_a_real_drop_still_resumes_exactly():
    m = mix()
    it = iter(m)
    head = [next(it) for _ in range(8)]
    state = json.loads(json.dumps(m.state_dict()))
    assert state["dropped"] == [True, False] and state["done"][0] is True
    again = mix()
    again.load_state_dict(state)
    assert head + list(again) == list(mix())
