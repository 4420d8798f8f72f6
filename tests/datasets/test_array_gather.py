"""ArrayDataset's batched fetch: the native row gather (``_native/_arrayrows``) and ``out=``.

A C-contiguous column without Python objects is gathered natively, any other through NumPy;
both must give exactly ``column[indices]`` (negative indices from the end, ``IndexError`` naming
an index outside ``[-N, N)``), and ``out=`` must be filled or refused with a named reason.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader import ArrayDataset
from dataloader._native._arrayrows import can_take, take_columns, take_rows

N = 50

#: columns the native kernel takes: dtypes, item shapes, byte orders, a structured dtype.
NATIVE_COLUMNS = {
    "f64 (N, 32)": lambda rng: rng.standard_normal((N, 32)),
    "f32 (N,)": lambda rng: rng.standard_normal(N).astype(np.float32),
    "int8 (N, 3, 5)": lambda rng: rng.integers(-128, 128, (N, 3, 5), dtype=np.int8),
    "bool (N, 7)": lambda rng: rng.integers(0, 2, (N, 7)).astype(bool),
    "complex (N, 2)": lambda rng: rng.standard_normal((N, 2)) + 1j,
    "big-endian f8 (N, 4)": lambda rng: rng.standard_normal((N, 4)).astype(">f8"),
    "structured (N,)": lambda rng: np.array(
        [(i, i * 0.5) for i in range(N)], dtype=[("a", "<i4"), ("b", "<f8")]
    ),
    "empty rows (N, 0)": lambda rng: np.zeros((N, 0)),
    "long rows (N, 3000)": lambda rng: rng.standard_normal((N, 3000)),
}

#: columns that keep NumPy's fancy indexing.
NUMPY_COLUMNS = {
    "strided (N, 16)": lambda rng: rng.standard_normal((N, 32))[:, ::2],
    "fortran (N, 3)": lambda rng: np.asfortranarray(rng.standard_normal((N, 3))),
    "object (N,)": lambda rng: np.array([f"s{i}" for i in range(N)], dtype=object),
    "list": lambda rng: list(range(N)),
}


def _equal(got, expected):
    assert type(got) is np.ndarray and got.dtype == expected.dtype
    assert got.shape == expected.shape and got.flags.c_contiguous
    if got.dtype == object:
        assert list(got) == list(expected)
    else:
        assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("make", NATIVE_COLUMNS.values(), ids=list(NATIVE_COLUMNS))
def test_native_columns_are_gathered_natively(make):
    column = make(np.random.default_rng(0))
    assert can_take(column)
    idx = [3, -1, 0, 0, 49, 10, 11, 12, -50]
    _equal(ArrayDataset(column).__getitems__(idx).columns[0], column[idx])


@pytest.mark.parametrize("make", NUMPY_COLUMNS.values(), ids=list(NUMPY_COLUMNS))
def test_other_columns_keep_numpy_indexing(make):
    column = make(np.random.default_rng(0))
    array = np.asarray(column)
    assert can_take(column) is (isinstance(column, np.ndarray) and array.flags.c_contiguous
                                and not array.dtype.hasobject)
    idx = [3, -1, 0, 0, 49]
    _equal(ArrayDataset(column).__getitems__(idx).columns[0], array[idx])


@settings(max_examples=60, deadline=None)
@given(
    idx=st.lists(st.integers(-N, N - 1), max_size=80),
    runs=st.lists(st.tuples(st.integers(0, N - 1), st.integers(1, 30)), max_size=4),
)
def test_random_indices_and_runs_match_numpy(idx, runs):
    x = np.arange(N * 3, dtype=np.float64).reshape(N, 3)
    y = np.arange(N, dtype=np.int64)
    all_idx = np.array(idx + [i for a, k in runs for i in range(a, min(a + k, N))], np.int64)
    cols = ArrayDataset(x, y).__getitems__(all_idx).columns
    _equal(cols[0], x[all_idx])
    _equal(cols[1], y[all_idx])


@pytest.mark.parametrize("view", ["strided", "reversed", "big-endian"])
def test_index_arrays_of_any_layout_are_gathered(view):
    x = np.arange(N * 2.0).reshape(N, 2)
    base = np.arange(N, dtype=np.int64)
    idx = {"strided": base[::3], "reversed": base[::-2], "big-endian": base[5:9].astype(">i8")}[view]
    _equal(ArrayDataset(x).__getitems__(idx).columns[0], x[idx])
    _equal(take_rows(x, idx), x[idx])


def test_take_columns_takes_any_sequence_of_arrays():
    x, y = np.arange(N * 2.0).reshape(N, 2), np.arange(N)
    idx = np.array([4, 0, -1])
    got = take_columns([x, y], idx)
    assert type(got) is tuple
    _equal(got[0], x[idx])
    _equal(got[1], y[idx])
    assert take_columns([x, y[::-1]], idx) is None  # a column the kernel does not take
    with pytest.raises(TypeError, match="indices must be a 1-D int64 array"):
        take_columns([x], idx.astype(np.int32))


def test_memmap_columns_are_gathered_natively(tmp_path):
    m = np.memmap(tmp_path / "x.bin", dtype=np.float32, mode="w+", shape=(N, 4))
    m[:] = np.arange(N * 4).reshape(N, 4)
    assert can_take(m)
    got = ArrayDataset(m).__getitems__([4, 2, -1]).columns[0]
    _equal(got, np.asarray(m)[[4, 2, -1]])


@pytest.mark.parametrize("bad", [N, N + 7, -N - 1, 2**62, -(2**63)])
def test_out_of_range_index_is_named(bad):
    ds = ArrayDataset(np.zeros((N, 2)))
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds for axis 0 with size {N}"):
        ds.__getitems__([0, -1, bad, 1])


def test_bad_index_writes_nothing_to_out():
    out = np.full((3, 2), 7.0)
    with pytest.raises(IndexError, match="index 5 "):
        ArrayDataset(np.zeros((5, 2))).__getitems__([0, 1, 5], out=(out,))
    assert (out == 7.0).all()


def test_empty_dataset():
    ds = ArrayDataset(np.zeros((0, 3)))
    assert ds.__getitems__([]).columns[0].shape == (0, 3)
    with pytest.raises(IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        ds.__getitems__([0])


def test_out_buffers_are_filled_and_returned():
    rng = np.random.default_rng(1)
    x, s = rng.standard_normal((N, 4)), rng.standard_normal((N, 8))[:, ::2]
    y = np.arange(N)
    ds = ArrayDataset(x, s, y)
    out = (np.empty((3, 4)), np.empty((3, 4)), None)
    cols = ds.__getitems__([5, -2, 5], out=out).columns
    assert cols[0] is out[0] and cols[1] is out[1]
    _equal(cols[0], x[[5, -2, 5]])
    _equal(cols[1], np.ascontiguousarray(s[[5, -2, 5]]))
    _equal(cols[2], y[[5, -2, 5]])
    assert ds.__getitems__([1], out=[None, None, np.empty(1, y.dtype)]).columns[2][0] == 1


@pytest.mark.parametrize("column", ["native", "numpy"])
@pytest.mark.parametrize(
    "out, exc, message",
    [  # NumPy's rule for out=: TypeError for what it is and its dtype, ValueError for shape and layout
        (np.empty((3, 3)), ValueError, r"out\[0\]: out must have shape \(3, 4\), got shape=\(3, 3\)"),
        (np.empty((3, 4), np.float32), TypeError, r"out\[0\]: out must have dtype float64, got dtype=float32"),
        (np.empty((4, 3)).T, ValueError, r"out\[0\]: out must be C-contiguous"),
        ("readonly", ValueError, r"out\[0\]: out must be .*writeable"),
        ([[0.0] * 4] * 3, TypeError, r"out\[0\]: out must be a numpy.ndarray, got list"),
    ],
)
def test_bad_out_is_named(out, exc, message, column):
    ds = ArrayDataset(np.zeros((N, 4)) if column == "native" else np.zeros((N, 8))[:, ::2])
    if isinstance(out, str):
        out = np.empty((3, 4))
        out.flags.writeable = False
    with pytest.raises(exc, match=message):
        ds.__getitems__([0, 1, 2], out=(out,))


def test_out_container_and_overlap_are_checked():
    x = np.zeros((N, 4))
    ds = ArrayDataset(x)
    with pytest.raises(TypeError, match="out must be a tuple or list of arrays, got ndarray"):
        ds.__getitems__([0], out=np.empty((1, 4)))
    with pytest.raises(ValueError, match=r"out has 2 entries; expected one per array \(1\)"):
        ds.__getitems__([0], out=(None, None))
    with pytest.raises(ValueError, match=r"out\[0\]: out overlaps the array it gathers from"):
        ds.__getitems__([0, 1], out=(x[10:12],))


@pytest.mark.timeout(60)
def test_concurrent_gathers_from_threads():
    x = np.random.default_rng(2).standard_normal((5000, 16))
    ds = ArrayDataset(x)

    def work(seed):
        rng = np.random.default_rng(seed)
        out = (np.empty((64, 16)),)
        for _ in range(300):
            idx = rng.integers(-5000, 5000, 64)
            if not np.array_equal(ds.__getitems__(idx, out=out).columns[0], x[idx]):
                raise AssertionError(f"wrong rows on thread {seed}")
        return seed

    with ThreadPoolExecutor(4) as pool:  # a worker's exception is re-raised here
        assert list(pool.map(work, range(4))) == [0, 1, 2, 3]


@pytest.mark.parametrize("bad", [2**63, 2**64 - 1])
@pytest.mark.parametrize("num_workers", [0, "auto"])
def test_unsigned_index_over_int64_range_is_named_not_wrapped(bad, num_workers):
    # 2**64 - 1 cast to int64 is -1: the last row, silently.
    from dataloader import DataLoader

    ds = ArrayDataset(np.arange(N * 2, dtype=np.float32).reshape(N, 2))
    with pytest.raises(IndexError, match=f"index {bad} is out of int64's range"):
        ds.__getitems__(np.array([0, bad], dtype=np.uint64))
    loader = DataLoader(ds, batch_sampler=[np.array([1, bad], dtype=np.uint64)], num_workers=num_workers)
    with pytest.raises(IndexError, match=f"index {bad} "):
        list(loader)
    assert ds.__getitems__(np.array([1, N - 1], dtype=np.uint64)).columns[0][:, 0].tolist() == [2.0, 2.0 * (N - 1)]


class _Doubled(np.ndarray):
    """A subclass whose rows are not its buffer's: indexing doubles them."""

    def __getitem__(self, key):
        return np.asarray(super().__getitem__(key)) * 2


