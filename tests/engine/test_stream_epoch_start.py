"""A stream's state taken at an epoch's start resumes the whole epoch.

A stateful ``IterableDataset`` such as ``TarShardDataset``, ``MixStream`` or a Hugging Face
stream reports the position of its current *or last* iteration, and its next ``iter()`` starts
a new one: after an epoch (of this loader or of an earlier one over the same object) its
``state_dict()`` is that ended iteration's last position.  A loader's state taken where the
epoch has drawn nothing yet (a fresh loader, an ended epoch, ``iter()`` before the first
``next()``) must not hold it, or the resumed epoch would be empty: it holds no dataset state,
and the epoch starts as ``iter(dataset)`` starts it.  A state loaded for the epoch (the
position it starts from) is kept.  Map-style datasets are not concerned.
"""

from __future__ import annotations

import pytest

from dataloader import DataLoader, IterableDataset, get_worker_info
from tests._support import json_roundtrip
from tests.formats._tars import keys_of, write_shards

pytestmark = pytest.mark.timeout(60)

N = 20


class LastRunStream(IterableDataset):
    """This worker's share of ``range(N)``; ``state_dict()`` is the position of the current or
    last iteration (``{"next": N}`` once it ended), ``load_state_dict`` sets where the next
    ``iter()`` starts (else at the beginning), as ``TarShardDataset`` and HF streams do."""

    def __init__(self):
        self.position = {"next": 0}
        self.start = None

    def __iter__(self):
        info = get_worker_info()
        wid, step = (info.id, info.num_workers) if info is not None else (0, 1)
        first = wid if self.start is None else self.start["next"]
        self.start, self.position = None, {"next": first}
        for i in range(first, N, step):
            self.position = {"next": i + step}
            yield i

    def state_dict(self):
        return dict(self.start if self.start is not None else self.position)

    def load_state_dict(self, sd):
        self.start = dict(sd)


def items(loader):
    return [i for batch in loader for i in batch]


def loader_over(ds, num_workers):
    return DataLoader(ds, batch_size=3, num_workers=num_workers, collate_fn=list)


def resumed_epoch(ds, state, num_workers):
    with loader_over(ds, num_workers) as again:
        again.load_state_dict(json_roundtrip(state))
        return sorted(items(again))


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_state_taken_before_the_first_batch_of_a_second_loader_resumes_the_whole_epoch(num_workers):
    ds = LastRunStream()
    with loader_over(ds, num_workers) as first:
        assert sorted(items(first)) == list(range(N))  # the object may now hold the ended position
    with loader_over(ds, num_workers) as second:  # a new loader: epoch 0 again
        it = iter(second)
        state = second.state_dict()
        it.close()
    assert state["dataset"] is None
    assert resumed_epoch(ds, state, num_workers) == list(range(N))
    assert resumed_epoch(LastRunStream(), state, num_workers) == list(range(N))


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_state_of_a_fresh_loader_over_a_used_stream_resumes_the_whole_epoch(num_workers):
    ds = LastRunStream()
    assert list(ds) == list(range(N))
    with loader_over(ds, num_workers) as fresh:
        state = fresh.state_dict()
    assert state["dataset"] is None
    assert resumed_epoch(ds, state, num_workers) == list(range(N))


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_state_saved_at_an_epoch_boundary_resumes_the_whole_next_epoch(num_workers):
    with loader_over(LastRunStream(), num_workers) as first:
        items(first)
        state = first.state_dict()
    assert (state["epoch"], state["yielded"], state["dataset"]) == (1, 0, None)
    assert resumed_epoch(LastRunStream(), state, num_workers) == list(range(N))


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_resumed_epoch_keeps_its_loaded_state_until_its_first_batch(num_workers):
    with loader_over(LastRunStream(), num_workers) as reference:
        full = items(reference)
    with loader_over(LastRunStream(), num_workers) as first:
        it = iter(first)
        head = next(it) + next(it)
        state = json_roundtrip(first.state_dict())
        it.close()
    with loader_over(LastRunStream(), num_workers) as again:
        again.load_state_dict(state)
        it = iter(again)
        assert again.state_dict()["dataset"] == state["dataset"]  # its start: the loaded position
        it.close()
        again.load_state_dict(json_roundtrip(again.state_dict()))
        assert head + items(again) == full


def test_an_interrupt_in_the_first_batch_resumes_the_whole_epoch():
    class Interrupted(LastRunStream):
        def __iter__(self):
            for i in super().__iter__():
                if i == 1 and self.armed:
                    raise KeyboardInterrupt
                yield i

    ds = Interrupted()
    ds.armed = False
    with loader_over(ds, 0) as first:
        items(first)
    ds.armed = True
    with loader_over(ds, 0) as second:
        with pytest.raises(KeyboardInterrupt):
            next(iter(second))
        state = second.state_dict()
    assert (state["yielded"], state["dataset"]) == (0, None)
    ds.armed = False
    assert resumed_epoch(ds, state, 0) == list(range(N))


class StatefulMap:
    """A map-style dataset with a state of its own: recorded as before, wherever the epoch is."""

    def __init__(self):
        self.version = {"v": 7}

    def __len__(self):
        return N

    def __getitem__(self, i):
        return i

    def state_dict(self):
        return dict(self.version)

    def load_state_dict(self, sd):
        self.version = dict(sd)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_map_style_datasets_state_is_recorded_at_an_epochs_start(num_workers):
    with loader_over(StatefulMap(), num_workers) as loader:
        assert loader.state_dict()["dataset"] == {"v": 7}
        it = iter(loader)
        assert loader.state_dict()["dataset"] == {"v": 7}
        it.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_tar_stream_saved_at_the_start_of_a_second_loaders_epoch_resumes_it_whole(tmp_path, num_workers):
    from dataloader import TarShardDataset

    ds = TarShardDataset(write_shards(tmp_path, 4, 5))
    everything = [f"{k:06d}" for k in range(20)]
    with loader_over(ds, num_workers) as first:
        assert sorted(keys_of(first)) == everything
    with loader_over(ds, num_workers) as second:
        it = iter(second)
        state = json_roundtrip(second.state_dict())
        it.close()
    with loader_over(ds, num_workers) as again:
        again.load_state_dict(state)
        assert sorted(keys_of(again)) == everything
