"""``torch.utils.data.get_worker_info()`` inside our worker threads (``dataloader.torch._worker_info``).

PyTorch's documented ``IterableDataset`` example must shard correctly with
``dataloader.torch.DataLoader(num_workers=2)``, unchanged; torch's module attributes are
function runs a thread-aware body only while an epoch with workers is open, and its own after.
"""

from __future__ import annotations

import math
import threading

import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import torch.utils.data._utils.worker as torch_worker  # noqa: E402
import torch.utils.data.dataloader as torch_dataloader  # noqa: E402

import dataloader  # noqa: E402
import dataloader.torch as dt  # noqa: E402
from dataloader.torch import _worker_info  # noqa: E402

pytestmark = pytest.mark.timeout(60)
ORIGINAL = torch_worker.get_worker_info
ORIGINAL_CODE = ORIGINAL.__code__


class MyIterableDataset(torch.utils.data.IterableDataset):
    """Verbatim in substance: the example of torch.utils.data.IterableDataset's docstring."""

    def __init__(self, start, end):
        super().__init__()
        assert end > start, "this example only works with end >= start"
        self.start = start
        self.end = end

    def __iter__(self):
        worker_info = torch.utils.data.get_worker_info()
        if worker_info is None:  # single-process data loading, return the full iterator
            iter_start = self.start
            iter_end = self.end
        else:  # in a worker process: split workload
            per_worker = int(math.ceil((self.end - self.start) / float(worker_info.num_workers)))
            worker_id = worker_info.id
            iter_start = self.start + worker_id * per_worker
            iter_end = min(iter_start + per_worker, self.end)
        return iter(range(iter_start, iter_end))


def torch_functions():
    """torch's three names for the function, and whether it runs its own body."""
    return (tud.get_worker_info, torch_dataloader.get_worker_info, torch_worker.get_worker_info,
            ORIGINAL.__code__ is ORIGINAL_CODE)


UNTOUCHED = (ORIGINAL, ORIGINAL, ORIGINAL, True)
THREAD_AWARE = (ORIGINAL, ORIGINAL, ORIGINAL, False)


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
def test_documented_iterable_example_yields_each_item_once(num_workers):
    ds = MyIterableDataset(start=3, end=7)
    with dt.DataLoader(ds, num_workers=num_workers) as loader:
        got = [int(x) for x in loader]
    assert sorted(got) == [3, 4, 5, 6]
    if num_workers == 2:
        assert got == [3, 5, 4, 6]  # the output torch's documentation shows for num_workers=2


def test_torchs_function_is_thread_aware_only_while_an_epoch_runs():
    assert torch_functions() == UNTOUCHED
    loader = dt.DataLoader(MyIterableDataset(0, 8), num_workers=2)
    it = iter(loader)
    assert torch_functions() == THREAD_AWARE
    assert torch.utils.data.get_worker_info() is None  # the consumer thread is no worker
    next(it)
    it.close()
    assert torch_functions() == UNTOUCHED
    list(loader)  # an exhausted epoch restores them too
    assert torch_functions() == UNTOUCHED
    loader.close()


def test_installation_is_refcounted_across_overlapping_epochs():
    a = dt.DataLoader(MyIterableDataset(0, 8), num_workers=2)
    b = dt.DataLoader(MyIterableDataset(0, 8), num_workers=2)
    ia, ib = iter(a), iter(b)
    ia.close()
    assert _worker_info.installed() and torch_functions() == THREAD_AWARE
    assert sorted(int(x) for x in ib) == list(range(8))
    assert not _worker_info.installed() and torch_functions() == UNTOUCHED
    a.close()
    b.close()


def test_a_dropped_epoch_restores_torch_on_collection():
    import gc

    loader = dt.DataLoader(MyIterableDataset(0, 8), num_workers=2)
    it = iter(loader)
    next(it)
    del it
    gc.collect()
    assert torch_functions() == UNTOUCHED
    loader.close()


def test_a_later_patch_by_someone_else_is_left_alone():
    loader = dt.DataLoader(list(range(4)), num_workers=2)
    it = iter(loader)

    def theirs():
        return "theirs"

    tud.get_worker_info = theirs
    try:
        list(it)
        assert tud.get_worker_info is theirs
        assert torch_worker.get_worker_info is ORIGINAL
    finally:
        tud.get_worker_info = ORIGINAL
        loader.close()


