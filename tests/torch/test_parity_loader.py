"""Differential tests: the same loader configurations through ``torch.utils.data.DataLoader`` and ours.

Runs only where torch is installed (here: /work/venvs/torch311); skipped elsewhere:
    /work/venvs/torch311/bin/python setup.py build_ext --inplace -q
    /work/venvs/torch311/bin/python -m pytest -q tests/torch/test_parity_loader.py

Compared: ``len()``, the indices of every batch (exactly for deterministic samplers, as
multisets for random ones, whose draws differ by design), collated structure, shapes, dtypes
and values (torch tensors through ``.numpy()``), the positions and types of per-batch errors,
and the batch order of a sharded ``IterableDataset`` with 0..4 workers.  torch's workers are
processes (forked); ours are threads.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dataloader as ours  # noqa: E402
from tests.torch._torch_helpers import run as run_epoch  # noqa: E402
from tests._iterators import Resumable  # noqa: E402
from tests._support import shard

pytestmark = [
    pytest.mark.timeout(120),
    # torch warns when num_workers exceeds the CPU count (4 workers on a 2-core machine)
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]


def torch_gen(seed=0):
    return torch.Generator().manual_seed(seed)


def to_numpy(x):
    """torch output -> our conventions (tensors -> arrays, containers recursed)."""
    if isinstance(x, torch.Tensor):
        return x.numpy()
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(to_numpy(v) for v in x))
    if isinstance(x, (list, tuple)):
        return type(x)(to_numpy(v) for v in x)
    return x


def assert_same(t, o, path="batch"):
    """Same structure, container types, shapes, dtypes and values."""
    if isinstance(t, np.ndarray):
        assert isinstance(o, np.ndarray), f"{path}: {type(o).__name__} is not an ndarray"
        assert (o.shape, o.dtype) == (t.shape, t.dtype), (
            f"{path}: {o.shape} {o.dtype} != {t.shape} {t.dtype}"
        )
        np.testing.assert_array_equal(o, t, err_msg=path)
    elif isinstance(t, dict):
        assert isinstance(o, dict) and list(o) == list(t), path
        for k in t:
            assert_same(t[k], o[k], f"{path}[{k!r}]")
    elif isinstance(t, (list, tuple)):
        assert type(o) is type(t) and len(o) == len(t), (
            f"{path}: {type(o).__name__} != {type(t).__name__}"
        )
        for i, (a, b) in enumerate(zip(t, o, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert type(o) is type(t) and o == t, f"{path}: {o!r} != {t!r}"


def run(loader):
    """One epoch: each batch (numpy'd) or ``("error", exception type name)``."""
    return run_epoch(loader, to_numpy)


# -- map-style ----------------------------------------------------------------------------------


class Rich:
    """Items of several kinds: float32 row, int64 scalar, Python float/int/str, nested dict."""

    def __init__(self, n, fail=()):
        self.n = n
        self.fail = set(fail)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        i = int(i)
        if i in self.fail:
            raise KeyError(i)
        return (
            np.array([i, i + 0.5, -i], dtype=np.float32),
            np.int64(i),
            float(i) / 2,
            i,
            {"name": f"s{i}", "pix": np.full((2, 2), i, dtype=np.uint8)},
        )


def indices_of(batches, batched=True):
    """The dataset indices of every batch (item field 3 is the index)."""
    if batched:
        return [b[3].tolist() for b in batches]
    return [b[3] for b in batches]


N = 23

SAMPLERS = {
    # name: (torch factory, ours factory, deterministic)
    "sequential": (
        lambda ds: tud.SequentialSampler(ds),
        lambda ds: ours.SequentialSampler(ds),
        True,
    ),
    "random": (
        lambda ds: tud.RandomSampler(ds, generator=torch_gen()),
        lambda ds: ours.RandomSampler(ds, generator=0),
        False,
    ),
    "random-num-samples": (
        lambda ds: tud.RandomSampler(ds, num_samples=50, generator=torch_gen()),
        lambda ds: ours.RandomSampler(ds, num_samples=50, generator=0),
        False,
    ),
    "random-replacement": (
        lambda ds: tud.RandomSampler(ds, replacement=True, num_samples=30, generator=torch_gen()),
        lambda ds: ours.RandomSampler(ds, replacement=True, num_samples=30, generator=0),
        False,
    ),
    "subset-random": (
        lambda ds: tud.SubsetRandomSampler([2, 3, 5, 7, 11, 13], generator=torch_gen()),
        lambda ds: ours.SubsetRandomSampler([2, 3, 5, 7, 11, 13], generator=0),
        False,
    ),
    "weighted": (
        lambda ds: tud.WeightedRandomSampler([1.0] * N, 12, generator=torch_gen()),
        lambda ds: ours.WeightedRandomSampler([1.0] * N, 12, generator=0),
        False,
    ),
    "distributed": (
        lambda ds: tud.DistributedSampler(ds, num_replicas=3, rank=1, shuffle=False),
        lambda ds: ours.DistributedSampler(ds, num_replicas=3, rank=1, shuffle=False),
        True,
    ),
    "distributed-drop-last": (
        lambda ds: tud.DistributedSampler(
            ds, num_replicas=3, rank=2, shuffle=False, drop_last=True
        ),
        lambda ds: ours.DistributedSampler(
            ds, num_replicas=3, rank=2, shuffle=False, drop_last=True
        ),
        True,
    ),
    "distributed-shuffled": (
        lambda ds: tud.DistributedSampler(ds, num_replicas=2, rank=0, seed=3),
        lambda ds: ours.DistributedSampler(ds, num_replicas=2, rank=0, seed=3),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize(
    "batch_size, drop_last", [(None, False), (1, False), (5, False), (5, True)]
)
def test_map_style_len_indices_and_collation_match_torch(name, batch_size, drop_last):
    t_factory, o_factory, deterministic = SAMPLERS[name]
    ds = Rich(N)
    t_loader = tud.DataLoader(ds, batch_size=batch_size, drop_last=drop_last, sampler=t_factory(ds))
    o_loader = ours.DataLoader(
        ds, batch_size=batch_size, drop_last=drop_last, sampler=o_factory(ds)
    )
    assert len(o_loader) == len(t_loader)
    t_out, o_out = run(t_loader), run(o_loader)
    assert len(o_out) == len(t_out) == len(t_loader)
    batched = batch_size is not None
    t_idx, o_idx = indices_of(t_out, batched), indices_of(o_out, batched)
    if deterministic:
        assert o_idx == t_idx
        for t, o in zip(t_out, o_out, strict=True):
            assert_same(t, o)
    else:
        flat = [i for b in o_idx for i in (b if batched else [b])]
        t_flat = [i for b in t_idx for i in (b if batched else [b])]
        if batched:
            assert [len(b) for b in o_idx] == [len(b) for b in t_idx]
        assert len(flat) == len(t_flat) and all(0 <= i < N for i in flat)
        dropped = len(flat) < len(o_factory(ds))
        if name in ("random", "subset-random") and not dropped:  # whole permutations
            assert Counter(flat) == Counter(t_flat)
        elif name not in (
            "random-replacement",
            "weighted",
        ):  # cut permutations: same multiplicities
            assert sorted(Counter(flat).values()) == sorted(Counter(t_flat).values())
        # values: each of our batches is what torch makes of the same indices
        for o, idx in zip(o_out, o_idx, strict=True):
            items = [ds[i] for i in (idx if batched else [idx])]
            t = tud.default_collate(items) if batched else tud.default_convert(items[0])
            assert_same(to_numpy(t), o)


@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_torch(drop_last):
    ds = Rich(N)
    t_loader = tud.DataLoader(
        ds, batch_sampler=tud.BatchSampler(tud.SequentialSampler(ds), 4, drop_last)
    )
    o_loader = ours.DataLoader(
        ds, batch_sampler=ours.BatchSampler(ours.SequentialSampler(ds), 4, drop_last)
    )
    assert len(o_loader) == len(t_loader)
    for t, o in zip(run(t_loader), run(o_loader), strict=True):
        assert_same(t, o)
    lists = [[5], [0, 1, 2], [22, 21], [7, 7]]
    t_out = run(tud.DataLoader(ds, batch_sampler=lists))
    o_out = run(ours.DataLoader(ds, batch_sampler=lists))
    assert len(o_out) == len(t_out) == 4
    for t, o in zip(t_out, o_out, strict=True):
        assert_same(t, o)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("batch_size", [None, 4])
def test_map_style_error_positions_and_types_match_torch(num_workers, batch_size):
    ds = Rich(N, fail={3, 9, 10, 22})
    t_out = run(tud.DataLoader(ds, batch_size=batch_size, num_workers=num_workers))
    o_loader = ours.DataLoader(ds, batch_size=batch_size, num_workers=num_workers)
    o_out = run(o_loader)
    o_loader.close()
    assert [b if isinstance(b, tuple) and b[0] == "error" else "batch" for b in o_out] == [
        b if isinstance(b, tuple) and b[0] == "error" else "batch" for b in t_out
    ]
    for t, o in zip(t_out, o_out, strict=True):
        if not (isinstance(t, tuple) and t[0] == "error"):
            assert_same(t, o)


# -- IterableDataset ----------------------------------------------------------------------------


def sharded_range(base, get_worker_info):
    """PyTorch's documentation example, on ``base`` (torch's or our IterableDataset)."""

    class ShardedRange(base):
        def __init__(self, start, end, fail_at=None):
            super().__init__()
            self.start, self.end, self.fail_at = start, end, fail_at

        def __len__(self):
            return self.end - self.start

        def __iter__(self):
            lo, hi = shard(self.start, self.end, get_worker_info())
            for value in range(lo, hi):
                if value == self.fail_at:
                    raise ValueError(value)
                yield value

    return ShardedRange


TorchRange = sharded_range(tud.IterableDataset, tud.get_worker_info)
OurRange = sharded_range(ours.IterableDataset, ours.get_worker_info)


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3, 4])
@pytest.mark.parametrize(
    "batch_size, drop_last", [(None, False), (2, False), (3, False), (3, True)]
)
@pytest.mark.parametrize("n", [3, 10, 17])
def test_sharded_iterable_batches_and_order_match_torch(n, num_workers, batch_size, drop_last):
    kwargs = dict(batch_size=batch_size, drop_last=drop_last, num_workers=num_workers)
    t_loader = tud.DataLoader(TorchRange(0, n), **kwargs)
    o_loader = ours.DataLoader(OurRange(0, n), **kwargs)
    assert len(o_loader) == len(t_loader)
    t_out = run(t_loader)
    o_out = run(o_loader)
    o_loader.close()
    assert len(o_out) == len(t_out)
    for t, o in zip(t_out, o_out, strict=True):
        assert_same(t, o)


@pytest.mark.parametrize("num_workers", [0, 2, 3])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_iterable_error_positions_match_torch(num_workers, batch_size):
    t_out = run(
        tud.DataLoader(TorchRange(0, 12, fail_at=5), batch_size=batch_size, num_workers=num_workers)
    )
    o_loader = ours.DataLoader(
        OurRange(0, 12, fail_at=5), batch_size=batch_size, num_workers=num_workers
    )
    o_out = run(o_loader)
    o_loader.close()
    assert any(isinstance(x, tuple) and x == ("error", "ValueError") for x in o_out)
    assert len(o_out) == len(t_out)
    for t, o in zip(t_out, o_out, strict=True):
        assert_same(t, o)


def unsharded(base):
    class Unsharded(base):
        def __iter__(self):
            return iter(range(5))

    return Unsharded


@pytest.mark.parametrize("num_workers", [2, 3])
def test_iterable_without_sharding_duplicates_like_torch(num_workers):
    t = run(tud.DataLoader(unsharded(tud.IterableDataset)(), batch_size=2, num_workers=num_workers))
    o_loader = ours.DataLoader(
        unsharded(ours.IterableDataset)(), batch_size=2, num_workers=num_workers
    )
    o = run(o_loader)
    o_loader.close()
    for a, b in zip(t, o, strict=True):
        assert_same(a, b)  # even the order: worker 0, 1, ... in turn




@pytest.mark.parametrize("num_workers", [0, 1])
@pytest.mark.parametrize("batch_size", [None, 3])
def test_iteration_stops_at_the_first_stop_iteration_like_torch(num_workers, batch_size):
    def make(base):
        class R(base):
            def __iter__(self):
                return Resumable()

        return R()

    t = run(
        tud.DataLoader(make(tud.IterableDataset), batch_size=batch_size, num_workers=num_workers)
    )
    o_loader = ours.DataLoader(
        make(ours.IterableDataset), batch_size=batch_size, num_workers=num_workers
    )
    o = run(o_loader)
    o_loader.close()
    for a, b in zip(t, o, strict=True):
        assert_same(a, b)


# -- worker state -------------------------------------------------------------------------------


class MeetFirst(Rich):
    """Ours only: items 0 and 1 meet at a barrier, so both worker threads take part in each
    epoch (a map-style epoch can otherwise end before a late worker thread wakes up)."""

    def __init__(self, n):
        super().__init__(n)
        self.barrier = threading.Barrier(2, timeout=10)

    def __getitem__(self, i):
        if i < 2:
            self.barrier.wait()
        return super().__getitem__(i)


def count_init_calls(make_loader, tmp_path, epochs, close_at_once):
    """Run epochs; return the worker ids of every worker_init_fn call (one file per call)."""

    def init(worker_id):
        (tmp_path / f"{worker_id}-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex}").touch()

    loader = make_loader(init)
    for _ in range(epochs):
        it = iter(loader)
        if not close_at_once:
            for _ in it:
                pass
        del it
    if hasattr(loader, "close"):
        loader.close()
    return sorted(int(p.name.split("-")[0]) for p in tmp_path.iterdir())


def init_loaders(kind):
    def make(lib):
        if kind == "map":
            ds = Rich(8) if lib is tud else MeetFirst(8)
        else:
            ds = (TorchRange if lib is tud else OurRange)(0, 8)
        return lambda init: lib.DataLoader(ds, batch_size=1, num_workers=2, worker_init_fn=init)

    return make(tud), make(ours)


@pytest.mark.parametrize("kind", ["map", "iterable"])
def test_worker_init_fn_runs_on_every_worker_every_epoch_like_torch(kind, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "o").mkdir()
    t_make, o_make = init_loaders(kind)
    t_calls = count_init_calls(t_make, tmp_path / "t", 3, close_at_once=False)
    o_calls = count_init_calls(o_make, tmp_path / "o", 3, close_at_once=False)
    assert o_calls == t_calls == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    "kind",
    [
        "map",
        "iterable",
    ],
)
def test_worker_init_fn_runs_even_when_the_epoch_is_closed_at_once_like_torch(kind, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "o").mkdir()
    t_make, o_make = init_loaders(kind)
    t_calls = count_init_calls(t_make, tmp_path / "t", 3, close_at_once=True)
    o_calls = count_init_calls(o_make, tmp_path / "o", 10, close_at_once=True)
    assert t_calls == [0, 0, 0, 1, 1, 1]
    assert o_calls == [0] * 10 + [1] * 10


