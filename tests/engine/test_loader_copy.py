"""Pickling and copying a loader: a fresh loader of the same arguments, seed and epoch counter,
with no epoch open and no thread (dataloader/_reduce.py)."""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest

from dataloader import AsyncDataset, DataLoader, RandomSampler
from dataloader.io import HttpDataset
from dataloader.ndf import NdfDataset, save_ndf

pytestmark = pytest.mark.timeout(60)

COPIES = {
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
}
N = 23


def epochs(loader, count=2):
    return [[b.tolist() for b in loader] for _ in range(count)]


def double(batch):
    return [2 * x for x in batch]


class Doubles(AsyncDataset):
    """Item i is 2 * i, from a coroutine; picklable (no lock, no session)."""

    def __len__(self):
        return N

    async def __getitem__(self, index):
        return 2 * index


class Tagged(DataLoader):
    """A subclass whose ``__init__`` takes other arguments and sets an attribute of its own."""

    def __init__(self, data, tag):
        super().__init__(data, batch_size=5, shuffle=True, num_workers=1)
        self.tag = tag


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_copied_loader_yields_the_epochs_the_original_would_next(how, num_workers):
    original = DataLoader(np.arange(N), batch_size=4, shuffle=True, num_workers=num_workers)
    first = epochs(original, 1)
    twin = COPIES[how](original)
    assert twin is not original and twin.seed == original.seed
    assert epochs(twin) == epochs(original)
    assert first == epochs(DataLoader(np.arange(N), batch_size=4, shuffle=True, seed=original.seed), 1)
    assert (twin.batch_size, twin.num_workers, twin.drop_last) == (4, num_workers, False)
    original.close()
    twin.close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_loader_copied_mid_epoch_starts_fresh_and_leaves_the_open_epoch_alone(how):
    original = DataLoader(np.arange(N), batch_size=4, shuffle=True, num_workers=2, seed=5)
    it = iter(original)
    head = [next(it).tolist() for _ in range(2)]
    twin = COPIES[how](original)
    assert twin.stats is None  # no epoch of its own yet
    assert [b.tolist() for b in twin] == epochs(DataLoader(np.arange(N), batch_size=4, shuffle=True, seed=5))[1]
    assert head + [b.tolist() for b in it] == epochs(DataLoader(np.arange(N), batch_size=4, shuffle=True, seed=5), 1)[0]
    original.close()
    twin.close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_keeps_the_seed_drawn_from_a_generator_and_the_collate_fn_and_sampler(how):
    data = np.arange(N)
    original = DataLoader(data, batch_size=3, sampler=RandomSampler(data, generator=4), collate_fn=double,
                          generator=np.random.default_rng(1))
    twin = COPIES[how](original)
    assert twin.seed == original.seed and twin.collate_fn is double
    if how == "copy":  # copy.copy shares the arguments (this sampler's epoch count with them)
        assert twin.sampler is original.sampler
    else:  # the others copy them, with their state
        assert twin.sampler is not original.sampler
        assert [list(map(int, b)) for b in twin] == [list(map(int, b)) for b in original]


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_subclass_is_copied_with_its_own_attributes(how):
    original = Tagged(np.arange(N), tag="t")
    original.note = [1]  # set by a user after construction
    twin = COPIES[how](original)
    assert type(twin) is Tagged and twin.tag == "t" and twin.note == [1] and twin.batch_size == 5
    assert epochs(twin) == epochs(original)
    original.close()
    twin.close()


def test_copies_run_their_epochs_at_once_on_threads_of_their_own():
    original = DataLoader(np.arange(N), batch_size=2, num_workers=2, seed=1)
    twin = copy.copy(original)
    both = [[x.tolist() for x in pair] for pair in zip(original, twin)]  # two epochs, interleaved
    assert both == [[x.tolist()] * 2 for x in DataLoader(np.arange(N), batch_size=2)]
    names = {t.name for t in threading.enumerate()}
    assert any(n.startswith("dataloader-worker") for n in names)
    original.close()
    twin.close()


def test_an_ndf_dataset_loader_is_copied_with_its_file_reopened(tmp_path):
    save_ndf(tmp_path / "t.ndf", np.arange(40.0).reshape(10, 4))
    with NdfDataset(tmp_path / "t.ndf") as ds:
        original = DataLoader(ds, batch_size=4, shuffle=True, seed=2)
        twin = pickle.loads(pickle.dumps(original))
        assert [[p.tolist() for p in b] for b in twin] == [[p.tolist() for p in b] for b in original]
        assert twin.dataset is not ds
        twin.dataset.close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_loader_over_an_async_dataset_is_copied_with_an_event_loop_of_its_own(how):
    original = DataLoader(Doubles(), batch_size=4, num_workers=1, item_concurrency=2)
    twin = COPIES[how](original)
    assert [b.tolist() for b in twin] == [b.tolist() for b in original] == [
        [2 * i for i in range(s, min(s + 4, N))] for s in range(0, N, 4)]
    original.close()
    assert [b.tolist() for b in twin][0] == [0, 2, 4, 6]  # the original's loop stopped, not the copy's
    twin.close()


def test_pickling_a_loader_whose_arguments_do_not_pickle_fails_naming_them():
    loader = DataLoader(np.arange(N), collate_fn=lambda batch: batch)
    with pytest.raises((pickle.PicklingError, AttributeError), match="lambda"):
        pickle.dumps(loader)
    assert copy.deepcopy(loader).collate_fn is loader.collate_fn  # deepcopy keeps a function


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_pickling_or_deep_copying_a_loader_over_an_http_dataset_fails_naming_it_without_credentials(how):
    # It failed with "cannot pickle '_thread.lock' object", naming neither the dataset nor the loader.
    dataset = HttpDataset(["https://user:S3CRET@h/a?sig=S3CRET"])
    loader = DataLoader(dataset, batch_size=1)
    with pytest.raises(TypeError, match="cannot pickle or deep-copy HttpDataset") as caught:
        COPIES[how](loader)
    assert "S3CRET" not in str(caught.value) and "https://***@h/a?sig=***" in str(caught.value)
    twin = copy.copy(loader)  # shares the dataset
    assert twin.dataset is dataset and len(copy.copy(dataset)) == 1
    loader.close()
    twin.close()


def test_copy_copy_draws_nothing_from_the_generator_it_shares_with_the_original():
    # The rebuild's __init__ drew a base seed from the shared generator (then replaced it with
    # the original's): copying the loader moved the user's stream.
    generator = np.random.default_rng(1)
    original = DataLoader(np.arange(N), batch_size=3, shuffle=True, generator=generator)
    state = generator.bit_generator.state
    twin = copy.copy(original)
    assert generator.bit_generator.state == state
    assert twin.generator is generator and twin.seed == original.seed
    assert epochs(twin, 1) == epochs(original, 1)
