"""PyTorch's rules that ``dataloader.DataLoader`` keeps too (no torch needed): reassigning what
fixed the batches, truthy ``shuffle``/``drop_last``, the ``num_workers`` and ``IterableDataset``
length warnings, the timeout wording and read-only ``WorkerInfo``."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dataloader import DataLoader, WorkerInfo, get_worker_info
from tests._support import SizedRangeStream, SleepyDataset

pytestmark = pytest.mark.timeout(30)
DS = list(range(10))


@pytest.mark.parametrize("name", ["batch_size", "sampler", "batch_sampler", "drop_last", "dataset", "persistent_workers"])
def test_reassigning_what_fixed_the_batches_raises_value_error(name):
    loader = DataLoader(DS, batch_size=2)
    with pytest.raises(ValueError, match=f"^{name} attribute should not be set after DataLoader is initialized$"):
        setattr(loader, name, {})
    assert loader.batch_size == 2 and loader.dataset is DS


def test_other_attributes_stay_assignable():
    loader = DataLoader(DS)
    loader.timeout = 5
    loader.worker_init_fn = print
    assert loader.timeout == 5


@pytest.mark.parametrize("shuffle", [1, "yes", np.True_])
def test_truthy_shuffle_shuffles(shuffle):
    def first_epoch(value):
        return [int(b[0]) for b in DataLoader(DS, shuffle=value, seed=3)]

    assert first_epoch(shuffle) == first_epoch(True)
    assert sorted(first_epoch(shuffle)) == DS


@pytest.mark.parametrize("shuffle", [0, "", None])
def test_falsy_shuffle_keeps_order(shuffle):
    assert [int(b[0]) for b in DataLoader(DS, shuffle=shuffle)] == DS


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(shuffle=3, sampler=[0]), "sampler option is mutually exclusive with shuffle"),
        (dict(drop_last=3, batch_sampler=[[0]]), "batch_sampler option is mutually exclusive"),
        (dict(shuffle="x", batch_sampler=[[0]]), "batch_sampler option is mutually exclusive"),
        (dict(drop_last=1, batch_size=None), "mutually exclusive with drop_last"),
        (dict(drop_last=0), "drop_last should be a boolean value, but got drop_last=0"),
    ],
)
def test_truthy_values_reach_torchs_conflict_checks(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DataLoader(DS, **kwargs)


def test_more_workers_than_cpus_warns_like_torch():
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with pytest.warns(UserWarning, match=rf"create {cpus + 1} worker threads .*suggested max number of worker in current system is {cpus}"):
        DataLoader(DS, num_workers=cpus + 1)


def test_workers_up_to_the_cpu_count_do_not_warn(recwarn):
    DataLoader(DS, num_workers=1)
    assert not [w for w in recwarn if "will create" in str(w.message)]


def test_timeout_leads_with_torchs_wording():
    with DataLoader(SleepyDataset(4, delay_s=1.0), num_workers=1, timeout=0.05) as loader:
        with pytest.raises(RuntimeError, match=r"^DataLoader timed out after 0\.05 seconds: batch 0 was not ready"):
            next(iter(loader))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_iterable_longer_than_its_len_warns_once(num_workers):
    with DataLoader(SizedRangeStream(6), num_workers=num_workers) as loader:
        if num_workers == 0:
            assert len(list(loader)) == 6  # exactly len(dataset): no warning
            return
        it = iter(loader)
        got = [next(it) for _ in range(6)]
        with pytest.warns(UserWarning, match=r"was reported to be 6 \(len\(dataset\)\), but 7 batches"):
            got += list(it)
    assert len(got) == 12


def test_worker_info_is_read_only_with_torchs_error():
    info = WorkerInfo(0, 2, 7, DS)
    for name in ("id", "seed", "other"):
        with pytest.raises(RuntimeError, match="^Cannot assign attributes to WorkerInfo objects$"):
            setattr(info, name, 1)
    with pytest.raises(RuntimeError, match="Cannot assign"):
        del info.id
    assert repr(info) == f"WorkerInfo(id=0, num_workers=2, seed=7, dataset={DS!r})"
    assert info == WorkerInfo(0, 2, 7, DS) and hash(info) == hash(WorkerInfo(0, 2, 7, DS))


def test_worker_info_inside_a_worker_is_read_only():
    errors = []

    def init(worker_id):
        try:
            get_worker_info().id = 5
        except RuntimeError as exc:
            errors.append(str(exc))

    with DataLoader(DS, num_workers=1, worker_init_fn=init) as loader:
        list(loader)
    assert errors == ["Cannot assign attributes to WorkerInfo objects"]
