"""``dataloader.torch.DataLoader`` (0 and 2 worker threads) against ``torch.utils.data.DataLoader``
(``num_workers=0``): equal batches (``torch.equal``, dtypes, structure), errors included.

Runs where torch is installed (the 3.11 CI venv installs torch 2.13.0); skipped elsewhere.
Covers every torch dataset kind (``TensorDataset``, ``Subset``, ``ConcatDataset``,
``StackDataset``, map-style ``Dataset``, ``IterableDataset``), torch's samplers and batch
samplers, ``drop_last``, ``batch_size=None``, ``collate_fn=None`` with ``batch_sampler``, and
the collate corners (NumPy arrays and scalars, Python numbers, str, bytes, dicts, namedtuples,
nested lists) with their errors.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

from tests.torch._torch_helpers import assert_same_epochs, run  # noqa: E402

import dataloader  # noqa: E402
import dataloader.torch as dt  # noqa: E402

pytestmark = pytest.mark.timeout(60)

N = 23
Pair = collections.namedtuple("Pair", ["left", "right"])


def tensors(n=N):
    g = torch.Generator().manual_seed(1)
    return tud.TensorDataset(torch.randn(n, 3, generator=g), torch.arange(n) % 5, torch.arange(n) % 2 == 0)


class Rich(tud.Dataset):
    """Items of every kind default_collate handles; ``fail`` items raise KeyError."""

    def __init__(self, n=N, fail=()):
        self.n, self.fail = n, set(fail)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i in self.fail:
            raise KeyError(i)
        return {
            "x": np.full((2, 2), i, dtype=np.float32),
            "s": np.int16(i),
            "f": float(i) / 4,
            "i": i,
            "b": i % 3 == 0,
            "name": f"item{i}",
            "raw": bytes([i % 256]),
            "pair": Pair(np.uint8(i % 7), [i, -i]),
            "t": torch.full((3,), i, dtype=torch.float16),
        }


DATASETS = {
    "tensor": lambda: tensors(),
    "subset": lambda: tud.Subset(tensors(40), list(range(39, 39 - 2 * N, -2))[:N]),
    "concat": lambda: tud.ConcatDataset([tensors(9), tensors(N - 9)]),
    "stack-tuple": lambda: tud.StackDataset(tensors(), Rich()),
    "stack-dict": lambda: tud.StackDataset(a=tensors(), b=list(range(N))),
    "rich": lambda: Rich(),
    "our-stack": lambda: dataloader.StackDataset(x=tensors(), rich=Rich()),
    "our-array": lambda: dataloader.ArrayDataset(np.arange(N * 2, dtype=np.float32).reshape(N, 2), np.arange(N)),
}

SAMPLERS = {
    "default": lambda ds: None,
    "random": lambda ds: tud.RandomSampler(ds, generator=torch.Generator().manual_seed(3)),
    "random-replacement": lambda ds: tud.RandomSampler(
        ds, replacement=True, num_samples=31, generator=torch.Generator().manual_seed(3)
    ),
    "subset-random": lambda ds: tud.SubsetRandomSampler(range(3, N), generator=torch.Generator().manual_seed(3)),
    "weighted": lambda ds: tud.WeightedRandomSampler(
        [1.0 + i % 4 for i in range(N)], 17, generator=torch.Generator().manual_seed(3)
    ),
    "distributed": lambda ds: tud.DistributedSampler(ds, num_replicas=3, rank=1, shuffle=True, seed=5),
}


def loaders(dataset_factory, **kwargs):
    """torch's loader (num_workers=0) and ours with 0 and 2 workers, each on a fresh dataset/sampler."""
    factory = kwargs.pop("sampler_factory", None)
    bs_factory = kwargs.pop("batch_sampler_factory", None)

    def build(cls, **extra):
        ds = dataset_factory()
        more = dict(kwargs, **extra)
        if factory is not None and factory(ds) is not None:
            more["sampler"] = factory(ds)
        if bs_factory is not None:
            more["batch_sampler"] = bs_factory(ds)
        return cls(ds, **more)

    return build(tud.DataLoader), [build(dt.DataLoader, num_workers=w) for w in (0, 2)]


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
@pytest.mark.parametrize("dataset", sorted(DATASETS))
@pytest.mark.parametrize("batch_size, drop_last", [(4, False), (4, True), (1, False)])
def test_batches_equal_torchs_for_every_dataset_and_sampler(dataset, sampler, batch_size, drop_last):
    torch_loader, ours = loaders(
        DATASETS[dataset], batch_size=batch_size, drop_last=drop_last, sampler_factory=SAMPLERS[sampler]
    )
    expected = run(torch_loader)
    for loader in ours:
        assert len(loader) == len(torch_loader)
        assert_same_epochs(expected, run(loader))
        loader.close()


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_batch_size_none_converts_like_torch(dataset):
    torch_loader, ours = loaders(DATASETS[dataset], batch_size=None)
    expected = run(torch_loader)
    for loader in ours:
        assert_same_epochs(expected, run(loader))
        loader.close()


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("dataset", ["tensor", "rich", "stack-dict"])
def test_torch_batch_sampler_with_collate_fn_none(dataset, drop_last):
    def batch_sampler(ds):
        return tud.BatchSampler(tud.RandomSampler(ds, generator=torch.Generator().manual_seed(7)), 5, drop_last)

    torch_loader, ours = loaders(DATASETS[dataset], batch_sampler_factory=batch_sampler, collate_fn=None)
    expected = run(torch_loader)
    for loader in ours:
        assert len(loader) == len(torch_loader)
        assert_same_epochs(expected, run(loader))
        loader.close()


