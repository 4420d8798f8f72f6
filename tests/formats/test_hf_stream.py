"""A Hugging Face ``datasets.IterableDataset`` on the iterable path: split across worker threads
by shards and across ranks as ``split_dataset_by_node`` does, resumed through its ``state_dict``.

Needs ``datasets`` (3.11; it does not install on 3.13t: PyYAML has no cp313t wheel).
"""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader.formats.hf_stream import HFIterableDataset

datasets = pytest.importorskip("datasets", reason="datasets does not install here (3.13t: no PyYAML cp313t wheel)")

N = 40


def _stream(num_shards: int = 4):
    return datasets.Dataset.from_dict({"id": np.arange(N), "v": np.arange(N) * 0.5}).to_iterable_dataset(num_shards)


def _ids(loader) -> list[int]:
    return [int(i) for batch in loader for i in batch["id"]]


def _torch_ids(stream, num_workers: int) -> list[int] | None:
    """torch's DataLoader's order over ``stream`` (worker processes), or None without torch."""
    try:
        import torch.utils.data as tud  # noqa: PLC0415 - optional
    except ImportError:
        return None
    return [int(i) for b in tud.DataLoader(stream, batch_size=3, num_workers=num_workers) for i in b["id"]]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("face", ["dataloader", "dataloader.torch"])
@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_worker_threads_split_by_shards_like_hf_and_torch(face, num_workers):
    if face == "dataloader.torch":
        pytest.importorskip("torch", reason="torch is not installed (3.13t)")
    stream = _stream()
    with importlib.import_module(face).DataLoader(stream, batch_size=3, num_workers=num_workers) as loader:
        got = _ids(loader)
    assert sorted(got) == list(range(N))  # every example once, whatever the worker count
    if num_workers == 2:  # worker w reads shards w, w + 2: the round robin of whole shards' rows
        assert got[:6] == [0, 1, 2, 10, 11, 12]
    want = _torch_ids(stream, num_workers)
    if want is not None:
        assert got == want


@pytest.mark.timeout(60)
def test_workers_beyond_the_shards_yield_nothing():
    with DataLoader(_stream(num_shards=2), batch_size=4, num_workers=3) as loader:
        assert sorted(_ids(loader)) == list(range(N))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("num_shards", "world_size"), [(4, 2), (3, 2)])  # by shards; by examples
@pytest.mark.parametrize("num_workers", [0, 2])
def test_ranks_split_like_split_dataset_by_node(num_shards, world_size, num_workers):
    parts = []
    for rank in range(world_size):
        ds = HFIterableDataset(_stream(num_shards), rank=rank, world_size=world_size)
        with DataLoader(ds, batch_size=4, num_workers=num_workers) as loader:
            parts.append(_ids(loader))
        if num_workers == 0:  # one stream: exactly HF's split of the node
            node = datasets.distributed.split_dataset_by_node(_stream(num_shards), rank=rank, world_size=world_size)
            assert parts[-1] == [int(r["id"]) for r in node]
    assert sorted(sum(parts, [])) == list(range(N))  # every example once across ranks and workers


