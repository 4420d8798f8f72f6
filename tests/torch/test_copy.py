"""Pickling and deep-copying ``dataloader.torch.DataLoader``, as torch's loader allows and
clients (Lightning, ...) do: a fresh loader of the same arguments, torch's randomness kept."""

from __future__ import annotations

import copy
import pickle

import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dataloader.torch as dt  # noqa: E402

pytestmark = pytest.mark.timeout(60)
N = 20
COPIES = {"pickle": lambda obj: pickle.loads(pickle.dumps(obj)), "deepcopy": copy.deepcopy}


def data():
    return tud.TensorDataset(torch.arange(N))


def ids(loader, epochs=2):
    return [[b[0].tolist() for b in loader] for _ in range(epochs)]


def init_worker(worker_id):
    torch.utils.data.get_worker_info()  # a module-level function: picklable


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copied_torch_loader_with_a_generator_yields_the_originals_next_epochs(how):
    original = dt.DataLoader(data(), batch_size=4, shuffle=True, num_workers=2,
                             generator=torch.Generator().manual_seed(3))
    ids(original, 1)
    twin = COPIES[how](original)
    assert isinstance(twin, tud.DataLoader) and isinstance(twin.sampler, tud.RandomSampler)
    assert isinstance(twin.batch_sampler, tud.BatchSampler) and twin.generator is not original.generator
    assert ids(twin) == ids(original)
    original.close()
    twin.close()


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copied_torch_loader_on_the_global_generator_draws_as_torchs_does(how):
    twin = COPIES[how](dt.DataLoader(data(), batch_size=4, shuffle=True))
    torch.manual_seed(9)
    theirs = ids(tud.DataLoader(data(), batch_size=4, shuffle=True))
    torch.manual_seed(9)
    assert ids(twin) == theirs


@pytest.mark.parametrize("how", sorted(COPIES))
def test_copying_a_feistel_loader_keeps_its_seed_and_draws_nothing_from_torch(how):
    torch.manual_seed(1)
    original = dt.DataLoader(data(), batch_size=4, shuffle=True, shuffle_order="feistel")
    state = torch.get_rng_state()
    twin = COPIES[how](original)
    assert torch.equal(torch.get_rng_state(), state)
    assert twin.seed == original.seed and ids(twin) == ids(original)


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copy_takes_the_worker_init_fn_assigned_after_construction(how):
    original = dt.DataLoader(data(), batch_size=4, num_workers=1)
    original.worker_init_fn = init_worker  # as Lightning's seed_everything(workers=True) does
    twin = COPIES[how](original)
    assert twin.worker_init_fn is init_worker
    assert ids(twin, 1) == ids(original, 1)
    original.close()
    twin.close()


def test_copy_copy_of_a_feistel_loader_draws_nothing_from_the_generator_it_shares():
    generator = torch.Generator().manual_seed(4)
    original = dt.DataLoader(data(), batch_size=4, shuffle=True, shuffle_order="feistel", generator=generator)
    state = generator.get_state()
    twin = copy.copy(original)
    assert torch.equal(generator.get_state(), state)
    assert twin.generator is generator and twin.seed == original.seed and ids(twin, 1) == ids(original, 1)
