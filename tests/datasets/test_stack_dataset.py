"""``StackDataset``: PyTorch's ``TestStackDataset`` scenarios on NumPy datasets, and its batched path."""

from __future__ import annotations

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, Dataset, StackDataset, random_split


def rows(n, width=3, seed=0):
    return ArrayDataset(np.random.default_rng(seed).normal(size=(n, width)))


def test_needs_at_least_one_dataset():
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()


def test_positional_and_keyword_datasets_do_not_mix():
    with pytest.raises(ValueError, match="Supported either"):
        StackDataset(rows(15), a=rows(15))


def test_lengths_must_match_and_are_named():
    with pytest.raises(ValueError, match=r"Size mismatch between datasets: args\[0\] has 15, args\[1\] has 10"):
        StackDataset(rows(15), rows(10))
    with pytest.raises(ValueError, match="Size mismatch between datasets: a has 15, b has 10"):
        StackDataset(a=rows(15), b=rows(10))


@pytest.mark.parametrize("kwargs", [False, True])
@pytest.mark.parametrize("count", [1, 2])
def test_len(count, kwargs):
    members = [rows(15), ArrayDataset(np.arange(15))][:count]
    ds = StackDataset(**{f"m{i}": m for i, m in enumerate(members)}) if kwargs else StackDataset(*members)
    assert len(ds) == 15


def test_items_are_tuples_or_dicts_of_member_items():
    t, labels = [float(i) / 3 for i in range(15)], [f"label{i}" for i in range(15)]
    ds = StackDataset(t, labels)
    for i in range(15):
        assert ds[i][0] == t[i] and ds[i][1] == labels[i]
    named = StackDataset(a=t, b=labels)
    for i in range(15):
        assert named[i]["a"] == t[i] and named[i]["b"] == labels[i]
    single = StackDataset(a=t)
    assert single[3] == {"a": t[3]}


class GetItems(Dataset):
    """A member with a batched ``__getitems__`` (optionally answering one item short)."""

    def __init__(self, short=False):
        self.data = np.arange(4.0)
        self.short = short
        self.calls = []

    def __getitem__(self, i):
        return self.data[i]

    def __getitems__(self, indices):
        self.calls.append(list(indices))
        out = list(self.data[list(indices)])
        return out[:-1] if self.short else out

    def __len__(self):
        return 4


def test_getitems_uses_each_members_batched_path():
    t, labels = GetItems(), [1, 2, 3, 4]
    batch = StackDataset(t, labels).__getitems__([0, 1, 2, 3])
    assert batch == [(0.0, 1), (1.0, 2), (2.0, 3), (3.0, 4)] and t.calls == [[0, 1, 2, 3]]
    named = StackDataset(t=t, l=labels).__getitems__(np.array([3, 0]))
    assert named == [{"t": 3.0, "l": 4}, {"t": 0.0, "l": 1}]


def test_getitems_out_of_range_raises_index_error():
    with pytest.raises(IndexError):
        StackDataset(GetItems(), [1, 2, 3, 4]).__getitems__([0, 4])


def test_getitems_of_the_wrong_size_raises_value_error():
    with pytest.raises(ValueError, match="Nested dataset's output size mismatch. Expected 4, got 3"):
        StackDataset(GetItems(short=True), [1, 2, 3, 4]).__getitems__([0, 1, 2, 3])


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_batches_through_the_loader(num_workers):
    x = np.arange(20.0).reshape(10, 2)
    ds = StackDataset(x=ArrayDataset(x), y=list(range(10)))
    with DataLoader(ds, batch_size=4, num_workers=num_workers) as loader:
        batches = list(loader)
    assert [b["y"].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    np.testing.assert_array_equal(np.concatenate([b["x"][0] for b in batches]), x)


@pytest.mark.parametrize("lengths", [[0.1], [1.1], [0.5, 0.6], [0.3, 0.3]])
def test_random_split_fractions_not_summing_to_one_raise_value_error(lengths):
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset"):
        random_split([1, 2, 3, 4], lengths, generator=0)
