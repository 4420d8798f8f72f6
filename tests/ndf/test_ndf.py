"""Tests for dataloader.ndf: format, atomic writing, validation, reading, NdfDataset."""

from __future__ import annotations

import gc
import os
import struct
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataloader._ndf import read as ndf_read
from dataloader.ndf import NDF_HEADER, NdfDataset, NdfFile, NdfWriter, open_ndf, save_ndf

ACCESS = ["mmap", "pread"]


def _file_rows(path: str) -> np.ndarray:
    """Reference decoding of a whole .ndf file with plain NumPy."""
    raw = open(path, "rb").read()
    _, n, d, l = NDF_HEADER.unpack(raw[:28])
    return np.frombuffer(raw[28:], dtype="<f8").reshape(n, d + l)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Exact equality, NaN payloads and -0.0 included."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    b = np.ascontiguousarray(b, dtype=np.float64)
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


@pytest.fixture
def small(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((50, 4)), rng.standard_normal((50, 2))
    path = tmp_path / "small.ndf"
    save_ndf(path, x, y)
    return path, x, y


@pytest.fixture
def batched_items():
    """The class NdfDataset.__getitems__ returns (the loader's stacked-batch marker)."""
    from dataloader.dataset import BatchedItems

    return BatchedItems


# ---------------------------------------------------------------- round trip

@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 40), d=st.integers(1, 7), l=st.integers(0, 3),
    access=st.sampled_from(ACCESS), data=st.data(),
)
def test_round_trip_is_exact(n, d, l, access, data):
    floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
    x = data.draw(hnp.arrays(np.float64, (n, d), elements=floats))
    y = data.draw(hnp.arrays(np.float64, (n, l), elements=floats))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.ndf")
        save_ndf(path, x, y if l else None)
        assert os.path.getsize(path) == 28 + n * (d + l) * 8
        assert os.listdir(tmp) == ["r.ndf"]  # no temporary file left
        with open_ndf(path, access=access) as f:
            assert (f.n, f.d, f.l, f.access) == (n, d, l, access)
            ox, oy = f.read_rows(np.arange(n))
            assert _same_bits(ox, x) and _same_bits(oy, y)
            perm = data.draw(st.permutations(range(n)))
            ox, oy = f.read_rows(perm)
            assert _same_bits(ox, x[perm]) and _same_bits(oy, y[perm])
            for i in range(min(n, 3)):
                rx, ry = f.read_row(i)
                assert rx.shape == (d,) and ry.shape == (l,)
                assert _same_bits(rx, x[i]) and _same_bits(ry, y[i])


def test_bytes_match_the_seed_layout(tmp_path):
    path = tmp_path / "l.ndf"
    save_ndf(path, [[1, 2]], [3.5])
    assert path.read_bytes() == b"NDF1" + struct.pack("<QQQddd", 1, 2, 1, 1.0, 2.0, 3.5)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int64, np.uint16, np.float16, np.float32])
def test_save_converts_real_dtypes_to_float64(tmp_path, dtype):
    x = (np.arange(12).reshape(4, 3) % 2).astype(dtype)
    y = np.arange(4).astype(dtype)
    save_ndf(tmp_path / "c.ndf", x, y)
    with open_ndf(tmp_path / "c.ndf") as f:
        ox, oy = f.read_rows([0, 1, 2, 3])
    assert np.array_equal(ox, x.astype(np.float64)) and np.array_equal(oy[:, 0], y.astype(np.float64))


@pytest.mark.parametrize("bad", [
    np.ones((2, 2), dtype=np.complex128), np.array([[object()]], dtype=object),
    np.array([["a", "b"]]), np.array([[1]], dtype="datetime64[s]"),
])
def test_save_rejects_non_real_dtypes(tmp_path, bad):
    with pytest.raises(TypeError, match="dtype"):
        save_ndf(tmp_path / "t.ndf", bad)
    with pytest.raises(TypeError, match="dtype"):
        save_ndf(tmp_path / "t.ndf", np.ones((bad.shape[0], 1)), bad)
    assert not (tmp_path / "t.ndf").exists()


