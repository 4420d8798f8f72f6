"""dataloader.torch's default_collate of a named BatchedItems whose columns are tensors or lists
of str (what a Hugging Face dataset formatted "torch" gives): column-wise, equal to torch's
collation of the rows."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (3.13t)")

from torch.utils.data import default_collate as torch_collate  # noqa: E402 - after the skip

from dataloader import BatchedItems  # noqa: E402
from dataloader.torch import default_collate  # noqa: E402


def test_tensor_and_text_columns_collate_as_torch_collates_the_rows():
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3).t().contiguous().t()  # not contiguous
    batch = BatchedItems((torch.tensor([1, 2, 3, 4]), x, ["a", "b", "c", "d"]), ("id", "x", "text"))
    got = default_collate(batch)
    want = torch_collate(list(batch))
    assert got.keys() == want.keys() and got["text"] == want["text"] == ["a", "b", "c", "d"]
    for k in ("id", "x"):
        assert got[k].dtype == want[k].dtype and torch.equal(got[k], want[k]) and got[k].is_contiguous()


def test_a_list_column_of_mixed_values_collates_by_rows_as_torch_does():
    batch = BatchedItems((torch.tensor([1, 2]), ["a", 3]), ("id", "v"))
    got, want = default_collate(batch), torch_collate(list(batch))
    assert got["v"] == want["v"] == ["a", 3]  # torch keeps a batch whose first item is a str
    assert torch.equal(got["id"], want["id"])