@pytest.mark.parametrize("num_workers", [0, 2])
def test_ndarray_subclass_columns_keep_their_own_indexing(num_workers):
    from dataloader import DataLoader

    x = np.arange(N * 3, dtype=np.float64).reshape(N, 3).view(_Doubled)
    assert not can_take(x)  # only an ndarray or a numpy.memmap is gathered from its buffer
    idx = [4, 0, -1]
    _equal(ArrayDataset(x).__getitems__(idx).columns[0], x[idx])
    loader = DataLoader(ArrayDataset(x), batch_size=8, num_workers=num_workers)
    got = np.concatenate([np.asarray(b[0]) for b in loader])
    assert got.tobytes() == (np.asarray(x.view(np.ndarray)) * 2).tobytes()


@pytest.mark.parametrize(
    "source, named",
    [
        (np.array(3.0), r"ndarray of shape \(\), dtype=float64"),
        (np.zeros((4, 4))[:, ::2], r"shape \(4, 2\), dtype=float64, C-contiguous=False"),
        (np.ma.masked_array(np.zeros(4)), r"MaskedArray of shape \(4,\)"),
        (np.array([None] * 3), "dtype=object"),
    ],
    ids=["0-d", "strided", "subclass", "object"],
)
def test_take_rows_refusal_names_the_array(source, named):
    with pytest.raises(ValueError, match=named):
        take_rows(source, np.array([0]))