def test_plain_list_batch_sampler_like_torch():
    lists = [[5], [0, 1, 2], [22, 21], [7, 7]]
    torch_loader, ours = loaders(lambda: Rich(), batch_sampler_factory=lambda ds: lists)
    for loader in ours:
        assert_same_epochs(run(torch_loader), run(loader))
        loader.close()


class Odd(tud.Dataset):
    """Items that make default_collate fail at known batches."""

    def __init__(self, kind):
        self.kind = kind

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if i == 6:
            return {
                "none": None,
                "shape": torch.zeros(3),
                "np-shape": np.zeros(3),
                "object": np.array([object()]),
                "strings": np.array(["a"]),
                "length": [1, 2, 3],
                "missing": {},
                "set": {1},
            }[self.kind]
        return {
            "none": 1,
            "shape": torch.zeros(2),
            "np-shape": np.zeros(2),
            "object": np.array([1]),
            "strings": np.array([1]),
            "length": [1, 2],
            "missing": {"k": 1},
            "set": 1,
        }[self.kind]


@pytest.mark.parametrize("kind", ["none", "shape", "np-shape", "object", "strings", "length", "set"])
def test_collate_errors_have_torchs_types_at_the_same_batches(kind):
    torch_loader, ours = loaders(lambda: Odd(kind), batch_size=4)
    expected = run(torch_loader)
    assert ("error", "TypeError") in expected or ("error", "RuntimeError") in expected
    for loader in ours:
        assert_same_epochs(expected, run(loader))
        loader.close()


def test_item_errors_keep_their_type_and_position_like_torch():
    torch_loader, ours = loaders(lambda: Rich(fail={3, 9, 10, 22}), batch_size=4)
    expected = run(torch_loader)
    assert [b for b in expected if isinstance(b, tuple)] == [("error", "KeyError")] * 3
    for loader in ours:
        assert_same_epochs(expected, run(loader))
        loader.close()


class Counting(tud.IterableDataset):
    """PyTorch's documented sharding example: each worker takes one contiguous part."""

    def __init__(self, start, end):
        super().__init__()
        self.start, self.end = start, end

    def __len__(self):
        return self.end - self.start

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is None:
            lo, hi = self.start, self.end
        else:
            per_worker = int(math.ceil((self.end - self.start) / float(info.num_workers)))
            lo = self.start + info.id * per_worker
            hi = min(lo + per_worker, self.end)
        for i in range(lo, hi):
            yield {"x": np.float64(i), "y": torch.tensor([i, i])}