def test_the_numpy_loader_never_touches_torch():
    with dataloader.DataLoader(list(range(8)), batch_size=2, num_workers=2) as loader:
        seen = []
        for _ in loader:
            seen.append(torch_functions() == UNTOUCHED)
    assert all(seen)


class InfoDataset(tud.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = torch.utils.data.get_worker_info()
        return torch.tensor([info.id, info.num_workers, info.seed % 1000, threading.get_ident()])


def test_map_style_items_see_their_own_worker():
    with dt.DataLoader(InfoDataset(), batch_size=1, num_workers=2, seed=4) as loader:
        rows = torch.cat(list(loader)).tolist()
    by_thread = {}
    for wid, n, seed, ident in rows:
        assert n == 2 and wid in (0, 1)
        by_thread.setdefault(ident, set()).add((wid, seed))
    assert all(len(v) == 1 for v in by_thread.values())  # one worker id per thread


def test_worker_init_fn_sees_torchs_function_answer_for_its_worker():
    seen = []
    lock = threading.Lock()

    def init(worker_id):
        info = torch.utils.data.get_worker_info()
        with lock:
            seen.append((worker_id, info.id, info.num_workers))

    with dt.DataLoader(list(range(8)), num_workers=2, worker_init_fn=init) as loader:
        list(loader)
    assert sorted(seen) == [(0, 0, 2), (1, 1, 2)]


def test_concurrent_epochs_from_several_threads_restore_torch_at_the_end():
    errors = []

    def epoch():
        try:
            with dt.DataLoader(MyIterableDataset(0, 20), num_workers=2) as loader:
                assert sorted(int(x) for x in loader) == list(range(20))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=epoch) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert torch_functions() == UNTOUCHED


def test_auto_builds_inline_unless_a_worker_init_fn_is_given():
    # dataloader.torch gives every worker thread torch.set_num_threads(1) (a worker_init_fn of
    # its own): that alone must not keep "auto" from building cheap batches inside next().
    data = tud.TensorDataset(torch.arange(24.0))
    seen = []

    class Probe(tud.Dataset):
        def __len__(self):
            return len(data)

        def __getitem__(self, i):
            seen.append(tud.get_worker_info())
            return data[i]

    loader = dt.DataLoader(Probe(), batch_size=8, num_workers="auto")
    assert [b[0].tolist() for b in loader] == [b[0].tolist() for b in dt.DataLoader(data, batch_size=8)]
    assert seen[0] is None and loader.stats.active_workers == 0  # 3 batches: settled inline
    loader.close()
    with_init = dt.DataLoader(Probe(), batch_size=8, num_workers="auto", worker_init_fn=lambda w: None)
    seen.clear()
    list(with_init)
    assert seen[0] is not None and with_init.stats.active_workers >= 1
    with_init.close()


# Bound at import time, before any epoch: the pattern torch's docs do not forbid.
from torch.utils.data import get_worker_info as bound_early  # noqa: E402


class EarlyBoundIterable(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = bound_early()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


@pytest.mark.parametrize("num_workers", [0, 2, 3])
def test_get_worker_info_bound_before_the_epoch_answers_in_worker_threads(num_workers):
    with dt.DataLoader(EarlyBoundIterable(12), batch_size=None, num_workers=num_workers) as loader:
        got = [int(x) for x in loader]
    assert sorted(got) == list(range(12))  # each item once, not once per worker
    assert bound_early() is None  # the consumer thread is no worker


@pytest.mark.timeout(60)
@pytest.mark.parametrize("where", ["start", "middle"])
def test_an_epoch_ended_by_its_samplers_error_lets_the_bridge_go(where):
    class Broken(tud.Sampler):
        def __len__(self):
            return 4

        def __iter__(self):
            if where == "middle":
                yield 0
            raise ValueError("sampler broke")

    loader = dt.DataLoader(list(range(4)), sampler=Broken(), num_workers=2)
    it = iter(loader)
    with pytest.raises(ValueError, match="sampler broke"):
        for _ in it:
            pass
    assert not _worker_info.installed()


@pytest.mark.timeout(60)
def test_the_torch_faces_epoch_closes_with_a_timeout_like_ours():
    it = iter(dt.DataLoader(list(range(8)), batch_size=2, num_workers=2))
    next(it)
    it.close(timeout_s=0.5)
    assert not _worker_info.installed()
    with pytest.raises(StopIteration):
        next(it)
