"""A map-style MixDataset in the loader: the same batches for any worker count, the loader's
epoch in the choice, exact resume (also with new weights), rank sharding and the error policy."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support import json_roundtrip

from dataloader import DataLoader, Dataset, DistributedSampler, MixDataset, ShardSampler


class Tagged(Dataset):
    """Item ``i`` is ``base + i``; items in ``bad`` raise ``OSError``."""

    def __init__(self, base: int, n: int, bad=()) -> None:
        self.base, self.n, self.bad = base, n, set(bad)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i in self.bad:
            raise OSError(f"unreadable {self.base + i}")
        return self.base + int(i)

    def location(self, i: int) -> str:
        return f"part-{self.base}/{i}"


def make_mix(bad=(), **kw) -> MixDataset:
    kw.setdefault("seed", 7)
    return MixDataset([Tagged(0, 600, bad), Tagged(10_000, 300), Tagged(20_000, 200)], [0.5, 0.3, 0.2], **kw)


def epochs(loader, n=2) -> list[list[int]]:
    return [[int(x) for b in loader for x in b] for _ in range(n)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_are_the_same_for_any_worker_count_and_differ_between_epochs(shuffle):
    runs = [epochs(DataLoader(make_mix(), batch_size=16, shuffle=shuffle, num_workers=w, seed=3))
            for w in (0, 1, 3)]
    assert runs[0] == runs[1] == runs[2]
    first, second = runs[0]
    assert first != second and sorted(first) == sorted(second)  # the mix's epoch is the loader's
    mix = make_mix()
    assert len(first) == len(mix) and sorted(first) == sorted(mix[i] for i in range(len(mix)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("k", [0, 5, 40])
def test_a_resumed_loader_yields_the_rest_of_an_uninterrupted_epoch(num_workers, k):
    def loader():
        return DataLoader(make_mix(), batch_size=16, shuffle=True, num_workers=num_workers, seed=1)

    whole = [b.tolist() for b in loader()]
    first = loader()
    it = iter(first)
    head = [next(it).tolist() for _ in range(k)]
    state = json_roundtrip(first.state_dict())
    again = loader()
    again.load_state_dict(state)
    assert head + [b.tolist() for b in again] == whole


@pytest.mark.timeout(60)
def test_new_weights_after_load_state_dict_apply_from_the_next_sample():
    def loader(mix):
        return DataLoader(mix, batch_size=50, num_workers=2, seed=1)

    old = MixDataset([Tagged(0, 10**5), Tagged(10**6, 10**5)], [0.9, 0.1], seed=2, stop_on="never", num_samples=4000)
    new = MixDataset([Tagged(0, 10**5), Tagged(10**6, 10**5)], [0.2, 0.8], seed=2, stop_on="never", num_samples=4000)
    first = loader(old)
    it = iter(first)
    head = [next(it).tolist() for _ in range(10)]
    state = json_roundtrip(first.state_dict())
    resumed_mix = MixDataset([Tagged(0, 10**5), Tagged(10**6, 10**5)], [0.9, 0.1], seed=2, stop_on="never",
                             num_samples=4000)
    resumed = loader(resumed_mix)
    resumed.load_state_dict(state)
    resumed_mix.set_weights([0.2, 0.8])
    rest = [b.tolist() for b in resumed]
    assert head == [b.tolist() for b in loader(old)][:10]
    assert rest == [b.tolist() for b in loader(new)][10:]  # positions 500.. under the new weights
    share = np.mean(np.array(rest) >= 10**6)
    assert abs(share - 0.8) < 0.03


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sampler", ["distributed", "shard"])
@pytest.mark.parametrize("shuffle", [False, True])
def test_ranks_read_different_positions_and_together_the_whole_mix(sampler, shuffle):
    mix = make_mix()
    world = 3
    per_rank = []
    for rank in range(world):
        if sampler == "distributed":
            s = DistributedSampler(mix, num_replicas=world, rank=rank, shuffle=shuffle, seed=4, drop_last=True)
        else:
            s = ShardSampler(mix, num_shards=world, shard_id=rank, shuffle=shuffle, seed=4)
        per_rank.append([int(x) for b in DataLoader(mix, batch_size=10, sampler=s, num_workers=2) for x in b])
    union = sorted(x for items in per_rank for x in items)
    everything = sorted(mix[i] for i in range(len(mix)))
    assert len(set(union)) == len(union)  # first_exhausted: no item twice, across ranks too
    if sampler == "shard" or len(mix) % world == 0:
        assert union == everything
    else:
        assert set(union) <= set(everything) and len(union) == len(mix) // world * world


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_a_failing_item_of_one_source_is_skipped_or_replaced_alone(num_workers, policy):
    clean = [int(x) for b in DataLoader(make_mix(), batch_size=16) for x in b]
    loader = DataLoader(make_mix(bad={5, 17}), batch_size=16, num_workers=num_workers, on_error=policy, seed=0)
    got = [int(x) for b in loader for x in b]
    bad = {5, 17}
    if policy == "skip":
        assert got == [x for x in clean if x not in bad]
    else:
        assert len(got) == len(clean)
        assert [g for g, c in zip(got, clean, strict=True) if g != c] and not bad & set(got)
        assert [c for g, c in zip(got, clean, strict=True) if g != c] == [x for x in clean if x in bad]
    assert sorted(r.index for r in loader.failures) == sorted(clean.index(x) for x in bad)
    assert sorted(r.location for r in loader.failures) == ["part-0/17", "part-0/5"]  # the source's own
