"""BatchedItems with names: rows are dicts, and both collates give what collating those dict
rows gives (a dict of stacked columns), without building the rows."""

from __future__ import annotations

import numpy as np
import pytest

from dataloader.collate import collate, default_collate, default_collate_fn_map
from dataloader.dataset import BatchedItems, ConcatDataset, Dataset


def _batch() -> BatchedItems:
    return BatchedItems(
        (np.arange(3, dtype=np.int32), np.arange(6.0).reshape(3, 2), np.array(["a", "bb", "c"], dtype=object),
         np.array([b"x", b"", b"z"], dtype=object)),
        names=["i", "v", "s", "b"],
    )


def test_rows_are_dicts_in_column_order_and_slices_keep_names():
    items = _batch()
    assert items.names == ("i", "v", "s", "b")
    row = items[1]
    assert list(row) == ["i", "v", "s", "b"] and row["i"] == 1 and row["s"] == "bb"
    np.testing.assert_array_equal(row["v"], [2.0, 3.0])
    assert [r["b"] for r in items] == [b"x", b"", b"z"] and items[-1]["i"] == 2
    assert items[1:].names == items.names and [r["s"] for r in items[1:]] == ["bb", "c"]
    assert "names=['i', 'v', 's', 'b']" in repr(items)
    assert BatchedItems((np.zeros(2),)).names is None


@pytest.mark.parametrize("names", [["a"], ["a", "a"], ["a", 1]])
def test_names_must_be_one_distinct_string_per_column(names):
    with pytest.raises(ValueError, match="distinct strings"):
        BatchedItems((np.zeros(2), np.zeros(2)), names=names)


def _same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("s", [["a", "bb", "c"], ["a", None, "c"], [1, "x", b"y"]])
def test_default_collate_equals_collating_the_dict_rows(s):
    items = _batch()
    cols = list(items.columns)
    cols[2] = np.array(s, dtype=object)
    named = BatchedItems(tuple(cols), names=items.names)
    try:
        rows = collate(list(named), collate_fn_map=default_collate_fn_map)
    except TypeError:  # mixed objects do not collate: nor does the named batch
        with pytest.raises(TypeError):
            default_collate(named)
        return
    _same(default_collate(named), rows)


def test_the_fast_path_returns_the_columns_without_rows():
    out = default_collate(_batch())
    assert list(out) == ["i", "v", "s", "b"] and out["s"] == ["a", "bb", "c"]
    assert out["i"].dtype == np.int32 and out["v"].shape == (3, 2)


class _Named(Dataset):
    def __init__(self, start: int, n: int):
        self.ids = np.arange(start, start + n)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return self.__getitems__([i])[0]

    def __getitems__(self, idx):
        ids = self.ids[np.asarray(idx)]
        return BatchedItems((ids, ids.astype(str).astype(object)), names=["id", "s"])


def test_concat_dataset_keeps_the_names():
    cat = ConcatDataset([_Named(0, 4), _Named(4, 3)])
    items = cat.__getitems__([6, 0, 3, 4])
    assert isinstance(items, BatchedItems) and items.names == ("id", "s")
    out = default_collate(items)
    assert out["id"].tolist() == [6, 0, 3, 4] and out["s"] == ["6", "0", "3", "4"]


def test_torch_collate_equals_torch_collating_the_dict_rows():
    torch = pytest.importorskip("torch", reason="dataloader.torch needs torch (absent on 3.13t)")
    from dataloader.torch.collate import default_collate as torch_collate

    items = _batch()
    fast, rows = torch_collate(items), torch_collate(list(items))
    assert list(fast) == list(rows) and fast["s"] == rows["s"] and fast["b"] == rows["b"]
    for k in ("i", "v"):
        assert isinstance(fast[k], torch.Tensor) and fast[k].dtype == rows[k].dtype
        assert torch.equal(fast[k], rows[k])
