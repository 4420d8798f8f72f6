"""A MixStream's new weights set after ``loader.load_state_dict(state)`` (the documented order)
apply from the resumed sample: the loader loads the state only when its next epoch starts,
and that load used to put the state's weights back over the new ones."""

from __future__ import annotations

import json

import pytest

from dataloader import DataLoader, IterableDataset, MixDataset, get_worker_info

pytestmark = pytest.mark.timeout(60)


class Shard(IterableDataset):
    """``base + i`` for ``i < n``, each worker its own share; no state (resumed by replay)."""

    def __init__(self, base: int, n: int) -> None:
        self.base, self.n = base, n

    def __iter__(self):
        info = get_worker_info()
        step, first = (1, 0) if info is None else (info.num_workers, info.id)
        return iter(range(self.base + first, self.base + self.n, step))


def mix():
    return MixDataset([Shard(0, 400), Shard(1000, 400)], [0.5, 0.5], seed=1, stop_on="never", num_samples=200)


def saved(num_workers: int) -> tuple[list[int], dict]:
    loader = DataLoader(mix(), batch_size=10, num_workers=num_workers)
    it = iter(loader)
    head = [int(x) for _ in range(4) for x in next(it)]
    return head, json.loads(json.dumps(loader.state_dict()))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_weights_set_after_the_loaders_load_state_dict_apply_from_the_resumed_sample(num_workers):
    head, state = saved(num_workers)
    resumed = mix()
    loader = DataLoader(resumed, batch_size=10, num_workers=num_workers)
    loader.load_state_dict(state)
    resumed.set_weights([0, 1])
    rest = [int(x) for b in loader for x in b]
    assert rest and all(x >= 1000 for x in rest)
    assert len(set(head + rest)) == len(head + rest)  # each source went on where it was


@pytest.mark.parametrize("num_workers", [0, 2])
def test_the_same_weights_set_again_after_load_state_dict_resume_exactly(num_workers):
    whole = [int(x) for b in DataLoader(mix(), batch_size=10, num_workers=num_workers) for x in b]
    head, state = saved(num_workers)
    resumed = mix()
    loader = DataLoader(resumed, batch_size=10, num_workers=num_workers)
    loader.load_state_dict(state)
    resumed.set_weights([0.5, 0.5])
    rest = [int(x) for b in loader for x in b]
    assert head + rest == whole