@pytest.mark.parametrize("x, y", [
    (np.ones(3), None), (np.ones((3, 0)), None), (np.ones((3, 2, 1)), None),
    (np.ones((3, 2)), np.ones(4)), (np.ones((3, 2)), np.ones((2, 1))),
    (np.ones((3, 2)), np.ones((3, 1, 1))),
])
def test_save_rejects_bad_shapes(tmp_path, x, y):
    with pytest.raises(ValueError, match="shape"):
        save_ndf(tmp_path / "s.ndf", x, y)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- NdfWriter

def test_writer_chunks_equal_save_ndf(tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((1000, 5)), rng.standard_normal((1000, 2))
    save_ndf(tmp_path / "whole.ndf", x, y)
    with NdfWriter(tmp_path / "chunks.ndf", d=5, l=2) as w:
        bounds = [0, 0, 300, 301, 999, 1000]  # includes an empty chunk
        for start, stop in zip(bounds, bounds[1:]):
            w.append(x[start:stop], y[start:stop])
        assert w.n == 1000
        assert not (tmp_path / "chunks.ndf").exists()  # only appears on close
    assert (tmp_path / "chunks.ndf").read_bytes() == (tmp_path / "whole.ndf").read_bytes()


def test_writer_validates_each_append(tmp_path):
    with NdfWriter(tmp_path / "v.ndf", d=3, l=1) as w:
        with pytest.raises(ValueError, match=r"x_rows must have shape \(k, 3\), got shape=\(2, 4\)"):
            w.append(np.ones((2, 4)), np.ones(2))
        with pytest.raises(ValueError, match=r"y_rows must have shape \(2, 1\), got shape=\(3,\)"):
            w.append(np.ones((2, 3)), np.ones(3))
        with pytest.raises(ValueError, match="y_rows is required"):
            w.append(np.ones((2, 3)))
        with pytest.raises(TypeError, match="dtype"):
            w.append(np.ones((1, 3), dtype=complex), [1])
        w.append(np.ones((2, 3)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match="closed"):
        w.append(np.ones((2, 3)), np.ones(2))
    with open_ndf(tmp_path / "v.ndf") as f:
        assert f.n == 2


@pytest.mark.parametrize("d, l, exc", [(0, 0, ValueError), (2, -1, ValueError), (2.0, 0, TypeError),
                                       (True, 0, TypeError)])
def test_writer_rejects_bad_geometry(tmp_path, d, l, exc):
    with pytest.raises(exc):
        NdfWriter(tmp_path / "g.ndf", d, l)
    assert os.listdir(tmp_path) == []


def test_writer_exception_leaves_nothing(tmp_path):
    target = tmp_path / "a.ndf"
    with pytest.raises(RuntimeError):
        with NdfWriter(target, d=2) as w:
            w.append(np.ones((10, 2)))
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    save_ndf(target, np.zeros((1, 2)))
    before = target.read_bytes()
    with pytest.raises(RuntimeError):
        with NdfWriter(target, d=2) as w:
            w.append(np.ones((10, 2)))
            raise RuntimeError("boom")
    assert target.read_bytes() == before and os.listdir(tmp_path) == ["a.ndf"]


def test_writer_dropped_without_close_removes_temp(tmp_path):
    w = NdfWriter(tmp_path / "dropped.ndf", d=1)
    w.append(np.ones((3, 1)))
    assert len(os.listdir(tmp_path)) == 1 and not (tmp_path / "dropped.ndf").exists()
    del w
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_writer_abort_and_close_are_idempotent(tmp_path):
    w = NdfWriter(tmp_path / "x.ndf", d=1)
    w.abort()
    w.abort()
    w.close()
    assert w.closed and os.listdir(tmp_path) == []


def test_save_replaces_existing_file(tmp_path):
    save_ndf(tmp_path / "r.ndf", np.ones((5, 2)))
    save_ndf(tmp_path / "r.ndf", np.zeros((1, 3)), np.ones(1))
    with open_ndf(tmp_path / "r.ndf") as f:
        assert (f.n, f.d, f.l) == (1, 3, 1)


# ---------------------------------------------------------------- validation on open

def _write(path, data: bytes):
    with open(path, "wb") as fh:
        fh.write(data)
    return path


@pytest.mark.parametrize("data, problem", [
    (b"", "shorter than 28"),
    (b"NDF1" + b"\0" * 10, "shorter than 28"),
    (b"NDF3" + struct.pack("<QQQ", 0, 1, 0), "magic"),
    (b"NDF2" + struct.pack("<QQQ", 0, 1, 0), "version-2 header is 28 bytes, shorter than 44"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 1, 0, b"<c8", b"<f8", 4) + b"{}  ", "x dtype b'<c8"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 1, 0, b"<f4", b"|O", 4) + b"{}  ", "y dtype b'|O"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 1, 0, b"<f4", b"<i8", 99) + b"{}  ", "99 bytes of metadata"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 1, 0, b"<f4", b"<i8", 4) + b"[]  ", "not an object"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 1, 0, b"<f4", b"<i8", 4) + b"{]  ", "not UTF-8 JSON"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 2, 0, b"<f4", b"<i8", 28)
     + b'{"feature_names": ["a"]}    ', "'feature_names' has 1 names for 2 columns"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 0, 1, 1, b"<f4", b"<i8", 20)
     + b'{"label_names": [7]}', "'label_names' is not a list of strings"),
    (b"NDF2" + struct.pack("<QQQ4s4sQ", 1, 1, 1, b"<f4", b"<i8", 4) + b"{}  " + b"\0" * 11,
     "needs 60 bytes"),
    (b"PK\x03\x04" + b"\0" * 40, "magic"),
    (NDF_HEADER.pack(b"NDF1", 0, 0, 0), "d=0"),
    (NDF_HEADER.pack(b"NDF1", 1, 2, 0) + b"\0" * 15, "needs 44 bytes"),
    (NDF_HEADER.pack(b"NDF1", 1, 2, 0) + b"\0" * 17, "needs 44 bytes"),
    (NDF_HEADER.pack(b"NDF1", 2**62, 2**62, 2**62), "overflows"),
    (NDF_HEADER.pack(b"NDF1", 0, 2**61, 0), "overflows"),
    (NDF_HEADER.pack(b"NDF1", 2**60, 1, 0), "overflows"),
])
def test_open_rejects_bad_files(tmp_path, data, problem):
    path = _write(tmp_path / "bad.ndf", data)
    for access in ACCESS:
        with pytest.raises(ValueError, match=problem) as info:
            open_ndf(path, access=access)
        assert "bad.ndf" in str(info.value)


