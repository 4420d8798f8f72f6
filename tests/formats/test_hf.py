"""A Hugging Face ``datasets.Dataset`` as a dataset as is: one Arrow take per batch, its format
and indices mapping respected, and ``dataloader.torch`` equal to torch's DataLoader over it.

Needs ``datasets`` (the 'clients' extra, 3.11): it does not install on 3.13t (PyYAML has no
cp313t wheel), where these tests skip.  Datasets are built here from dicts, never downloaded.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests._support import run_python

from dataloader import DataLoader, default_collate
from dataloader.formats.hf import HFDataset, from_hf, is_hf_object

datasets = pytest.importorskip("datasets", reason="datasets does not install here (3.13t: no PyYAML cp313t wheel)")

N = 50


def _dataset():
    rng = np.random.default_rng(0)
    return datasets.Dataset.from_dict({
        "id": np.arange(N),
        "x": rng.random(N).astype(np.float32),
        "y": rng.random(N),
        "ok": np.arange(N) % 3 == 0,
        "text": [f"row {i}" for i in range(N)],
        "pair": [[i, -i] for i in range(N)],
    })


def _assert_same(a, b) -> None:
    """Equal collated batches: same structure, equal arrays of the same dtype."""
    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys()
        for k in b:
            _assert_same(a[k], b[k])
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    elif isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif type(b).__name__ == "Tensor":
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        assert (a == b).all()
    else:
        assert a == b


def _assert_batches_of(loader, ds, order) -> None:
    """``loader``'s batches equal ``default_collate`` of HF's own rows ``ds[i]``, in ``order``."""
    size = loader.batch_size
    batches = list(loader)
    assert len(batches) == -(-len(order) // size)
    for k, batch in enumerate(batches):
        _assert_same(batch, default_collate([ds[int(i)] for i in order[k * size:(k + 1) * size]]))


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") else value


def _hf_rows(ds, indices) -> list[dict]:
    return [{k: _plain(v) for k, v in ds[int(i)].items()} for i in indices]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_no_format_batches_are_a_dict_of_columns_read_without_per_row_getitem(monkeypatch, num_workers):
    ds = _dataset()
    calls = []
    original = datasets.Dataset.__getitem__
    monkeypatch.setattr(datasets.Dataset, "__getitem__", lambda self, key: calls.append(key) or original(self, key))
    with DataLoader(ds, batch_size=8, num_workers=num_workers) as loader:
        assert loader.dataset is ds
        batch = next(iter(loader))
        batches = list(loader)
    assert len(batches) == 7  # one Arrow take per batch, not 8 Python __getitem__ calls
    assert batch["id"].dtype == np.int64 and batch["x"].dtype == np.float64 and batch["ok"].dtype == np.bool_
    assert batch["text"] == [f"row {i}" for i in range(8)]
    monkeypatch.undo()
    with DataLoader(ds, batch_size=8, num_workers=num_workers) as loader:
        _assert_batches_of(loader, ds, range(N))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make", ["shuffle", "select", "split"])
def test_the_indices_mapping_of_select_shuffle_and_split_is_respected(make):
    ds = _dataset()
    view = {
        "shuffle": lambda: ds.shuffle(seed=3),
        "select": lambda: ds.select([7, 3, 3, 40, 0, 12]),
        "split": lambda: ds.train_test_split(test_size=0.3, seed=1)["test"],
    }[make]()
    with DataLoader(view, batch_size=4, num_workers=2) as loader:
        _assert_batches_of(loader, view, range(len(view)))
    with DataLoader(view, batch_size=4, shuffle=True, num_workers=2, seed=9) as loader:
        order = [i for b in loader.batch_sampler for i in b]
        _assert_batches_of(loader, view, order)


@pytest.mark.parametrize("fmt", ["numpy", "arrow", "torch"])
def test_formatted_batches_hold_the_rows_of_that_format(fmt):
    if fmt == "torch":
        pytest.importorskip("torch", reason="torch is not installed (3.13t)")
    ds = _dataset().with_format(fmt)
    batch = HFDataset(ds).__getitems__([5, 1, 5, -1])
    assert batch.names == tuple(ds.column_names)
    if fmt == "numpy":  # HF's own dtypes (its NumPy formatter makes floats float32); str: objects
        for name, column in zip(batch.names, batch.columns, strict=True):
            want = ds[[5, 1, 5, N - 1]][name].dtype
            assert column.dtype == (object if want.kind == "U" else want), name
    if fmt == "arrow":  # the formats rule: Arrow's own dtypes
        assert batch.columns[1].dtype == np.float32 and batch.columns[2].dtype == np.float64
    # HF's own __getitems__ rows (batch formatting: not always ds[i]'s dtypes); arrow: Python values.
    order = [5, 1, 5, N - 1]
    reference = _dataset()[order] if fmt == "arrow" else ds.__getitems__(order)
    for k, (row, i) in enumerate(zip(batch, order, strict=True)):
        want = {c: v[k] for c, v in reference.items()} if fmt == "arrow" else reference[k]
        assert {c: _plain(v) for c, v in row.items()} == {c: _plain(v) for c, v in want.items()}, i


def test_columns_and_a_custom_transform_follow_the_format():
    ds = _dataset()
    only = HFDataset(ds.with_format("numpy", columns=["y", "id"]))
    assert only.columns == ("id", "y")  # the table's order, as HF gives them
    custom = HFDataset(ds.with_transform(lambda b: {"double": [2 * v for v in b["id"]]}))
    assert [r["double"] for r in custom.__getitems__([3, 4])] == [6, 8]


def test_nested_values_and_nulls_are_hf_python_values():
    ds = datasets.Dataset.from_dict({
        "id": [0, 1, 2], "maybe": [1, None, 3], "meta": [{"a": 1}, {"a": 2}, {"a": 3}],
    })
    rows = list(HFDataset(ds).__getitems__([2, 1, 0]))
    assert rows == [ds[2], ds[1], ds[0]]
    assert rows[1]["maybe"] is None


def test_bad_input_is_a_clear_error():
    with pytest.raises(TypeError, match="datasets.Dataset, got list"):
        HFDataset([1, 2])
    ds = HFDataset(_dataset())
    with pytest.raises(IndexError, match=f"index {N} out of range for length {N}"):
        ds.__getitems__([0, N])
    with pytest.raises(ValueError, match="nulls must be one of"):
        HFDataset(_dataset(), nulls="zero")


def test_other_objects_pass_through_and_detection_never_imports_datasets():
    assert from_hf([1, 2, 3]) == [1, 2, 3] and not is_hf_object(np.arange(3))
    assert isinstance(from_hf(_dataset()), HFDataset)
    code = (
        "import sys, dataloader\n"
        "from dataloader.formats.hf import from_hf\n"
        "for b in dataloader.DataLoader(list(range(10)), batch_size=4, num_workers=2): pass\n"
        "from_hf(object())\n"
        "print('datasets' in sys.modules)\n"
    )
    done = run_python("-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("fmt", [None, "numpy", "torch"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_torch_gives_what_torchs_dataloader_gives(fmt, num_workers):
    torch = pytest.importorskip("torch", reason="torch is not installed (3.13t)")
    import dataloader.torch as dt

    ds = _dataset().with_format(fmt)
    ours = dt.DataLoader(ds, batch_size=8, shuffle=True, num_workers=num_workers,
                         generator=torch.Generator().manual_seed(4))
    theirs = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(4))
    pairs = list(zip(ours, theirs, strict=True))
    assert len(pairs) == len(theirs)
    for a, b in pairs:
        _assert_same(a, b)

