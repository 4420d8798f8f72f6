"""PyTorch's own ``test/test_dataloader.py`` (``TestDataLoader`` and friends), translated.

Each test here expresses one scenario of PyTorch's suite, with its expectations, against
``dataloader.torch.DataLoader`` (our code, not a copy of theirs).  The scenarios that do not
apply to thread workers are listed, with the reason, in docs/usage.md ("PyTorch's test
suite"); where a scenario applies only in part, the test says which part and why.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dataloader.torch as dt  # noqa: E402

pytestmark = pytest.mark.timeout(60)

CUDA = torch.cuda.is_available()


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(100, 2, 3, 5, generator=g)
    y = torch.randperm(50, generator=g).repeat(2)
    return x, y, tud.TensorDataset(x, y)


def check_sequential(loader, x, y):
    bs = loader.batch_size
    n = 0
    for i, (sample, target) in enumerate(loader):
        if bs is None:
            assert torch.equal(sample, x[i]) and torch.equal(target, y[i])
        else:
            assert torch.equal(sample, x[i * bs:(i + 1) * bs]) and torch.equal(target, y[i * bs:(i + 1) * bs])
        n += 1
    assert n == (len(x) if bs is None else math.ceil(len(x) / bs))


def check_shuffle(loader, x, y):
    seen = []
    for sample, target in loader:
        samples = sample.unsqueeze(0) if loader.batch_size is None else sample
        targets = target.unsqueeze(0) if loader.batch_size is None else target
        for s, t in zip(samples, targets, strict=True):
            (hits,) = torch.nonzero((x == s).flatten(1).all(1), as_tuple=True)
            assert len(hits) == 1 and torch.equal(y[hits[0]], t)
            seen.append(int(hits[0]))
    assert sorted(seen) == list(range(len(x)))


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("num_workers", [0, 4])
@pytest.mark.parametrize("batch_size", [None, 1, 2])
def test_sequential_and_shuffled_epochs(data, batch_size, num_workers, persistent):
    x, y, ds = data
    kwargs = dict(batch_size=batch_size, num_workers=num_workers, persistent_workers=persistent and num_workers > 0)
    with dt.DataLoader(ds, **kwargs) as loader:
        check_sequential(loader, x, y)
    with dt.DataLoader(ds, shuffle=True, **kwargs) as loader:
        check_shuffle(loader, x, y)
        check_shuffle(loader, x, y)  # a second epoch (persistent workers keep their state)


@pytest.mark.parametrize("num_workers", [0, 4])
def test_prefetch_factor_keeps_epochs_exact(data, num_workers):
    x, y, ds = data
    if num_workers:
        with dt.DataLoader(ds, batch_size=2, num_workers=num_workers, prefetch_factor=3) as loader:
            check_sequential(loader, x, y)


class ErrorIterableDataset(tud.IterableDataset):
    def __iter__(self):
        raise RuntimeError("Error in __iter__")


def test_error_in_iter_and_in_worker_init_fn(data):
    for num_workers in (0, 2):
        with pytest.raises(RuntimeError, match="Error in __iter__"):
            list(dt.DataLoader(ErrorIterableDataset(), num_workers=num_workers))

    def bad_init(_):
        raise RuntimeError("Error in worker_init_fn")

    with dt.DataLoader(data[2], num_workers=2, worker_init_fn=bad_init) as loader:
        with pytest.raises(RuntimeError, match="Error in worker_init_fn"):
            list(loader)


def test_invalid_assign_after_init(data):
    loader = dt.DataLoader(data[2])
    for attr in ("batch_size", "sampler", "batch_sampler", "drop_last", "dataset", "persistent_workers"):
        with pytest.raises(ValueError, match=f"{attr} attribute should not be set after DataLoader is initialized"):
            setattr(loader, attr, {})
    loader.timeout = 3  # other attributes stay assignable, as in torch


class BulkLoadingDataset(tud.Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, indices):
        assert isinstance(indices, (list, tuple))
        return torch.as_tensor(indices)

    def __len__(self):
        return self.n


class BulkLoadingSampler(tud.Sampler):
    def __init__(self, n, batch_size):
        self.n, self.batch_size = n, batch_size

    def __iter__(self):
        for part in torch.randperm(self.n).split(self.batch_size):
            yield part.tolist()

    def __len__(self):
        return math.ceil(self.n / self.batch_size)


@pytest.mark.parametrize("num_workers", [0, 4])
def test_bulk_loading_without_auto_batching(num_workers):
    loader = dt.DataLoader(BulkLoadingDataset(35), batch_size=None, sampler=BulkLoadingSampler(35, 4),
                           num_workers=num_workers)
    samples = list(loader)
    assert len(samples) == 9 and set(torch.cat(samples).tolist()) == set(range(35))
    loader.close()


def test_growing_dataset_changes_len():
    ds = [torch.ones(4) for _ in range(4)]
    seq, shuffled = dt.DataLoader(ds, shuffle=False), dt.DataLoader(ds, shuffle=True)
    ds.append(torch.ones(4))
    assert len(seq) == 5 and len(shuffled) == 5


def test_two_loaders_iterated_in_turn(data):
    a = iter(dt.DataLoader(data[2], num_workers=1))
    b = iter(dt.DataLoader(data[2], num_workers=2))
    order = [next(a), next(a), next(b), next(b), next(a), next(b)]
    assert torch.equal(order[4][0], data[0][2:3]) and torch.equal(order[5][0], data[0][2:3])
    a.close()
    b.close()


class SleepDataset(tud.Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s
        self.slept = threading.Event()

    def __getitem__(self, i):
        if not self.slept.is_set():
            self.slept.set()
            time.sleep(self.sleep_s)
        return i

    def __len__(self):
        return self.n


@pytest.mark.parametrize("persistent", [False, True])
def test_timeout_raises_torchs_runtime_error(persistent):
    loader = dt.DataLoader(SleepDataset(10, 2.5), batch_size=2, num_workers=2, timeout=1, persistent_workers=persistent)
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after \d+ seconds"):
        next(iter(loader))
    loader.close()


class EmptyTensorDataset(tud.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.empty(0)


@pytest.mark.parametrize("persistent", [False, True])
def test_an_error_in_the_loop_with_huge_sampler_batches_leaves_cleanly(persistent):
    before = threading.active_count()
    loader = dt.DataLoader(EmptyTensorDataset(10_000_000), batch_size=40960, num_workers=1, persistent_workers=persistent)
    with pytest.raises(RuntimeError, match="My Error"):
        for x in loader:
            assert x.numel() == 0
            raise RuntimeError("My Error")
    loader.close()
    assert threading.active_count() == before


class CountingIterable(tud.IterableDataset):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_invalid_constructor_argument_combinations(data):
    ds = data[2]
    cases = [
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(timeout=-1), "timeout option should be non-negative"),
        (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching and is mutually exclusive"),
        (dict(num_workers=0, multiprocessing_context="fork"), r"multi-process loading \(num_workers > 0\), but got"),
    ]
    sampler = tud.SequentialSampler(ds)
    batch_sampler = tud.BatchSampler(sampler, 3, False)
    cases += [
        (dict(batch_size=11, sampler=sampler, shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=batch_sampler, sampler=sampler, shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=batch_sampler, sampler=sampler, shuffle=3), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_size=11, batch_sampler=batch_sampler), "batch_sampler option is mutually exclusive with"),
        (dict(shuffle=True, batch_sampler=batch_sampler), "batch_sampler option is mutually exclusive with"),
        (dict(drop_last=True, batch_sampler=batch_sampler), "batch_sampler option is mutually exclusive with"),
        (dict(drop_last=3, batch_sampler=batch_sampler), "batch_sampler option is mutually exclusive with"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            dt.DataLoader(ds, **kwargs)
    it = CountingIterable(20)
    for kwargs, match in [
        (dict(shuffle=True), "expected unspecified shuffle"),
        (dict(shuffle=3), "expected unspecified shuffle"),
        (dict(sampler=tud.SequentialSampler(it)), "expected unspecified sampler"),
        (dict(sampler=3), "expected unspecified sampler"),
        (dict(batch_sampler=tud.BatchSampler(tud.SequentialSampler(it), 3, False)), "expected unspecified batch_sampler"),
        (dict(batch_sampler=3), "expected unspecified batch_sampler"),
    ]:
        with pytest.raises(ValueError, match=f"DataLoader with IterableDataset: {match}"):
            dt.DataLoader(it, **kwargs)


class CountingDataset(tud.Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        return i

    def __len__(self):
        return self.n


@pytest.mark.parametrize("num_workers", [0, 1])
@pytest.mark.parametrize("coll", [list, tuple])
def test_builtin_collection_conversion(coll, num_workers):
    pairs = coll(torch.tensor([i, i + 1]) for i in range(0, 20, 2))
    for ds in (CountingDataset(20), CountingIterable(20)):
        assert coll(dt.DataLoader(ds, batch_size=None, num_workers=num_workers)) == coll(range(20))
        got = coll(dt.DataLoader(ds, batch_size=2, num_workers=num_workers))
        assert len(got) == len(pairs) and all(torch.equal(a, b) for a, b in zip(got, pairs, strict=True))


class WorkerSpecificIterable(tud.IterableDataset):
    def __init__(self, sizes):
        self.sizes = sizes

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        assert info is not None
        return iter(range(self.sizes[info.id]))

    def __len__(self):
        return sum(self.sizes)


@pytest.mark.parametrize("prefetch_factor", [2, 3, 4])
def test_iterable_style_dataset_with_worker_specific_sizes(prefetch_factor):
    sizes = [0, 4, 20]
    expected = sorted(list(range(4)) + list(range(20)))
    loader = dt.DataLoader(WorkerSpecificIterable(sizes), num_workers=3, batch_size=None, prefetch_factor=prefetch_factor)
    fetched = sorted(loader)
    assert fetched == expected and all(type(a) is int for a in fetched)
    assert len(loader) == 24
    batched = dt.DataLoader(WorkerSpecificIterable(sizes), num_workers=3, batch_size=7, prefetch_factor=prefetch_factor)
    assert {tuple(t.tolist()) for t in batched} == {tuple(range(4)), tuple(range(7)), tuple(range(7, 14)), tuple(range(14, 20))}
    dropped = dt.DataLoader(WorkerSpecificIterable(sizes), num_workers=3, batch_size=7, drop_last=True,
                            prefetch_factor=prefetch_factor)
    assert {tuple(t.tolist()) for t in dropped} == {tuple(range(7)), tuple(range(7, 14))}
    for one in (loader, batched, dropped):
        one.close()


def test_iterable_style_dataset_single_thread():
    loader = dt.DataLoader(CountingIterable(20), batch_size=None)
    fetched = list(loader)
    assert fetched == list(range(20)) and all(type(d) is int for d in fetched)
    assert len(loader) == 20
    assert [t.tolist() for t in dt.DataLoader(CountingIterable(20), batch_size=7)] == [
        list(range(7)), list(range(7, 14)), list(range(14, 20))
    ]
    assert [t.tolist() for t in dt.DataLoader(CountingIterable(20), batch_size=7, drop_last=True)] == [
        list(range(7)), list(range(7, 14))
    ]


def test_unsharded_iterable_warns_once_it_yields_more_than_its_length():
    # Part of torch's scenario: torch warns only after len(dataloader) was called, and on every
    # batch past the length; ours warns on the first batch past len(dataset), each epoch.
    loader = dt.DataLoader(CountingIterable(20), num_workers=3)
    it = iter(loader)
    for _ in range(20):
        next(it)
    with pytest.warns(UserWarning, match=r"was reported to be 20 .*but 21 batches have been fetched\. With worker threads"):
        rest = list(it)
    assert len(rest) == 40
    loader.close()


def test_iterabledataset_len():
    class Ten(tud.IterableDataset):
        def __len__(self):
            return 10

        def __iter__(self):
            return iter(range(10))

    for bs, drop, n in [(1, False, 10), (1, True, 10), (2, False, 5), (2, True, 5), (3, False, 4), (3, True, 3)]:
        assert len(dt.DataLoader(Ten(), batch_size=bs, drop_last=drop)) == n


@pytest.mark.parametrize("num_workers", [0, 1])
def test_chain_iterable_style_dataset(num_workers):
    a, b = CountingIterable(20), CountingIterable(15)
    expected = list(range(20)) + list(range(15))
    for chained in (a + b, tud.ChainDataset([a, b])):
        got = list(dt.DataLoader(chained, num_workers=num_workers))
        assert len(got) == len(expected)
        assert all(isinstance(d, torch.Tensor) and d.item() == e for e, d in zip(expected, got, strict=True))


class SeedDataset(tud.Dataset):
    """Each item waits until every worker holds one, then answers its worker's seed."""

    def __init__(self, num_workers):
        self.n = num_workers
        self.barrier = threading.Barrier(num_workers, timeout=20)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        self.barrier.wait()
        return torch.utils.data.get_worker_info().seed


