"""Native batch jobs (``_native/_rowjobs.pyx``): with workers, a batch of an ``ArrayDataset`` or
an ``NdfDataset`` on the native batch path is built with no Python, by a worker or by the
consumer while the batch it needs is not ready.  Its batches must be exactly those of
``num_workers=0``, its failures those of the general path, for its batch, and the epoch must go on.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._support import collect
from dataloader import ArrayDataset, DataLoader
from dataloader._engine.build import BuilderKind
from dataloader._native import _rowjobs
from dataloader._native._ring import Window
from dataloader._native._arrayrows import take_rows
from dataloader._native._rowjobs import RowJobs, can_run
from dataloader._native._stats import Recorder
from dataloader.ndf import NdfDataset, NdfWriter

pytestmark = pytest.mark.timeout(60)

N = 300


def _same_batches(got, expected):
    assert len(got) == len(expected)
    for (kind, g), (expected_kind, e) in zip(got, expected, strict=True):
        assert kind == expected_kind
        if kind == "error":
            assert g == e
            continue
        assert type(g) is type(e) is list and len(g) == len(e)
        for a, b in zip(g, e, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
            assert a.flags.c_contiguous


@pytest.fixture
def ndf_path(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "rows.ndf"
    with NdfWriter(path, 6, 2) as w:
        w.append(rng.standard_normal((N, 6)), rng.standard_normal((N, 2)))
    return path


def _datasets(ndf_path):
    x = np.random.default_rng(1).standard_normal((N, 5))
    return {
        "array f64 + int64": ArrayDataset(x, np.arange(N) * 3),
        "array int8 (N, 2, 2) + bool": ArrayDataset(
            np.arange(N * 4, dtype=np.int8).reshape(N, 2, 2), np.arange(N) % 3 == 0
        ),
        "ndf": NdfDataset(ndf_path),
    }


@pytest.mark.parametrize("name", ["array f64 + int64", "array int8 (N, 2, 2) + bool", "ndf"])
@pytest.mark.parametrize(("workers", "depth", "in_order"), [(1, 2, True), (2, 2, True), (2, 16, True),
                                                             (3, 0, True), (2, 4, False)])
def test_batches_equal_those_without_workers(ndf_path, name, workers, depth, in_order):
    ds = _datasets(ndf_path)[name]
    sequential = DataLoader(ds, batch_size=7, shuffle=True, seed=5)
    loader = DataLoader(ds, batch_size=7, shuffle=True, seed=5, num_workers=workers, prefetch_depth=depth,
                        in_order=in_order, persistent_workers=True)
    for _ in range(3):  # persistent workers: the jobs of one epoch never leak into the next
        reference = collect(sequential)
        got = collect(loader)
        if not in_order:  # completion order: the same batches, as a multiset
            got = sorted(got, key=lambda kv: kv[1][0].tobytes())
            expected = sorted(reference, key=lambda kv: kv[1][0].tobytes())
        else:
            expected = reference
        _same_batches(got, expected)
    stats = loader.stats
    assert stats.batches == stats.built == -(-N // 7)  # the consumer's own builds count too
    assert stats.fetch_s > 0
    loader.close()


def test_workers_build_native_batches_with_no_python_and_the_consumer_helps():
    # Every batch was built by a native job: the general path is never called.
    calls = []

    class Counting(ArrayDataset):  # a subclass never takes the native path ...
        def __getitems__(self, indices, out=None):
            calls.append(len(indices))
            return super().__getitems__(indices, out)

    x = np.arange(N * 2.0).reshape(N, 2)
    batches = list(DataLoader(Counting(x), batch_size=10, num_workers=2))
    assert len(calls) == len(batches) == N // 10  # ... so its __getitems__ ran for every batch
    assert np.array_equal(np.concatenate([b[0] for b in batches]), x)
    loader = DataLoader(ArrayDataset(x), batch_size=10, num_workers=2)
    fetch, _ = loader._engine.plan._map_builder(None, (0, 0))
    assert fetch.kind is BuilderKind.NATIVE_ROWS and fetch.rows is not None


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bad_index_fails_its_batch_by_the_general_path_and_the_epoch_goes_on(workers):
    ds = ArrayDataset(np.arange(40.0).reshape(20, 2))
    loader = DataLoader(ds, batch_sampler=[[0, 1], [2, 20], [-1, 3], [4]], num_workers=workers)
    got = collect(loader)
    assert [k for k, _ in got] == ["batch", "error", "batch", "batch"]
    assert got[1][1] == ("IndexError", ("index 20 is out of bounds for axis 0 with size 20",))
    assert got[2][1][0].tolist() == [[38.0, 39.0], [6.0, 7.0]]  # negative: from the end, as NumPy


def test_a_failing_worker_init_fn_fails_its_workers_batches_never_an_unfilled_one():
    x = np.arange(N * 2.0).reshape(N, 2)

    def init(worker_id):
        if worker_id == 0:
            raise RuntimeError("worker 0 cannot start")

    for _ in range(5):
        got = collect(DataLoader(ArrayDataset(x), batch_size=10, num_workers=2, worker_init_fn=init))
        assert len(got) == N // 10
        for i, (kind, value) in enumerate(got):
            if kind == "error":
                assert value == ("RuntimeError", ("worker 0 cannot start",))
            else:  # built by worker 1 or by the consumer: filled
                assert np.array_equal(value[0], x[10 * i : 10 * i + 10])


def test_an_ndf_file_closed_mid_epoch_fails_the_later_batches_and_the_epoch_ends(ndf_path):
    ds = NdfDataset(ndf_path)
    loader = DataLoader(ds, batch_size=10, num_workers=2, prefetch_depth=0)
    it = iter(loader)
    first = next(it)
    assert first[0].shape == (10, 6) and first[1].shape == (10, 2)
    ds.close()
    kinds = []
    for _ in range(N // 10 - 1):
        try:
            next(it)
            kinds.append("batch")
        except ValueError as exc:
            assert "closed .ndf file" in str(exc)
            kinds.append("error")
    with pytest.raises(StopIteration):
        next(it)
    assert kinds[-1] == "error" and len(kinds) == N // 10 - 1  # built before close(): batches


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_early_breaks_and_many_epochs_leave_no_worker_behind(workers):
    x = np.arange(N * 4.0).reshape(N, 4)
    loader = DataLoader(ArrayDataset(x), batch_size=4, shuffle=True, num_workers=workers, prefetch_depth=8)
    for epoch in range(200):
        for i, batch in enumerate(loader):
            if i == epoch % 5:
                break
    assert len(list(loader)) == N // 4


# -- RowJobs itself -------------------------------------------------------------------------


def _claim_all(window, jobs, rec):
    # A worker's loop until the window is finished: returns the non-native batches it claimed.
    others = []
    while (k := jobs.work(window, rec)) >= 0:
        others.append(k)
        window.complete(k)
    return others


def test_row_jobs_gather_what_take_rows_does():
    a = np.random.default_rng(2).standard_normal((50, 3))
    b = np.arange(50, dtype=np.int16)
    jobs, window, rec = RowJobs(4, (a, b)), Window(4), Recorder(16)
    idx = np.array([5, 0, 49, 5], dtype=np.int64)
    outs = jobs.prepare(0, idx)
    idx[:] = 0  # the job holds its own copy of the indices
    assert [o.shape for o in outs] == [(4, 3), (4,)]
    assert jobs.prepare(1, np.array([1, 50], dtype=np.int64)) is None  # out of range: the general path
    assert jobs.prepare(2, np.array([-1], dtype=np.int64)) is None  # negative: the general path
    assert jobs.prepare(3, np.array([], dtype=np.int64)) is None
    window.publish()
    window.publish()
    window.finish()
    assert _claim_all(window, jobs, rec) == [1]  # slot 1 holds no job
    expected = np.array([5, 0, 49, 5])
    assert outs[0].tobytes() == take_rows(a, expected).tobytes()
    assert outs[1].tobytes() == take_rows(b, expected).tobytes()
    assert rec.batches == 1 and jobs.error(0) is None


def test_row_jobs_help_builds_until_the_batch_is_ready_and_only_native_ones():
    a = np.arange(20.0)
    jobs, window, rec = RowJobs(3, (a,)), Window(3), Recorder(16)
    outs = [jobs.prepare(0, np.array([3], dtype=np.int64)), jobs.prepare(1, np.array([4], dtype=np.int64))]
    jobs.drop(2)
    for _ in range(3):
        window.publish()
    assert jobs.help(window, 1, rec) == 2  # 0 and 1, in order; then batch 1 is ready
    assert jobs.help(window, 2, rec) == 0  # batch 2 is not native: left to a worker
    assert window.try_claim() == 2
    assert [o[0].tolist() for o in outs] == [[3.0], [4.0]]


def test_row_jobs_refuse_what_they_cannot_gather():
    assert not can_run(())
    assert not can_run((np.zeros((4, 2))[:, ::2],))  # strided
    assert not can_run((np.array([object()] * 4),))  # Python objects
    assert not can_run((np.zeros(4), np.zeros(5)))  # lengths differ
    assert not can_run((np.ma.masked_array(np.zeros(4)),))  # an ndarray subclass (its own indexing)
    with pytest.raises(ValueError, match="C-contiguous"):
        RowJobs(2, (np.zeros(4), np.zeros(5)))
    with pytest.raises(ValueError, match=r"got 0: ndarray of shape \(4,\).*; 1: ndarray of shape \(5,\)"):
        RowJobs(2, (np.zeros(4), np.zeros(5)))  # each source named
    with pytest.raises(ValueError, match="got 0: a list, not a NumPy array"):
        RowJobs(2, ([1, 2],))
    with pytest.raises(ValueError, match="size=0"):
        RowJobs(0, (np.zeros(4),))
    jobs = RowJobs(2, (np.zeros(4),))
    with pytest.raises(IndexError, match="slot 2"):
        jobs.prepare(2, np.zeros(1, dtype=np.int64))
    with pytest.raises(ValueError, match="3 slots"):
        jobs.work(Window(3), Recorder(4))
    with pytest.raises(ValueError, match="owners"):
        jobs.work(Window(2, 2), Recorder(4))
    assert jobs.prepare(0, np.zeros(2, dtype=np.int32)) is None  # not int64: the general path
    assert jobs.prepare(0, np.zeros((2, 1), dtype=np.int64)) is None


def test_row_jobs_of_a_reader_report_its_errors_for_their_batch(ndf_path):
    ds = NdfDataset(ndf_path)
    reader = ds.file._reader
    jobs, window, rec = RowJobs(2, reader), Window(2), Recorder(4)
    x, y = jobs.prepare(0, np.array([2, 7], dtype=np.int64))
    window.publish()
    expected_x, expected_y = ds.file.read_rows([2, 7])
    ds.close()  # before the job runs: it fails as read_rows on a closed file does
    jobs.prepare(1, np.array([1], dtype=np.int64))
    window.publish()
    window.finish()
    assert _claim_all(window, jobs, rec) == []
    error = jobs.error(0)
    assert isinstance(error, ValueError) and "closed .ndf file" in str(error)
    ds2 = NdfDataset(ndf_path)
    jobs2, window2 = RowJobs(1, ds2.file._reader), Window(1)
    x, y = jobs2.prepare(0, np.array([2, 7], dtype=np.int64))
    window2.publish()
    window2.finish()
    _claim_all(window2, jobs2, rec)
    assert jobs2.error(0) is None
    assert x.tobytes() == expected_x.tobytes() and y.tobytes() == expected_y.tobytes()
    ds2.close()


def test_a_changed_collate_map_turns_the_jobs_off_for_the_epoch(monkeypatch):
    from dataloader._collation import default as default_module

    def arrays(batch, *, collate_fn_map=None):
        return np.stack(batch) + 1

    monkeypatch.setitem(default_module.default_collate_fn_map, np.ndarray, arrays)
    x = np.arange(N * 2.0).reshape(N, 2)
    loader = DataLoader(ArrayDataset(x), batch_size=N // 2, num_workers=2)
    fetch, _ = loader._engine.plan._map_builder(None, (0, 0))
    assert fetch.kind is not BuilderKind.NATIVE_ROWS and fetch.rows is None
    batches = list(loader)
    assert np.array_equal(np.concatenate([b[0] for b in batches]), x + 1)


class _NoBigArrays:
    """``numpy`` for ``_rowjobs``, whose ``empty`` cannot allocate more than ``limit`` rows."""

    def __init__(self, limit):
        self.limit = limit

    def __getattr__(self, name):
        return getattr(np, name)

    def empty(self, shape, dtype):
        if shape[0] > self.limit:
            raise MemoryError(f"Unable to allocate an array with shape {shape}")
        return np.empty(shape, dtype)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("limit", [10, 0], ids=["big batches", "any batch (the epoch's check)"])
def test_a_batch_whose_columns_cannot_be_allocated_is_built_by_the_general_path(monkeypatch, workers, limit):
    x = np.arange(N * 3.0).reshape(N, 3)
    batches = [[0, 1], np.arange(50), [2, 3], list(range(40, 60)), [4]]
    expected = collect(DataLoader(ArrayDataset(x, -x), batch_sampler=batches))
    monkeypatch.setattr(_rowjobs, "np", _NoBigArrays(limit))
    for _ in range(3):  # neither iter() nor next() raises it: the batch goes on without a job
        _same_batches(collect(DataLoader(ArrayDataset(x, -x), batch_sampler=batches, num_workers=workers)), expected)
