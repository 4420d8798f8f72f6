"""A MixDataset (and a loader over one) pickles and deep-copies, as any dataset does
(docs/usage.md, "Pickling and copying a loader"): the map-style one's __new__ took the sources
as required; a stream mix kept its running iteration (generators) in what it pickled."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, IterableDataset, MixDataset

pytestmark = pytest.mark.timeout(60)


def mix() -> MixDataset:
    return MixDataset([ArrayDataset(np.arange(100)), ArrayDataset(np.arange(1000, 1050))], [1, 3], seed=4)


def test_a_mix_pickles_and_deep_copies_with_its_weights_and_placement():
    original = mix()
    original.set_weights([2, 1])
    for other in (pickle.loads(pickle.dumps(original)), copy.deepcopy(original), copy.copy(original)):
        assert type(other) is MixDataset and len(other) == len(original)
        assert other.weights.tolist() == original.weights.tolist()
        assert [int(other[i][0]) for i in range(len(other))] == [int(original[i][0]) for i in range(len(original))]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_loader_over_a_mix_pickles_and_deep_copies(num_workers):
    loader = DataLoader(mix(), batch_size=8, shuffle=True, seed=1, num_workers=num_workers)

    def items(dl):
        return [int(x) for b in dl for x in b[0]]

    pickled, copied = pickle.loads(pickle.dumps(loader)), copy.deepcopy(loader)  # before its first epoch
    expected = items(loader)
    assert items(pickled) == expected and items(copied) == expected


def test_a_mix_without_sources_is_still_a_clear_error():
    with pytest.raises(TypeError, match="missing 2 required positional arguments: 'sources' and 'weights'"):
        MixDataset()


class Count(IterableDataset):
    def __init__(self, base: int) -> None:
        self.base = base

    def __iter__(self):  # a generator: it does not pickle
        for i in range(20):
            yield self.base + i


def test_a_loader_over_a_stream_mix_pickles_and_deep_copies_mid_epoch():
    def items(dl):
        return [int(x) for b in dl for x in b]

    whole = items(DataLoader(MixDataset([Count(0), Count(100)], [1, 1], seed=2), batch_size=4))
    loader = DataLoader(MixDataset([Count(0), Count(100)], [1, 1], seed=2), batch_size=4)
    it = iter(loader)
    head = [int(x) for x in next(it)]
    copies = [pickle.loads(pickle.dumps(loader)), copy.deepcopy(loader)]
    assert head + items(it) == whole  # the original goes on
    following = items(loader)  # its next epoch: the copies' first (an open epoch is not carried)
    assert [items(other) for other in copies] == [following, following]