def test_every_worker_that_starts_sees_a_distinct_seed():
    # torch's test reads torch.initial_seed(); our threads share one torch RNG, so the
    # per-worker seed is get_worker_info().seed (docs/usage.md, "Randomness in workers").
    with dt.DataLoader(SeedDataset(6), batch_size=1, num_workers=6) as loader:
        seeds = {int(b[0]) for b in loader}
    assert len(seeds) == 6


def test_worker_seeds_are_reproducible_with_a_torch_generator():
    def seeds():
        loader = dt.DataLoader(SeedDataset(6), batch_size=1, num_workers=6, generator=torch.Generator().manual_seed(42))
        with loader:
            return {int(b) for b in loader}

    assert seeds() == seeds()


class MultiEpochIterable(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        for _ in range(self.n // info.num_workers):
            yield info.id

    def __len__(self):
        return self.n


def test_multi_epochs_take_workers_in_turn():
    with dt.DataLoader(MultiEpochIterable(20), batch_size=10, num_workers=2) as loader:
        for _ in range(3):
            assert [b.tolist() for b in loader] == [[0] * 10, [1] * 10]


class InitialSeedDataset(tud.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.initial_seed()


def test_worker_init_fn_seeding_torch_is_seen_by_items():
    def init_fn(worker_id):
        torch.manual_seed(12345)

    state = torch.get_rng_state()
    try:
        for batch in dt.DataLoader(InitialSeedDataset(), batch_size=2, num_workers=2, worker_init_fn=init_fn):
            assert batch.tolist() == [12345, 12345]
    finally:
        torch.set_rng_state(state)


class InfoDataset(tud.Dataset):
    def __init__(self):
        self.values = {}

    def __len__(self):
        return 6

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        return torch.tensor([info.id, self.values[info.id]])


def test_get_worker_info_in_worker_init_fn_and_items():
    assert torch.utils.data.get_worker_info() is None
    ds = InfoDataset()
    idents = {}

    def init(worker_id):
        info = torch.utils.data.get_worker_info()
        assert info.id == worker_id < info.num_workers == 2
        assert info.dataset is ds  # map-style: threads share the dataset (no copy)
        for name in ("id", "a"):
            with pytest.raises(RuntimeError, match="^Cannot assign attributes to WorkerInfo objects$"):
                setattr(info, name, 3999)
        assert all(f"{k}=" in repr(info) for k in ("id", "num_workers", "seed", "dataset"))
        ds.values[worker_id] = threading.get_ident()
        idents[worker_id] = threading.get_ident()

    with dt.DataLoader(ds, batch_size=2, num_workers=2, worker_init_fn=init) as loader:
        rows = torch.cat(list(loader)).tolist()
    assert all(idents[w] == ident for w, ident in rows)
    assert torch.utils.data.get_worker_info() is None


def test_shuffle_is_reproducible_with_a_torch_generator(data):
    for workers in (0, 2):
        def epoch():
            with dt.DataLoader(data[2], shuffle=True, num_workers=workers, generator=torch.Generator().manual_seed(42)) as loader:
                return [b[1].item() for b in loader]

        assert epoch() == epoch()


def test_random_sampler_lengths_through_the_loader(data):
    ds = data[2]
    for replacement in (True, False):
        sampler = tud.RandomSampler(ds, replacement=replacement, num_samples=len(ds) + 5)
        assert len(dt.DataLoader(ds, batch_size=1, sampler=sampler)) == len(ds) + 5
        assert len(dt.DataLoader(ds, batch_size=6, sampler=sampler)) == math.ceil((len(ds) + 5) / 6)


def test_distributed_sampler_with_drop_last_never_duplicates():
    ds = torch.IntTensor(range(9))
    scanned = torch.cat([
        b for rank in range(4)
        for b in dt.DataLoader(ds, batch_size=2, drop_last=True, sampler=tud.DistributedSampler(ds, 4, rank))
    ])
    assert scanned.size() == scanned.unique().size()


@pytest.mark.parametrize("num_workers", [0, 4])
def test_iterable_sampler_and_batch_sampler(data, num_workers):
    x, _, ds = data
    loader = dt.DataLoader(ds, sampler=range(2, 12), batch_size=2, num_workers=num_workers)
    assert len(loader) == 5
    for i, (inp, _) in enumerate(loader):
        assert torch.equal(inp, x[i * 2 + 2:i * 2 + 4])
    loader.close()
    batches = [tuple(range(i + a, i + b)) for i in range(0, 20, 5) for a, b in ((0, 2), (2, 5))]
    loader = dt.DataLoader(ds, batch_sampler=batches, num_workers=num_workers)
    assert len(loader) == 8
    for i, (inp, _) in enumerate(loader):
        assert torch.equal(inp, x[list(batches[i])])
    loader.close()


class ErrorDataset(tud.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@pytest.mark.parametrize("n, num_workers", [(100, 0), (41, 4)])
def test_every_batch_raises_the_datasets_error(n, num_workers):
    loader = dt.DataLoader(ErrorDataset(n), batch_size=2, shuffle=True, num_workers=num_workers)
    it, errors = iter(loader), 0
    while True:
        try:
            next(it)
        except NotImplementedError:
            errors += 1
        except StopIteration:
            break
    assert errors == math.ceil(n / 2)
    loader.close()


def test_workers_stop_when_the_epoch_is_left_early(data):
    before = threading.active_count()
    loader = dt.DataLoader(data[2], batch_size=2, num_workers=4, pin_memory=CUDA)
    for i, _ in enumerate(loader):
        if i == 10:
            break
    loader.close()
    assert threading.active_count() == before


def test_len(data):
    for bs, n in ((1, 100), (2, 50), (3, 34)):
        loader = dt.DataLoader(data[2], batch_size=bs)
        assert len(loader) == n == sum(1 for _ in loader)


class IndexWorkerDataset(tud.Dataset):
    def __len__(self):
        return 128

    def __getitem__(self, i):
        return torch.utils.data.get_worker_info().id, i


@pytest.mark.parametrize("batch_size", [8, 32])
def test_each_batch_is_built_by_one_worker(batch_size):
    # torch assigns batch i to worker i % num_workers; our workers claim batches at run
    # time (docs/usage.md), so only "one worker per batch, in order" carries over.
    with dt.DataLoader(IndexWorkerDataset(), batch_size=batch_size, num_workers=2, timeout=5) as loader:
        for i, (workers, sample) in enumerate(loader):
            assert len(set(workers.tolist())) == 1
            assert sample.tolist() == list(range(i * batch_size, (i + 1) * batch_size))


class ConvDataset(tud.Dataset):
    def __init__(self):
        self.x = torch.ones(1, 1, 24000)
        self[0]  # a convolution on the main thread first

    def __len__(self):
        return 1

    def __getitem__(self, i):
        return torch.nn.functional.conv1d(self.x, torch.ones(1, 1, 2))


def test_conv_in_a_worker_after_one_on_the_main_thread():
    for x in dt.DataLoader(ConvDataset(), num_workers=1):
        assert x.shape == (1, 1, 1, 23999)


def test_excessive_worker_creation_warns():
    with pytest.warns(UserWarning, match="excessive worker creation might get DataLoader running slow or even freeze"):
        dt.DataLoader(list(range(4)), batch_size=2, num_workers=1000)


def test_typing_generic_subscripts():
    class Some(tud.Dataset[list]):
        pass

    def make(is_train: bool) -> dt.DataLoader[list]:  # noqa: ARG001 - a subscript must not raise
        return dt.DataLoader(Some())

    assert make(True).dataset.__class__ is Some


@pytest.mark.skipif(not CUDA, reason="pinned memory needs CUDA")
@pytest.mark.parametrize("num_workers", [0, 4])
def test_pin_memory_pins_every_tensor(data, num_workers):
    for inp, target in dt.DataLoader(data[2], batch_size=2, shuffle=True, num_workers=num_workers, pin_memory=True):
        assert inp.is_pinned() and target.is_pinned()


def test_numpy_items_become_double_tensors():
    class Ones(tud.Dataset):
        def __getitem__(self, i):
            return np.ones((2, 3, 4)) * i

        def __len__(self):
            return 1000

    batch = next(iter(dt.DataLoader(Ones(), batch_size=12)))
    assert isinstance(batch, torch.DoubleTensor) and batch.size() == torch.Size([12, 2, 3, 4])
