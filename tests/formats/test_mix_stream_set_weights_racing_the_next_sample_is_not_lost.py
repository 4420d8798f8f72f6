"""``MixStream.set_weights`` from another thread that lands while the iterator is taking in the
previous call's weights (between its reads of them) still applies from the next sample: the
iterator read the weights three times, so it could compare the old ones, find no change, then
keep the new ones without a new plan: the mix went on by the old weights while ``state_dict()``
reported the new ones from the old segment (a resume from it diverged).  The other thread is
simulated by calling ``set_weights`` inside the iterator's comparison of the weights."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataloader import IterableDataset, MixDataset

pytestmark = pytest.mark.timeout(60)


class Count(IterableDataset):
    def __init__(self, base: int) -> None:
        self.base = base

    def __iter__(self):
        return iter(range(self.base, self.base + 10**6))


def mix() -> MixDataset:
    return MixDataset([Count(0), Count(10**7)], [1, 1], seed=1, stop_on="never", num_samples=400)


def test_weights_set_while_the_last_ones_are_read_apply_from_the_next_sample(monkeypatch):
    m = mix()
    it = iter(m)
    head = [next(it) for _ in range(10)]
    m.set_weights([1, 1])  # the same weights: no new segment ...
    real, fired = np.array_equal, []

    def racing(a, b, *args, **kwargs):
        equal = real(a, b, *args, **kwargs)
        if not fired:  # ... and the other thread's [1, 9] lands right after the comparison
            fired.append(True)
            m.set_weights([1, 9])
        return equal

    monkeypatch.setattr(np, "array_equal", racing)
    rest = [next(it) for _ in range(190)]
    monkeypatch.setattr(np, "array_equal", real)
    state = json.loads(json.dumps(m.state_dict()))
    assert fired and state["segment"] >= 10
    assert abs(sum(x >= 10**7 for x in rest) / len(rest) - 0.9) < 0.05
    again = mix()
    again.load_state_dict(state)
    assert list(again) == list(it) and len(head) == 10