def test_open_io_errors_are_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_ndf(tmp_path / "missing.ndf")
    with pytest.raises(IsADirectoryError):
        open_ndf(tmp_path)


@pytest.mark.timeout(10)
def test_open_rejects_fifos_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="not a regular file"):
        open_ndf(tmp_path / "fifo")


def test_open_rejects_bad_options(small):
    with pytest.raises(ValueError, match="access"):
        open_ndf(small[0], access="fast")
    with pytest.raises(ValueError, match="advice"):
        open_ndf(small[0], advice="willneed")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    magic=st.sampled_from([b"NDF1", b"NDF1", b"NDF0", b"\0\0\0\0"]),
    n=st.one_of(st.integers(0, 6), st.integers(0, 2**64 - 1)),
    d=st.one_of(st.integers(0, 4), st.integers(0, 2**64 - 1)),
    l=st.one_of(st.integers(0, 3), st.integers(0, 2**64 - 1)),
    body=st.binary(max_size=300), cut=st.integers(0, 400),
    access=st.sampled_from(ACCESS),
)
def test_fuzzed_headers_only_raise_or_read_exactly(magic, n, d, l, body, cut, access):
    data = (NDF_HEADER.pack(magic, n, d, l) + body)[:cut]
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(os.path.join(tmp, "f.ndf"), data)
        try:
            f = open_ndf(path, access=access)
        except (ValueError, OSError):
            return
        with f:
            assert len(data) == 28 + f.n * (f.d + f.l) * 8
            ref = np.frombuffer(data[28:], dtype="<f8").reshape(f.n, f.d + f.l)
            ox, oy = f.read_rows(np.arange(f.n)[::-1])
            assert _same_bits(np.hstack([ox, oy]), ref[::-1])
            with pytest.raises(IndexError):
                f.read_rows([f.n])


