"""Tests for the native gatherer (dataloader/_native/_gather.pyx) via dataloader.ndf.

Covers run coalescing in both access paths, the native argument guards,
concurrent reads from many threads, close() racing reads, and truncation
of a file while it is open (pread path).
"""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest
from tests._support import run_threads
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader.ndf import NdfWriter, open_ndf, save_ndf
from dataloader.shard import ShardSampler

ACCESS = ["mmap", "pread"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """A 5000 x (3 + 2) file and its arrays, plus a label-free twin."""
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((5000, 3)), rng.standard_normal((5000, 2))
    tmp = tmp_path_factory.mktemp("gather")
    save_ndf(tmp / "xy.ndf", x, y)
    save_ndf(tmp / "x.ndf", x)
    return tmp, x, y


def test_extension_keeps_the_gil_disabled():
    import sysconfig

    import dataloader._native._gather  # noqa: F401

    if not sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("GIL build")
    assert sys._is_gil_enabled() is False


@settings(max_examples=80, deadline=None)
@given(
    runs=st.lists(st.tuples(st.integers(0, 4999), st.integers(1, 400)), max_size=8),
    access=st.sampled_from(ACCESS), labels=st.booleans(),
)
def test_runs_of_consecutive_indices_are_exact(rows, runs, access, labels):
    """Any mix of runs and single rows, with and without labels."""
    tmp, x, y = rows
    idx = np.concatenate([np.arange(a, min(a + k, 5000)) for a, k in runs] or [np.arange(0)])
    with open_ndf(tmp / ("xy.ndf" if labels else "x.ndf"), access=access) as f:
        ox, oy = f.read_rows(idx.astype(np.int64))
    assert np.array_equal(ox, x[idx])
    assert np.array_equal(oy, y[idx] if labels else np.empty((len(idx), 0)))


@pytest.mark.parametrize("access", ACCESS)
def test_runs_longer_than_the_bounce_buffer_and_rows_larger_than_it(rows, tmp_path, access):
    tmp, x, y = rows  # 40-byte rows: 1638 per 64 KiB bounce buffer
    with open_ndf(tmp / "xy.ndf", access=access) as f:
        for idx in (np.arange(5000), np.arange(1, 4999), np.r_[np.arange(3000, 5000), 7, 8]):
            ox, oy = f.read_rows(idx)
            assert np.array_equal(ox, x[idx]) and np.array_equal(oy, y[idx])
    wide = np.random.default_rng(2).standard_normal((3, 9000))  # 72 KB rows
    save_ndf(tmp_path / "wide.ndf", wide, wide[:, :2])
    with open_ndf(tmp_path / "wide.ndf", access=access) as f:
        ox, oy = f.read_rows([0, 1, 2, 1])
    assert np.array_equal(ox, wide[[0, 1, 2, 1]]) and np.array_equal(oy, wide[[0, 1, 2, 1], :2])


@pytest.mark.parametrize("access", ACCESS)
def test_native_guards_reject_bad_arguments(rows, access):
    tmp, x, _ = rows
    with open_ndf(tmp / "xy.ndf", access=access) as f:
        reader = f._reader
        ox, oy = np.zeros((2, 3)), np.zeros((2, 2))
        with pytest.raises(TypeError, match="indices"):
            reader.gather(np.array([0, 1], dtype=np.int32), ox, oy)
        with pytest.raises(TypeError, match="indices"):
            reader.gather(np.array([0, 9, 1], dtype=np.int64)[::2], ox, oy)
        with pytest.raises(ValueError, match="out_y must have shape"):
            reader.gather(np.array([0, 1]), ox, np.empty((2, 3)))
        with pytest.raises(TypeError, match="out_x"):
            reader.gather(np.array([0, 1]), ox.astype(np.float32), oy)
        with pytest.raises(IndexError, match="index -9223372036854775808"):
            reader.gather(np.array([0, -(2**63)]), ox, oy)
        with pytest.raises(ValueError, match="3 elements"):
            reader.gather_one(0, np.empty(4), np.empty(2))
        reader.gather_one(4999, ox[0], oy[0])
        assert np.array_equal(ox[0], x[4999])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("access", ACCESS)
def test_eight_threads_read_one_file_exactly(rows, access):
    tmp, x, y = rows
    f = open_ndf(tmp / "xy.ndf", access=access)
    start = threading.Barrier(8)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        for _ in range(200):
            idx = rng.integers(0, 5000, size=int(rng.integers(0, 300)))
            ox, oy = f.read_rows(idx)
            if not (np.array_equal(ox, x[idx]) and np.array_equal(oy, y[idx])):
                raise AssertionError(f"wrong rows on thread {seed}")
            i = int(rng.integers(0, 5000))
            rx, ry = f.read_row(i)
            if not (np.array_equal(rx, x[i]) and np.array_equal(ry, y[i])):
                raise AssertionError(f"wrong row {i} on thread {seed}")

    errors = run_threads(work, 8)
    f.close()
    assert errors == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("access", ACCESS)
def test_close_while_threads_read_is_safe(rows, access):
    tmp, x, y = rows
    fd_dir = "/proc/self/fd"
    before = len(os.listdir(fd_dir)) if os.path.isdir(fd_dir) else None
    f = open_ndf(tmp / "xy.ndf", access=access)
    reads = [0] * 4
    outcome: list[object] = [None] * 4
    go = threading.Event()

    def work(k: int) -> None:
        idx = np.arange(k * 1000, k * 1000 + 256)
        try:
            while True:
                ox, oy = f.read_rows(idx)
                if not np.array_equal(ox, x[idx]):
                    outcome[k] = "wrong rows"
                    return
                reads[k] += 1
                go.set()
        except ValueError as exc:
            outcome[k] = exc
        except BaseException as exc:
            outcome[k] = exc

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    assert go.wait(30)
    f.close()
    for t in threads:
        t.join()
    assert all(isinstance(o, ValueError) and "closed" in str(o) for o in outcome), outcome
    assert sum(reads) > 0
    if before is not None:
        assert len(os.listdir(fd_dir)) == before  # descriptor released once


@pytest.mark.timeout(60)
@pytest.mark.parametrize("access", ACCESS)
def test_indices_mutated_during_reads_never_read_outside_the_file(rows, access):
    """Another thread flips indices between valid and huge values mid-read:
    each read returns rows or raises IndexError, never touches foreign memory."""
    tmp, x, _ = rows
    idx = np.arange(0, 5000, 7, dtype=np.int64)
    stop = threading.Event()

    def flip() -> None:
        while not stop.is_set():
            idx[::3] = 2**62
            idx[::3] = np.arange(0, 5000, 21)

    flipper = threading.Thread(target=flip)
    flipper.start()
    outcomes = set()
    try:
        with open_ndf(tmp / "xy.ndf", access=access) as f:
            for _ in range(300):
                try:
                    ox, _ = f.read_rows(idx)
                    outcomes.add("rows")
                    assert np.isin(ox[:, 0], x[:, 0]).all()
                except IndexError:
                    outcomes.add("IndexError")
    finally:
        stop.set()
        flipper.join()
    assert outcomes <= {"rows", "IndexError"} and outcomes


def test_pread_reports_a_file_truncated_while_open(tmp_path):
    path = tmp_path / "t.ndf"
    save_ndf(path, np.ones((100, 4)))
    with open_ndf(path, access="pread") as f:
        os.truncate(path, 28 + 50 * 32)
        assert f.read_rows([10])[0].tolist() == [[1.0] * 4]
        with pytest.raises(OSError, match="unexpected end of file"):
            f.read_rows([10, 60])


@pytest.mark.timeout(60)
def test_two_dataloaders_share_one_file(rows):
    """Two loaders (one per shard) read one NdfDataset concurrently."""
    loader_mod = pytest.importorskip("dataloader.loader")
    from dataloader.ndf import NdfDataset

    tmp, x, y = rows
    with NdfDataset(tmp / "xy.ndf") as ds:
        results: dict[int, list] = {}

        def consume(shard: int) -> None:
            sampler = ShardSampler(ds, num_shards=2, shard_id=shard, seed=3)
            loader = loader_mod.DataLoader(ds, batch_size=64, sampler=sampler, num_workers=2)
            results[shard] = [(np.asarray(bx), np.asarray(by)) for bx, by in loader]

        assert run_threads(consume, 2) == []
        for shard in range(2):
            order = ShardSampler(ds, num_shards=2, shard_id=shard, seed=3).indices(0)
            got_x = np.concatenate([bx for bx, _ in results[shard]])
            got_y = np.concatenate([by for _, by in results[shard]])
            assert np.array_equal(got_x, x[order]) and np.array_equal(got_y, y[order])


# ---------------------------------------------------------------- streaming, RSS budget

RSS_BUDGET_BYTES = 200 * 2**20


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def _check_encoded_rows(ox: np.ndarray, oy: np.ndarray, idx: np.ndarray | None) -> np.ndarray:
    """Rows encode their index: x[i, j] = 256 i + j, y[i] = -i.  Returns the indices."""
    ids = (ox[:, 0] / 256).astype(np.int64)
    if idx is not None:
        assert np.array_equal(ids, idx)
    assert np.array_equal(ox, ids[:, None] * 256.0 + np.arange(ox.shape[1]))
    assert np.array_equal(oy[:, 0], -ids.astype(np.float64))
    return ids


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_stream_a_file_larger_than_the_rss_budget(tmp_path):
    """Write >= 1 GiB with NdfWriter, read a shuffled epoch; RSS grows < 200 MiB.

    Page cache is not RSS; the default access ("auto") uses pread for a file
    this large, so no file page is mapped into the process.
    """
    if not os.path.exists("/proc/self/status"):
        pytest.skip("needs /proc/self/status")
    d, l, batch = 255, 1, 256  # 2 KiB rows
    n = 2**30 // ((d + l) * 8) + 4096
    path = tmp_path / "big.ndf"
    base = _status_bytes("VmRSS")
    can_reset = _reset_peak_rss()
    peak = base
    try:
        with NdfWriter(path, d, l) as w:
            cols = np.arange(d, dtype=np.float64)
            for start in range(0, n, 8192):
                ids = np.arange(start, min(n, start + 8192), dtype=np.float64)
                w.append(ids[:, None] * 256.0 + cols, -ids)
                peak = max(peak, _status_bytes("VmRSS"))
        assert os.path.getsize(path) >= 2**30

        with open_ndf(path) as f:
            assert f.access == "pread" and f.n == n
            perm = np.random.default_rng(0).permutation(n)
            out_x, out_y = np.empty((batch, d)), np.empty((batch, l))
            for start in range(0, n, batch):
                idx = perm[start:start + batch]
                ox, oy = f.read_rows(idx, out_x[: len(idx)], out_y[: len(idx)])
                _check_encoded_rows(ox, oy, idx)
                if start % (64 * batch) == 0:
                    peak = max(peak, _status_bytes("VmRSS"))

        try:
            from dataloader.loader import DataLoader
        except ImportError:
            DataLoader = None
        if DataLoader is not None:
            from dataloader.ndf import NdfDataset

            seen = np.zeros(n, dtype=bool)
            with NdfDataset(path) as ds:
                loader = DataLoader(ds, batch_size=batch, shuffle=True, num_workers=2)
                for k, (bx, by) in enumerate(loader):
                    seen[_check_encoded_rows(np.asarray(bx), np.asarray(by), None)] = True
                    if k % 64 == 0:
                        peak = max(peak, _status_bytes("VmRSS"))
            assert seen.all()
        peak = max(peak, _status_bytes("VmRSS"))
        if can_reset:
            peak = max(peak, _status_bytes("VmHWM"))
        assert peak - base < RSS_BUDGET_BYTES, f"RSS grew by {(peak - base) / 2**20:.0f} MiB"
    finally:
        path.unlink(missing_ok=True)
