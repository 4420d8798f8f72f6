"""A MixStream whose iterator (a worker's, or the only one) gets nothing from a source in a
whole pass (fewer shards than workers, or all of its shards of that source bad under
``on_error="skip"``) drops that source from its own mix for the rest of the epoch under
``stop_on="all_exhausted"`` / ``"never"``: the other sources, renormalised, from that position on,
recorded in the state so a resume continues exactly; the user's weights stay."""

from __future__ import annotations

import json

import pytest

from dataloader import DataLoader, IterableDataset, MixDataset, get_worker_info

pytestmark = pytest.mark.timeout(60)


class Shards(IterableDataset):
    """``shards`` shards of 5 numbers from ``base``, dealt to the workers (shard ``k`` to worker
    ``k % num_workers``), as ``TarShardDataset`` deals its shards."""

    def __init__(self, base: int, shards: int) -> None:
        self.base, self.shards = base, shards

    def __iter__(self):
        info = get_worker_info()
        workers, me = (1, 0) if info is None else (info.num_workers, info.id)
        for k in range(me, self.shards, workers):
            yield from range(self.base + 5 * k, self.base + 5 * k + 5)


@pytest.mark.parametrize("stop_on", ["all_exhausted", "never"])
def test_a_worker_with_no_shard_of_a_source_mixes_the_others(stop_on):
    extra = {"num_samples": 40} if stop_on == "never" else {}
    mix = MixDataset([Shards(0, 2), Shards(100, 3)], [1, 1], stop_on=stop_on, **extra)
    out = [x for b in DataLoader(mix, batch_size=2, num_workers=3, collate_fn=list) for x in b]
    assert set(out) == set(range(10)) | set(range(100, 115))  # worker 2 gave source 1 alone
    assert mix.weights.tolist() == [0.5, 0.5]
    if stop_on == "never":
        assert len(out) == 3 * 40


def test_the_drop_is_in_the_state_and_leaves_the_weights():
    mix = MixDataset([Shards(0, 0), Shards(100, 3), Shards(200, 3)], [1, 1, 2], seed=3, stop_on="never",
                     num_samples=50)
    it = iter(mix)
    head = [next(it) for _ in range(20)]
    state = mix.state_dict()
    assert state["dropped"] == [True, False, False] and state["segment"] > 0
    assert mix.weights.tolist() == [0.25, 0.25, 0.5] and len(head) == 20
    # from the drop on, sources 1 and 2 are mixed 1:2 (exact to one per block of 4096)
    rest = head[state["segment"]:] + list(it)
    assert abs(sum(x >= 200 for x in rest) - 2 * len(rest) / 3) <= 2


def test_a_state_saved_before_dropped_existed_still_loads():
    mix = MixDataset([Shards(0, 3), Shards(100, 3)], [1, 1], seed=1, stop_on="all_exhausted")
    it = iter(mix)
    head = [next(it) for _ in range(7)]
    state = mix.state_dict()
    del state["dropped"]
    again = MixDataset([Shards(0, 3), Shards(100, 3)], [1, 1], seed=1, stop_on="all_exhausted")
    again.load_state_dict(state)
    assert head + list(again) == list(MixDataset([Shards(0, 3), Shards(100, 3)], [1, 1], seed=1,
                                                 stop_on="all_exhausted"))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("stop_on", ["all_exhausted", "never"])
def test_resume_after_a_drop_continues_exactly(num_workers, stop_on):
    # source 0 has no shard for the only iterator (0 and 1 workers) or for worker 1 (2 workers)
    def loader():
        extra = {"num_samples": 60} if stop_on == "never" else {}
        mix = MixDataset([Shards(0, max(0, num_workers - 1)), Shards(100, 6), Shards(200, 4)], [1, 2, 1],
                         seed=7, stop_on=stop_on, **extra)
        return DataLoader(mix, batch_size=4, num_workers=num_workers, collate_fn=list)

    full = [x for b in loader() for x in b]
    cut = loader()
    it = iter(cut)
    head = [x for _ in range(5) for x in next(it)]
    state = json.loads(json.dumps(cut.state_dict()))
    it.close()
    assert '"dropped": [true' in json.dumps(state)  # the drop happened before the save
    resumed = loader()
    resumed.load_state_dict(state)
    rest = [x for b in resumed for x in b]
    assert head + rest == full
    assert len(full) > 20 and {x for x in full if x < 100} == (set(range(5)) if num_workers == 2 else set())


def test_an_empty_source_under_first_exhausted_is_an_error_naming_it_and_the_rule():
    mix = MixDataset([Shards(0, 3), Shards(100, 0)], [1, 1], stop_on="first_exhausted")
    with pytest.raises(ValueError, match=r"sources\[1\] yielded nothing in this epoch under "
                                         r"stop_on='first_exhausted'.*'all_exhausted' or 'never'.*\)$"):
        list(mix)


def test_an_empty_worker_share_under_first_exhausted_names_the_worker():
    mix = MixDataset([Shards(0, 2), Shards(100, 3)], [1, 1], stop_on="first_exhausted")
    with pytest.raises(ValueError, match=r"sources\[0\] yielded nothing in this epoch under stop_on="
                                         r"'first_exhausted'.*, in worker 2 of 3: .*fewer shards than workers"):
        list(DataLoader(mix, batch_size=2, num_workers=3, collate_fn=list))


def test_a_source_that_runs_out_under_first_exhausted_still_ends_the_epoch_quietly():
    mix = MixDataset([Shards(0, 1), Shards(100, 3)], [1, 1], stop_on="first_exhausted")
    out = list(mix)
    assert set(range(5)) <= set(out) and len(out) < 20