@settings(max_examples=100, deadline=None)
@given(raw=st.binary(max_size=200))
def test_random_bytes_never_open_wrongly(raw):
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(os.path.join(tmp, "r.ndf"), raw)
        try:
            with open_ndf(path) as f:
                ox, oy = f.read_rows(range(f.n))
        except (ValueError, OSError):
            return
        assert _same_bits(np.hstack([ox, oy]), _file_rows(path))


# ---------------------------------------------------------------- reading

@pytest.mark.parametrize("access", ACCESS)
def test_read_rows_into_out_arrays(small, access):
    path, x, y = small
    idx = [5, 6, 7, 0, 49, 49]
    out_x, out_y = np.full((6, 4), np.nan), np.full((6, 2), np.nan)
    with open_ndf(path, access=access) as f:
        rx, ry = f.read_rows(np.array(idx, dtype=np.int32), out_x, out_y)
        assert rx is out_x and ry is out_y
        assert np.array_equal(out_x, x[idx]) and np.array_equal(out_y, y[idx])
        strided = np.array(idx * 2)[::2]  # not C-contiguous
        rx, ry = f.read_rows(strided)
        assert np.array_equal(rx, x[strided]) and np.array_equal(ry, y[strided])


@pytest.mark.parametrize("access", ACCESS)
def test_read_rows_bad_out_arrays(small, access):
    with open_ndf(small[0], access=access) as f:
        good_y = np.empty((2, 2))
        with pytest.raises(TypeError, match="out_x.*float64"):
            f.read_rows([0, 1], np.empty((2, 4), np.float32), good_y)
        with pytest.raises(ValueError, match=r"out_x must have shape \(2, 4\)"):
            f.read_rows([0, 1], np.empty((3, 4)), good_y)
        with pytest.raises(ValueError, match=r"out_y must have shape \(2, 2\)"):
            f.read_rows([0, 1], None, np.empty((2, 3)))
        with pytest.raises(ValueError, match="out_x must be C-contiguous"):
            f.read_rows([0, 1], np.empty((4, 2)).T, good_y)
        readonly = np.empty((2, 4))
        readonly.flags.writeable = False
        with pytest.raises(ValueError, match="out_x must be writeable"):
            f.read_rows([0, 1], readonly, good_y)
        with pytest.raises(TypeError, match="out_y must be a numpy.ndarray"):
            f.read_rows([0, 1], None, [[0.0, 0.0]] * 2)
        with pytest.raises(TypeError, match="out_x.*dtype"):
            f.read_rows([0, 1], np.empty((2, 4), ">f8"), good_y)


@pytest.mark.parametrize("access", ACCESS)
def test_read_rows_bad_indices(small, access):
    with open_ndf(small[0], access=access) as f:
        for bad in ([0, 50], [-1], [3, 2**63 - 1], [2**70], np.array([7, 2**63], dtype=np.uint64)):
            with pytest.raises(IndexError, match=f"index {bad[-1]} is out of (int64's )?range"):
                f.read_rows(bad)
        with pytest.raises(TypeError, match="integers"):
            f.read_rows([0.0, 1.0])
        with pytest.raises(TypeError, match="integers"):
            f.read_rows(np.array([True, False]))
        with pytest.raises(TypeError, match="integers"):
            f.read_rows([0, None])
        with pytest.raises(ValueError, match="1-D"):
            f.read_rows(np.zeros((2, 2), dtype=np.int64))
        with pytest.raises(IndexError, match="index 50"):
            f.read_row(50)
        with pytest.raises(IndexError, match="index -1"):
            f.read_row(-1)
        with pytest.raises(TypeError):
            f.read_row(1.0)
        x, y = f.read_rows([])
        assert x.shape == (0, 4) and y.shape == (0, 2)
        x, y = f.read_rows(i for i in (3, 1))  # any iterable of ints
        assert np.array_equal(x, small[1][[3, 1]])


