"""torch's randomness in ``dataloader.torch``: torch's sample order, and exact resume with torch's samplers.

For one ``torch.manual_seed`` or one ``torch.Generator`` state the loader yields torch's
``DataLoader``'s batches, epoch after epoch (``dataloader.torch._draws``); a state saved
mid-epoch resumes the same order in a fresh loader whose generators start elsewhere.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dataloader  # noqa: E402
import dataloader.torch as dt  # noqa: E402

pytestmark = pytest.mark.timeout(60)
N = 40


def data():
    return tud.TensorDataset(torch.arange(N))


def ids(loader, epochs=2):
    return [[b[0].tolist() for b in loader] for _ in range(epochs)]


def gen(seed):
    return torch.Generator().manual_seed(seed)


SAMPLERS = {  # name -> (sampler kwargs builder taking a generator), yielding torch's draws
    "shuffle": lambda g: {"shuffle": True, "generator": g},
    "RandomSampler": lambda g: {"sampler": tud.RandomSampler(range(N), generator=g)},
    "RandomSampler-replacement": lambda g: {"sampler": tud.RandomSampler(range(N), True, 50, generator=g)},
    "SubsetRandomSampler": lambda g: {"sampler": tud.SubsetRandomSampler(list(range(0, N, 2)), generator=g)},
    "WeightedRandomSampler": lambda g: {"sampler": tud.WeightedRandomSampler([1.0 + i % 3 for i in range(N)], 30,
                                                                              generator=g)},
    "DistributedSampler": lambda g: {"sampler": tud.DistributedSampler(range(N), num_replicas=2, rank=1, seed=7)},
}


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_manual_seed_gives_torchs_shuffle(workers):
    torch.manual_seed(3)
    theirs = ids(tud.DataLoader(data(), batch_size=6, shuffle=True))
    after_theirs = torch.rand(1)
    torch.manual_seed(3)
    with dt.DataLoader(data(), batch_size=6, shuffle=True, num_workers=workers) as loader:
        assert ids(loader) == theirs
    assert torch.equal(torch.rand(1), after_theirs)  # the default generator advanced as torch's did
    torch.manual_seed(4)
    with dt.DataLoader(data(), batch_size=6, shuffle=True, num_workers=workers) as loader:
        assert ids(loader) != theirs


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_the_sample_order_equals_torchs_for_one_generator_state(name):
    theirs = ids(tud.DataLoader(data(), batch_size=4, **SAMPLERS[name](gen(11))), 3)
    with dt.DataLoader(data(), batch_size=4, num_workers=2, **SAMPLERS[name](gen(11))) as loader:
        assert ids(loader, 3) == theirs


def test_random_split_is_torchs():
    parts = dt.random_split(range(N), [0.25, 0.75], generator=gen(5))
    theirs = tud.random_split(range(N), [0.25, 0.75], generator=gen(5))
    assert [list(p) for p in parts] == [list(p) for p in theirs]


def test_the_loaders_samplers_are_torchs():
    loader = dt.DataLoader(data(), batch_size=4, shuffle=True)
    assert isinstance(loader, tud.DataLoader)
    assert type(loader.sampler) is tud.RandomSampler and type(loader.batch_sampler) is tud.BatchSampler
    assert type(dt.DataLoader(data()).sampler) is tud.SequentialSampler


@pytest.mark.parametrize("name", sorted(SAMPLERS) + ["default-generator"])
@pytest.mark.parametrize("workers", [0, 2])
def test_resume_mid_epoch_with_torchs_samplers_is_exact(name, workers):
    def build(seed):
        if name == "default-generator":
            torch.manual_seed(seed)
            return dt.DataLoader(data(), batch_size=4, shuffle=True, num_workers=workers)
        return dt.DataLoader(data(), batch_size=4, num_workers=workers, **SAMPLERS[name](gen(seed)))

    with build(1) as full:
        epochs = ids(full, 2)
    with build(1) as first:
        it = iter(first)
        head = [next(it)[0].tolist() for _ in range(3)]
        state = json.loads(json.dumps(first.state_dict()))  # JSON-serialisable
        it.close()
    assert head == epochs[0][:3]
    with build(99) as resumed:  # its generators start elsewhere: the state restores them
        resumed.load_state_dict(state)
        rest = [b[0].tolist() for b in resumed]
        assert head + rest == epochs[0]
        if name != "DistributedSampler":  # its epoch is the caller's (set_epoch), as in torch
            nxt = [b[0].tolist() for b in resumed]
            assert nxt == epochs[1] or name == "default-generator"


def test_a_torch_sampler_on_the_global_generator_cannot_be_saved_mid_epoch():
    loader = dt.DataLoader(data(), batch_size=4, sampler=tud.RandomSampler(range(N)))
    it = iter(loader)
    next(it)
    with pytest.raises(ValueError, match=r"RandomSampler\(generator=None\) draws from torch's global generator"):
        loader.state_dict()
    it.close()


def test_feistel_order_is_the_numpy_faces():
    ours = dt.DataLoader(data(), batch_size=4, shuffle=True, shuffle_order="feistel", seed=3)
    numpy_face = dataloader.DataLoader(data(), batch_size=4, shuffle=True, seed=3)
    assert ids(ours) == [[b[0].tolist() for b in numpy_face] for _ in range(2)]
    assert isinstance(ours.sampler, dataloader.RandomSampler)
    with pytest.raises(ValueError, match="shuffle_order must be 'torch' or 'feistel', got 'numpy'"):
        dt.DataLoader(data(), shuffle_order="numpy")


def test_with_the_default_generator_later_epochs_follow_every_global_draw_as_torchs_do():
    def epochs(make, draw_between):
        torch.manual_seed(11)
        loader = make(data(), batch_size=4, shuffle=True)
        first = [b[0].tolist() for b in loader]
        if draw_between:
            torch.rand(3)  # e.g. a training step's dropout
        return first, [b[0].tolist() for b in loader]

    for draw in (False, True):
        assert epochs(dt.DataLoader, draw) == epochs(tud.DataLoader, draw)
    plain, drawn = epochs(dt.DataLoader, False), epochs(dt.DataLoader, True)
    assert plain[0] == drawn[0] and plain[1] != drawn[1]


def test_the_feistel_order_without_a_seed_follows_torch_manual_seed():
    def run(seed):
        torch.manual_seed(seed)
        loader = dt.DataLoader(data(), batch_size=4, shuffle=True, shuffle_order="feistel")
        torch.rand(3)  # torch draws after construction do not move the order
        return loader.seed, ids(loader)

    assert run(7) == run(7)
    assert run(7)[1] != run(8)[1]
    torch.manual_seed(7)
    drawn = int(torch.empty((), dtype=torch.int64).random_().item())  # torch's base-seed draw
    assert run(7)[0] == drawn and 0 <= drawn < 2**63
    torch.manual_seed(7)
    given = dt.DataLoader(data(), batch_size=4, shuffle=True, shuffle_order="feistel", seed=3)
    assert given.seed == 3 and torch.empty((), dtype=torch.int64).random_().item() == drawn  # no draw


def test_a_torch_sampler_state_records_and_checks_how_the_loader_cuts_its_epoch():
    with dt.DataLoader(data(), batch_size=4, shuffle=True, generator=gen(3)) as loader:
        it = iter(loader)
        next(it)
        state = loader.state_dict()
        it.close()
    assert state["loader"]["batch_size"] == 4 and state["loader"]["dataset_len"] == N
    other = dt.DataLoader(data(), batch_size=8, shuffle=True, generator=gen(3))
    with pytest.raises(ValueError, match="batch_size"):
        other.load_state_dict(state)


def test_a_state_of_one_face_loaded_into_the_other_names_the_face_that_saved_it():
    def state(loader):
        it = iter(loader)
        next(it)
        sd = loader.state_dict()
        it.close()
        return sd

    numpy_sd = state(dataloader.DataLoader(list(range(N)), batch_size=4, shuffle=True, seed=1))
    torch_sd = state(dt.DataLoader(list(range(N)), batch_size=4, shuffle=True, generator=gen(1)))
    with pytest.raises(ValueError, match=r"saved by dataloader\.DataLoader \(the NumPy face\)"):
        dt.DataLoader(list(range(N)), batch_size=4, shuffle=True).load_state_dict(numpy_sd)
    with pytest.raises(ValueError, match=r"saved by dataloader\.torch\.DataLoader"):
        dataloader.DataLoader(list(range(N)), batch_size=4, shuffle=True).load_state_dict(torch_sd)