class SeedDataset:
    """Items are ``[worker id, worker seed]``; ``barrier`` (ours only) makes both workers work."""

    def __init__(self, get_worker_info, barrier=None):
        self.get_worker_info = get_worker_info
        self.barrier = barrier

    def __len__(self):
        return 4

    def __getitem__(self, i):
        if self.barrier is not None and i < 2:
            self.barrier.wait()
        info = self.get_worker_info()
        return np.array([info.id, info.seed], dtype=np.int64)


def seed_bases(lib, persistent, epochs=3):
    """Per epoch, the set of ``seed - id`` over the workers (PyTorch: one base per epoch)."""
    if lib is tud:
        ds, kwargs = SeedDataset(tud.get_worker_info), {"generator": torch_gen(1)}
    else:
        ds, kwargs = (
            SeedDataset(ours.get_worker_info, threading.Barrier(2, timeout=10)),
            {"seed": 1},
        )
    loader = lib.DataLoader(
        ds, batch_size=1, num_workers=2, persistent_workers=persistent, **kwargs
    )
    out = []
    for _ in range(epochs):
        seen = {(int(b[0][0]), int(b[0][1])) for b in loader}
        assert {w for w, _ in seen} == {0, 1}
        out.append({seed - w for w, seed in seen})
    if hasattr(loader, "close"):
        loader.close()
    return out


@pytest.mark.parametrize("persistent", [False, True])
def test_worker_seed_rules_match_torch(persistent):
    """The values differ (torch draws them from a torch.Generator); the rules are the same:
    seed = epoch base + worker id; a new base every epoch, or one for life when persistent."""
    for lib in (tud, ours):
        bases = seed_bases(lib, persistent)
        assert all(len(b) == 1 for b in bases), lib.__name__
        assert len(set().union(*bases)) == (1 if persistent else 3), lib.__name__