@pytest.mark.parametrize("access", ACCESS)
def test_closed_file_reads_raise(small, access):
    f = open_ndf(small[0], access=access)
    with f:
        assert not f.closed
    assert f.closed
    f.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        f.read_rows([0])
    with pytest.raises(ValueError, match="closed"):
        f.read_row(0)
    assert "closed" in repr(f)


def test_auto_access_maps_small_files(small, monkeypatch):
    with open_ndf(small[0]) as f:
        assert f.access == "mmap"
    monkeypatch.setattr(ndf_read, "MMAP_AUTO_MAX_BYTES", 100)
    with open_ndf(small[0], advice="random") as f:
        assert f.access == "pread" and len(f) == 50


# ---------------------------------------------------------------- NdfDataset

def test_dataset_items_and_batches(small, batched_items):
    path, x, y = small
    with NdfDataset(path) as ds:
        assert len(ds) == 50 and NdfDataset.accepts_index_arrays is True
        ix, iy = ds[3]
        assert np.array_equal(ix, x[3]) and np.array_equal(iy, y[3])
        for idx in ([4, 0, 4], np.array([4, 0, 4], dtype=np.int64)):
            batch = ds.__getitems__(idx)
            assert isinstance(batch, batched_items) and len(batch) == 3
            bx, by = batch.columns
            assert np.array_equal(bx, x[[4, 0, 4]]) and np.array_equal(by, y[[4, 0, 4]])
            assert np.array_equal(batch[1][0], x[0])
    assert ds.file.closed


def test_dataset_without_labels_has_empty_y(tmp_path, batched_items):
    save_ndf(tmp_path / "u.ndf", np.arange(6.0).reshape(3, 2))
    with NdfDataset(tmp_path / "u.ndf") as ds:
        bx, by = ds.__getitems__([2, 1]).columns
    assert by.shape == (2, 0) and np.array_equal(bx, [[4, 5], [2, 3]])


def test_dataset_over_shared_file_does_not_close_it(small):
    with open_ndf(small[0]) as f:
        ds = NdfDataset(f)
        ds.close()
        assert not f.closed and ds.file is f
        assert np.array_equal(ds[0][0], small[1][0])


def test_dropping_the_file_releases_its_descriptor(small):
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("needs /proc/self/fd")
    before = len(os.listdir("/proc/self/fd"))
    for access in ACCESS:
        f = open_ndf(small[0], access=access)
        f.read_rows([1])
        assert len(os.listdir("/proc/self/fd")) == before + 1
        del f
        gc.collect()
        assert len(os.listdir("/proc/self/fd")) == before
    assert isinstance(NdfFile, type)


# ---------------------------------------------------------------- object-array indices, width limits


@pytest.fixture
def small_ndf(tmp_path):
    path = tmp_path / "small.ndf"
    x = np.arange(20.0).reshape(10, 2)
    y = np.arange(10.0)
    save_ndf(path, x, y)
    with open_ndf(path) as f:
        yield f, x, y.reshape(-1, 1)


def test_read_rows_accepts_object_array_of_ints(small_ndf) -> None:
    f, x, y = small_ndf
    got_x, got_y = f.read_rows(np.array([1, 3], dtype=object))
    np.testing.assert_array_equal(got_x, x[[1, 3]])
    np.testing.assert_array_equal(got_y, y[[1, 3]])


def test_read_rows_object_array_out_of_range_names_the_index(small_ndf) -> None:
    f, _, _ = small_ndf
    with pytest.raises(IndexError, match=str(2**70)):
        f.read_rows(np.array([1, 2**70], dtype=object))
    with pytest.raises(IndexError, match="index 10 is out of range"):
        f.read_rows(np.array([1, 10], dtype=object))


@pytest.mark.parametrize("d, l", [(2**64, 0), (1, 2**64), (2**61, 0), (2**60, 2**60)])
def test_writer_rejects_rows_too_wide_for_the_format(tmp_path, d: int, l: int) -> None:  # noqa: E741
    path = tmp_path / "wide.ndf"
    with pytest.raises(ValueError, match="63-bit"):
        NdfWriter(path, d, l)
    assert os.listdir(tmp_path) == []  # no temporary file left behind