@pytest.mark.timeout(120)
@pytest.mark.parametrize("face", ["dataloader", "dataloader.torch"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_resume_through_the_datasets_state_dict_gives_the_rest(face, num_workers):
    if face == "dataloader.torch":  # there HF splits by worker itself (torch's get_worker_info answers)
        pytest.importorskip("torch", reason="torch is not installed (3.13t)")
    loader_type = importlib.import_module(face).DataLoader
    with loader_type(_stream(), batch_size=3, num_workers=num_workers) as loader:
        whole = _ids(loader)
    assert sorted(whole) == list(range(N))
    loader = loader_type(_stream(), batch_size=3, num_workers=num_workers)
    it = iter(loader)
    head = [int(i) for _ in range(5) for i in next(it)["id"]]
    state = json.loads(json.dumps(loader.state_dict()))
    it.close()
    resumed = loader_type(_stream(), batch_size=3, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert head + _ids(resumed) == whole


def test_bad_arguments_are_clear_errors():
    with pytest.raises(TypeError, match="datasets.IterableDataset, got list"):
        HFIterableDataset([1])
    with pytest.raises(TypeError, match="both rank and world_size"):
        HFIterableDataset(_stream(), rank=0)
    with pytest.raises(ValueError, match="rank=2, world_size=2"):
        HFIterableDataset(_stream(), rank=2, world_size=2)
    with pytest.raises(TypeError, match="state must be the dict"):
        HFIterableDataset(_stream()).load_state_dict([1])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_saved_at_an_epoch_boundary_resumes_a_whole_next_epoch(num_workers):
    loader = DataLoader(_stream(), batch_size=3, num_workers=num_workers)
    assert sorted(_ids(loader)) == list(range(N))
    state = json.loads(json.dumps(loader.state_dict()))  # epoch 0 ended: epoch 1 is next
    resumed = DataLoader(_stream(), batch_size=3, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert sorted(_ids(resumed)) == list(range(N))  # not the ended epoch's last position (nothing left)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_a_state_taken_at_a_second_loaders_epoch_start_resumes_the_whole_epoch(num_workers):
    stream = _stream(num_shards=3)
    assert sorted(_ids(DataLoader(stream, batch_size=8, num_workers=num_workers))) == list(range(N))
    second = DataLoader(stream, batch_size=8, num_workers=num_workers)  # the stream ended once already
    it = iter(second)
    state = json.loads(json.dumps(second.state_dict()))
    it.close()
    assert state["dataset"] is None
    resumed = DataLoader(stream, batch_size=8, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert sorted(_ids(resumed)) == list(range(N))
    assert "dataloader_epoch" not in HFIterableDataset(_stream()).state_dict()


def _old_state(state, epoch):
    """``state`` as the previous release wrote it: the loader's epoch in each HF state."""
    def old(hf_state):
        return None if hf_state is None else {**hf_state, "dataloader_epoch": epoch}

    dataset = state["dataset"]
    if isinstance(dataset, dict) and "workers" in dataset:
        return {**state, "dataset": {**dataset, "workers": [old(w) for w in dataset["workers"]]}}
    return {**state, "dataset": old(dataset)}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_of_the_previous_release_with_the_loaders_epoch_still_loads(num_workers):
    def loader():
        return DataLoader(_stream(), batch_size=3, num_workers=num_workers)

    with loader() as reference:
        whole = _ids(reference)
    first = loader()
    it = iter(first)
    head = [int(i) for _ in range(4) for i in next(it)["id"]]
    mid = _old_state(json.loads(json.dumps(first.state_dict())), 0)
    it.close()
    with loader() as resumed:  # mid-epoch: resumed in its epoch
        resumed.load_state_dict(mid)
        assert head + _ids(resumed) == whole
    ended = HFIterableDataset(_stream())
    with DataLoader(ended, batch_size=3) as done:
        _ids(done)
        boundary = {**done.state_dict(), "dataset": {**ended.state_dict(), "dataloader_epoch": 0}}
    with loader() as resumed:  # the ended epoch 0's last position, saved for epoch 1: epoch 1 whole
        resumed.load_state_dict(boundary)
        assert sorted(_ids(resumed)) == list(range(N))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_resumed_epoch_leaves_the_users_stream_whole_for_the_next_epochs(num_workers):
    # HF's copies share one __dict__: a state loaded into the loader's copy once stayed on the
    # user's object, and with 0 workers every later epoch (and any new loader) resumed it.
    loader = DataLoader(_stream(), batch_size=3, num_workers=num_workers)
    it = iter(loader)
    head = [int(i) for _ in range(4) for i in next(it)["id"]]
    state = json.loads(json.dumps(loader.state_dict()))
    it.close()
    stream = _stream()
    resumed = DataLoader(stream, batch_size=3, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert sorted(head + _ids(resumed)) == list(range(N))
    assert sorted(_ids(resumed)) == list(range(N))
    assert sorted(_ids(DataLoader(stream, batch_size=3))) == list(range(N))
