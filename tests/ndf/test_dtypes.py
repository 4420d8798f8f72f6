""".ndf format version 2: the features' and labels' dtypes, column names, and
``NdfDataset(scalar_labels=True)`` (dataloader/_ndf/format.py, read.py, write.py)."""

from __future__ import annotations

import copy
import os
import pickle
import struct

import numpy as np
import pytest

from dataloader import DataLoader
from dataloader._ndf.format import DTYPES
from dataloader.ndf import NDF_HEADER, NdfDataset, NdfWriter, open_ndf, save_ndf

ACCESS = ["mmap", "pread"]
N = 23


def _table(x_dtype, y_dtype, n=N, d=3, l=2):  # noqa: E741
    """Rows whose values every dtype of DTYPES holds exactly (0..100, whole numbers)."""
    x = (np.arange(n * d) % 101).reshape(n, d).astype(x_dtype)
    y = (np.arange(n * l) * 7 % 101).reshape(n, l).astype(y_dtype)
    return x, y


# ---------------------------------------------------------------- version 1 stays as it was

@pytest.mark.parametrize("access", ACCESS)
def test_a_version_1_file_opens_as_float64_without_names(tmp_path, access):
    rows = np.arange(12.0).reshape(4, 3)  # d=2, l=1, written byte by byte as the seed does
    path = tmp_path / "old.ndf"
    path.write_bytes(NDF_HEADER.pack(b"NDF1", 4, 2, 1) + rows.astype("<f8").tobytes())
    with open_ndf(path, access=access) as f:
        assert (f.version, f.n, f.d, f.l) == (1, 4, 2, 1)
        assert f.x_dtype == np.float64 and f.y_dtype == np.float64
        assert f.feature_names is None and f.label_names is None
        x, y = f.read_rows([3, 0])
        np.testing.assert_array_equal(x, rows[[3, 0], :2])
        np.testing.assert_array_equal(y, rows[[3, 0], 2:])
        assert "x_dtype" not in repr(f)


def test_float64_without_names_is_still_written_as_version_1(tmp_path):
    x, y = _table(np.float64, np.float64)
    save_ndf(tmp_path / "v1.ndf", x, y)
    raw = (tmp_path / "v1.ndf").read_bytes()
    assert raw[:4] == b"NDF1" and len(raw) == 28 + N * 5 * 8
    assert raw[28:] == np.hstack([x, y]).astype("<f8").tobytes()


# ---------------------------------------------------------------- dtypes

@pytest.mark.parametrize("access", ACCESS)
@pytest.mark.parametrize("x_dtype", DTYPES, ids=str)
def test_features_and_labels_keep_the_dtypes_they_were_written_with(tmp_path, access, x_dtype):
    y_dtype = DTYPES[(DTYPES.index(x_dtype) + 3) % len(DTYPES)]
    x, y = _table(np.float64, np.float64)
    path = tmp_path / "t.ndf"
    save_ndf(path, x, y, x_dtype=x_dtype, y_dtype=y_dtype)
    row = 3 * x_dtype.itemsize + 2 * y_dtype.itemsize
    with open_ndf(path, access=access) as f:
        assert f.version == 2 and (f.x_dtype, f.y_dtype) == (x_dtype, y_dtype)
        idx = [5, 0, 22, 5]
        bx, by = f.read_rows(idx)
        assert bx.dtype == x_dtype and by.dtype == y_dtype
        np.testing.assert_array_equal(bx, x[idx].astype(x_dtype))
        np.testing.assert_array_equal(by, y[idx].astype(y_dtype))
        rx, ry = f.read_row(22)
        assert rx.dtype == x_dtype and ry.dtype == y_dtype
        np.testing.assert_array_equal(ry, y[22].astype(y_dtype))
    raw = path.read_bytes()
    rows = raw[len(raw) - N * row :]  # the rows are the file's last bytes, little-endian
    records = np.frombuffer(rows, dtype=[("x", x_dtype.newbyteorder("<"), (3,)),
                                         ("y", y_dtype.newbyteorder("<"), (2,))])
    np.testing.assert_array_equal(records["x"], x.astype(x_dtype))
    np.testing.assert_array_equal(records["y"], y.astype(y_dtype))
    assert (len(raw) - N * row) % 8 == 0  # rows start 8-byte aligned