@pytest.mark.parametrize("batch_size, drop_last", [(None, False), (3, False), (3, True)])
def test_iterable_dataset_without_workers_equals_torch(batch_size, drop_last):
    expected = run(tud.DataLoader(Counting(0, 11), batch_size=batch_size, drop_last=drop_last))
    ours = dt.DataLoader(Counting(0, 11), batch_size=batch_size, drop_last=drop_last)
    assert_same_epochs(expected, run(ours))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("batch_size, drop_last", [(None, False), (3, False), (3, True)])
def test_sharded_iterable_dataset_with_two_workers_equals_torchs_two_processes(batch_size, drop_last):
    kwargs = dict(batch_size=batch_size, drop_last=drop_last, num_workers=2)
    expected = run(tud.DataLoader(Counting(0, 11), **kwargs))
    with dt.DataLoader(Counting(0, 11), **kwargs) as ours:
        assert_same_epochs(expected, run(ours))


def test_torch_generator_seeds_shuffle_reproducibly():
    ds = tensors()

    def epoch(workers):
        loader = dt.DataLoader(ds, batch_size=4, shuffle=True, num_workers=workers,
                               generator=torch.Generator().manual_seed(42))
        with loader:
            return [b[1].tolist() for b in loader]

    first = epoch(0)
    assert first == epoch(0) == epoch(2)
    assert sorted(i for b in first for i in b) == sorted((torch.arange(N) % 5).tolist())


def test_each_epoch_draws_from_the_generator_as_torchs_loader_does():
    g, t_g = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    loader, theirs = dt.DataLoader(tensors(), generator=g), tud.DataLoader(tensors(), generator=t_g)
    assert torch.equal(g.get_state(), t_g.get_state())  # nothing drawn at construction
    for _ in range(2):  # one base seed per epoch, drawn at iter(loader)
        list(loader)
        list(theirs)
        assert torch.equal(g.get_state(), t_g.get_state())


def test_the_numpy_loader_collates_torch_tensors_into_tensors():
    ds = tensors()
    for workers in (0, 2):
        with dataloader.DataLoader(ds, batch_size=4, num_workers=workers) as loader:
            got = list(loader)
        assert_same_epochs(run(tud.DataLoader(ds, batch_size=4)), got)


def test_the_numpy_collate_names_the_field_of_unequal_tensors():
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2\] at entry 0 and \[3\] at entry 1 \[in field sample\['a'\]\]"):
        dataloader.default_collate([{"a": torch.ones(2)}, {"a": torch.ones(3)}])


def test_our_stack_dataset_items_equal_torchs():
    a, b = tensors(), Rich()
    ours, theirs = dataloader.StackDataset(a, b), tud.StackDataset(a, b)
    named_ours, named_theirs = dataloader.StackDataset(a=a, b=b), tud.StackDataset(a=a, b=b)
    for i in (0, 5, N - 1):
        assert_same_epochs([theirs[i], named_theirs[i]], [ours[i], named_ours[i]])
    idx = [3, 0, 7]
    assert_same_epochs(theirs.__getitems__(idx), ours.__getitems__(idx))
    assert_same_epochs(named_theirs.__getitems__(idx), named_ours.__getitems__(idx))


def test_random_split_rules_match_torchs():
    for lengths in ([0.1], [1.1]):
        with pytest.raises(ValueError):
            tud.random_split([1, 2, 3, 4], lengths)
        with pytest.raises(ValueError):
            dataloader.random_split([1, 2, 3, 4], lengths)
    for lengths in ([0.1, 0.2, 0.3, 0.4], [0.5, 0.5], [0.33, 0.67]):
        t = [len(p) for p in tud.random_split(range(106), lengths)]
        assert [len(p) for p in dataloader.random_split(range(106), lengths, generator=0)] == t


def test_the_numpy_loader_takes_a_torch_generator():
    ds = tensors()

    def order():
        loader = dataloader.DataLoader(ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
        return [b[1].tolist() for b in loader]

    assert order() == order()
    assert sorted(i for b in order() for i in b) == sorted((torch.arange(N) % 5).tolist())