def test_out_arrays_must_have_the_files_dtypes(tmp_path):
    x, y = _table(np.float32, np.int64)
    save_ndf(tmp_path / "t.ndf", x, y, x_dtype=np.float32, y_dtype=np.int64)
    with open_ndf(tmp_path / "t.ndf") as f:
        with pytest.raises(TypeError, match="out_x must have dtype float32, got dtype=float64"):
            f.read_rows([0], np.empty((1, 3)), np.empty((1, 2), np.int64))
        with pytest.raises(TypeError, match="out_y must have dtype int64"):
            f.read_rows([0], np.empty((1, 3), np.float32), np.empty((1, 2), np.float64))
        out_x, out_y = np.empty((2, 3), np.float32), np.empty((2, 2), np.int64)
        assert f.read_rows([1, 2], out_x, out_y)[0] is out_x
        np.testing.assert_array_equal(out_y, y[1:3])


@pytest.mark.parametrize(
    ("dtype", "value", "needle"),
    [
        (np.int64, 0.5, "0.5 (row 7 of the file, column 1) cannot be stored as int64"),
        (np.int64, np.nan, "nan (row 7"),
        (np.int64, np.inf, "inf (row 7"),
        (np.int8, 300, "300.0 (row 7"),
        (np.uint8, -1, "-1.0 (row 7"),
        (np.float32, 1e300, "1e+300 (row 7 of the file, column 1) cannot be stored as float32"),
        (np.float16, 70000.0, "70000.0 (row 7"),
    ],
)
def test_a_conversion_that_would_change_a_value_is_refused_and_nothing_is_written(
    tmp_path, dtype, value, needle
):
    y = np.zeros((10, 2))
    y[7, 1] = value
    with pytest.raises(ValueError, match="y_rows value") as info:
        save_ndf(tmp_path / "t.ndf", np.zeros((10, 1)), y, y_dtype=dtype)
    assert needle in str(info.value) and "t.ndf" in str(info.value)
    assert os.listdir(tmp_path) == []


def test_rounding_to_a_smaller_float_is_the_conversion_asked_for(tmp_path):
    x = np.array([[0.1], [1 / 3], [1e-50]])
    save_ndf(tmp_path / "t.ndf", x, x_dtype=np.float32)
    with open_ndf(tmp_path / "t.ndf") as f:
        np.testing.assert_array_equal(f.read_rows([0, 1, 2])[0], x.astype(np.float32))


@pytest.mark.parametrize("bad", [np.complex64, "U3", object, [("a", "<f8")], ">f8x", np.uint16])
def test_a_dtype_the_format_does_not_hold_is_refused(tmp_path, bad):
    with pytest.raises(TypeError, match="x_dtype="):
        NdfWriter(tmp_path / "t.ndf", 2, x_dtype=bad)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- names

@pytest.mark.parametrize("access", ACCESS)
def test_column_names_are_kept_in_the_file(tmp_path, access):
    x, y = _table(np.float64, np.float64)
    names = ["pixel 0", "größe", "a,b"]
    save_ndf(tmp_path / "t.ndf", x, y, feature_names=names, label_names=["label", "label"])
    with open_ndf(tmp_path / "t.ndf", access=access) as f:
        assert f.version == 2 and f.x_dtype == np.float64
        assert f.feature_names == tuple(names) and f.label_names == ("label", "label")
        np.testing.assert_array_equal(f.read_rows(range(N))[0], x)


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"feature_names": ["a"]}, ValueError, "feature_names has 1 names for 2 columns"),
        ({"label_names": []}, ValueError, "label_names has 0 names for 1 columns"),
        ({"feature_names": "ab"}, TypeError, "not one string"),
        ({"feature_names": ["a", 1]}, TypeError, "must be strings, got int 1"),
    ],
)
def test_names_must_be_strings_one_per_column(tmp_path, kwargs, error, needle):
    with pytest.raises(error, match=needle):
        NdfWriter(tmp_path / "t.ndf", 2, 1, **kwargs)


def test_a_writer_streams_a_version_2_file_and_patches_its_row_count(tmp_path):
    with NdfWriter(tmp_path / "t.ndf", 2, 1, x_dtype="float32", y_dtype="int64",
                   feature_names=["a", "b"]) as w:
        for k in range(5):
            w.append(np.full((k, 2), k), np.full(k, k))
    with open_ndf(tmp_path / "t.ndf") as f:
        assert f.n == 10 and f.feature_names == ("a", "b") and f.label_names is None
        np.testing.assert_array_equal(f.read_rows(range(10))[1][:, 0], [1, 2, 2, 3, 3, 3, 4, 4, 4, 4])


# ---------------------------------------------------------------- scalar labels

@pytest.fixture
def classes(tmp_path):
    x = np.arange(40.0).reshape(20, 2)
    y = np.arange(20) % 3
    path = tmp_path / "c.ndf"
    save_ndf(path, x, y, x_dtype=np.float32, y_dtype=np.int64)
    return path, x.astype(np.float32), y


def test_scalar_labels_give_items_with_a_scalar_label(classes):
    path, x, y = classes
    with NdfDataset(path, scalar_labels=True) as ds:
        item_x, item_y = ds[4]
        assert item_x.dtype == np.float32 and np.ndim(item_y) == 0 and item_y == y[4]
        assert isinstance(item_y, np.int64)
        bx, by = ds.__getitems__([4, 5]).columns
        assert by.shape == (2,) and by.dtype == np.int64 and by.tolist() == [y[4], y[5]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("access", ACCESS)
def test_scalar_label_batches_have_shape_b_also_from_the_native_jobs(classes, workers, access):
    path, x, y = classes
    ds = NdfDataset(path, scalar_labels=True, access=access)

    def no_general_path(*args, **kwargs):
        raise AssertionError("a batch was built by __getitems__, not by the native jobs")

    if workers:  # workers gather every batch natively, from the Reader
        ds.file.read_rows = no_general_path
    with DataLoader(ds, batch_size=6, shuffle=True, seed=1, num_workers=workers) as loader:
        batches = list(loader)
    ds.close()
    assert [b[1].shape for b in batches] == [(6,), (6,), (6,), (2,)]
    got_x = np.concatenate([b[0] for b in batches])
    got_y = np.concatenate([b[1] for b in batches])
    assert got_x.dtype == np.float32 and got_y.dtype == np.int64
    order = (got_x[:, 0] / 2).astype(int)
    assert sorted(order) == list(range(20)) and np.array_equal(got_y, y[order])


def test_scalar_labels_need_exactly_one_label_column(tmp_path):
    save_ndf(tmp_path / "two.ndf", np.zeros((3, 1)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="scalar_labels=True needs one label column; .* has l=2"):
        NdfDataset(tmp_path / "two.ndf", scalar_labels=True)


@pytest.mark.parametrize("how", [pickle.dumps, copy.deepcopy])
def test_a_copied_dataset_keeps_its_scalar_labels_and_checks_the_dtypes(classes, how):
    path, x, y = classes
    ds = NdfDataset(path, scalar_labels=True)
    blob = how(ds)
    twin = pickle.loads(blob) if isinstance(blob, bytes) else blob
    assert twin.scalar_labels and twin[3][1] == y[3] and "scalar_labels=True" in repr(twin)
    twin.close()
    blob = pickle.dumps(ds)
    ds.close()
    save_ndf(path, x, y, x_dtype=np.float64, y_dtype=np.int64)  # same n, d, l; other x dtype
    with pytest.raises(ValueError, match="x_dtype=<f8.*the copy expected .*x_dtype=<f4"):
        pickle.loads(blob)


def test_crossentropyloss_takes_a_converted_files_batches(classes):
    torch = pytest.importorskip("torch")
    from dataloader.torch import DataLoader as TorchLoader

    path, x, y = classes
    model = torch.nn.Linear(2, 3)  # float32 parameters
    with NdfDataset(path, scalar_labels=True) as ds:
        for bx, by in TorchLoader(ds, batch_size=8, shuffle=True):
            assert bx.dtype == torch.float32 and by.dtype == torch.int64 and by.ndim == 1
            torch.nn.CrossEntropyLoss()(model(bx), by).backward()


def test_headers_of_version_2_are_44_bytes_then_metadata():
    # The struct the module docstring describes; a reader in another language relies on it.
    from dataloader._ndf.format import NDF2_HEADER

    assert NDF2_HEADER.format == "<4sQQQ4s4sQ" and NDF2_HEADER.size == 44
    assert struct.calcsize("<4sQQQ") == NDF_HEADER.size == 28
