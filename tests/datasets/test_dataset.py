"""Datasets: PyTorch's rules, BatchedItems, and batched __getitems__ forwarding."""

from __future__ import annotations

import collections.abc
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader.collate import default_collate
from dataloader.dataset import (
    ArrayDataset,
    BatchedItems,
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    random_split,
)

FAST = settings(max_examples=80, deadline=None)


class Squares(Dataset):
    """Map-style, no __getitems__."""

    def __init__(self, n, offset=0):
        self.n, self.offset = n, offset

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self.offset + i * i

    def __len__(self):
        return self.n


class ListBatched(Squares):
    """__getitems__ that wants lists (records what it received)."""

    def __init__(self, n, offset=0):
        super().__init__(n, offset)
        self.received = []

    def __getitems__(self, indices):
        self.received.append(indices)
        return [self[i] for i in indices]


class Stream(IterableDataset):
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def per_row(dataset, indices):
    return default_collate([dataset[i] for i in indices])


def assert_collated_equal(a, b):
    assert type(a) is type(b) and len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


# --- bases ---------------------------------------------------------------------------------


def test_dataset_base():
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    assert not hasattr(Dataset(), "__getitems__") and not hasattr(Dataset, "__len__")
    both = Squares(2) + Squares(3, offset=100)
    assert isinstance(both, ConcatDataset)
    assert [both[i] for i in range(5)] == [0, 1, 100, 101, 104]


class BuggyLookup(Squares):
    """A __getitem__ whose own bug raises IndexError for item 2 of 5."""

    def __getitem__(self, i):
        if i == 2:
            return [][0]  # the bug: an IndexError from inside __getitem__
        return super().__getitem__(i)


class NoLength(Dataset):
    def __getitem__(self, i):
        return i


def test_iterating_a_map_dataset_yields_every_index_of_its_length():
    assert list(Squares(4)) == [0, 1, 4, 9]
    assert list(Squares(0)) == []
    assert list(Squares(2) + Squares(1, offset=7)) == [0, 1, 7]
    assert [x for (x,) in ArrayDataset(np.arange(3.0))] == [0.0, 1.0, 2.0]


def test_iterating_a_map_dataset_propagates_an_index_error_from_getitem():
    ds = BuggyLookup(5)
    it = iter(ds)
    assert [next(it), next(it)] == [0, 1]
    with pytest.raises(IndexError, match="list index out of range"):
        next(it)
    with pytest.raises(IndexError):
        list(ds)  # never a silent [0, 1]


def test_iterating_a_map_dataset_without_len_is_type_error():
    with pytest.raises(TypeError, match="NoLength has no __len__, so it cannot be iterated"):
        iter(NoLength())
    assert NoLength()[5] == 5  # indexing still works


def test_iterable_dataset_and_chain():
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())
    chained = Stream([1, 2]) + Stream([3])
    assert isinstance(chained, ChainDataset)
    assert list(chained) == [1, 2, 3] and len(chained) == 3
    bad = ChainDataset([Stream([1]), Squares(2)])
    with pytest.raises(TypeError, match="ChainDataset only supports IterableDataset, got Squares"):
        list(bad)
    with pytest.raises(TypeError, match="got Squares"):
        len(bad)


# --- ArrayDataset --------------------------------------------------------------------------


def test_array_dataset_items():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([5, 6, 7, 8])
    ds = ArrayDataset(x, y)
    assert len(ds) == 4 and ds.accepts_index_arrays is True and ds.tensors is ds.arrays
    item = ds[2]
    assert isinstance(item, tuple) and len(item) == 2
    np.testing.assert_array_equal(item[0], x[2])
    assert item[1] == 7
    assert ds[-1][1] == 8
    with pytest.raises(IndexError):
        ds[4]


@pytest.mark.parametrize(
    "indices", [[3, 0, 0, 2], np.array([3, 0, 0, 2]), np.array([3, 0, 0, 2], np.int32)]
)
def test_array_dataset_getitems(indices):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([5, 6, 7, 8])
    out = ArrayDataset(x, y).__getitems__(indices)
    assert isinstance(out, BatchedItems) and len(out) == 4
    np.testing.assert_array_equal(out.columns[0], x[[3, 0, 0, 2]])
    assert out.columns[0].dtype == np.float32
    assert out[1][1] == 5


def test_array_dataset_getitems_errors():
    ds = ArrayDataset(np.zeros((3, 2)))
    with pytest.raises(IndexError):
        ds.__getitems__([0, 3])
    with pytest.raises(IndexError):
        ds.__getitems__(np.array([-4]))
    with pytest.raises(TypeError, match="ints"):
        ds.__getitems__([0.0, 1.0])
    with pytest.raises(TypeError, match="ints"):
        ds.__getitems__(np.array([True, False, True]))
    assert len(ds.__getitems__([])) == 0


def test_array_dataset_validation():
    with pytest.raises(ValueError, match=r"first dimensions are \[3, 2\]"):
        ArrayDataset(np.zeros((3, 1)), np.zeros(2))
    with pytest.raises(ValueError, match="at least one array"):
        ArrayDataset()
    with pytest.raises(ValueError, match="0-d"):
        ArrayDataset(np.float64(1.0))
    assert len(ArrayDataset([1, 2, 3])) == 3


def test_array_dataset_does_not_copy_memmap(tmp_path):
    m = np.memmap(tmp_path / "x.bin", dtype=np.float32, mode="w+", shape=(5, 2))
    m[:] = np.arange(10).reshape(5, 2)
    ds = ArrayDataset(m)
    assert ds.arrays[0] is m
    col = ds.__getitems__([4])[0][0]
    np.testing.assert_array_equal(col, [8, 9])


# --- BatchedItems --------------------------------------------------------------------------


def test_batched_items_is_a_sequence_of_rows():
    a = np.arange(6).reshape(3, 2)
    b = np.array([10, 11, 12])
    items = BatchedItems((a, b))
    assert isinstance(items, collections.abc.Sequence)
    assert len(items) == 3 and items.columns[0] is a
    rows = list(items)
    assert all(isinstance(r, tuple) for r in rows)
    for i in range(3):
        assert items[i][1] == b[i] and items[-3 + i][1] == b[i]
        np.testing.assert_array_equal(items[i][0], a[i])
    assert [r[1] for r in items] == [10, 11, 12]
    with pytest.raises(IndexError):
        items[3]
    with pytest.raises(IndexError):
        items[-4]
    sliced = items[1:]
    assert isinstance(sliced, BatchedItems) and [r[1] for r in sliced] == [11, 12]
    x, y = zip(*items, strict=True)  # what a custom collate_fn typically does
    assert list(y) == [10, 11, 12]
    assert "len=3" in repr(items)


def test_batched_items_validation():
    with pytest.raises(ValueError, match=r"lengths \[3, 2\]"):
        BatchedItems((np.zeros(3), np.zeros(2)))
    with pytest.raises(ValueError, match="at least one column"):
        BatchedItems(())
    with pytest.raises(ValueError, match="0-d"):
        BatchedItems((np.float64(1.0),))
    with pytest.raises(TypeError, match="tuple of arrays"):
        BatchedItems(np.zeros((3, 2)))


# --- Subset --------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [list, np.array, lambda v: range(v[0], v[-1] + 1, 2)])
def test_subset_getitems_forwards_batched(make):
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10) * 3
    base = ArrayDataset(x, y)
    sub = Subset(base, make([1, 3, 5, 7, 9]))
    assert len(sub) == 5 and sub.accepts_index_arrays
    for idx in ([4, 0, -1], np.array([2, 2, 1])):
        out = sub.__getitems__(idx)
        assert isinstance(out, BatchedItems)
        assert_collated_equal(default_collate(out), per_row(sub, list(idx)))
    with pytest.raises(IndexError):
        sub.__getitems__([5])
    with pytest.raises(IndexError):
        sub.__getitems__(np.array([-6]))


def test_subset_getitem_and_list_index():
    base = ArrayDataset(np.arange(10))
    sub = Subset(base, [9, 8, 7])
    assert sub[0][0] == 9 and sub[-1][0] == 7
    assert sub[[0, 2]][0].tolist() == [9, 7]


def test_subset_forwards_lists_to_list_datasets():
    inner = ListBatched(10)
    sub = Subset(inner, np.array([9, 4, 1]))
    assert sub.__getitems__(np.array([0, 2])) == [81, 1]
    assert inner.received == [[9, 1]] and all(type(i) is int for i in inner.received[0])
    assert Subset(Squares(5), [4, 2]).__getitems__([1, 0]) == [4, 16]


def test_subset_with_non_integer_keys():
    class ByName(Dataset):
        def __getitem__(self, key):
            return {"a": 1, "b": 2}[key]

        def __len__(self):
            return 2

    assert Subset(ByName(), ["b", "a"]).__getitems__([0, 1]) == [2, 1]


def test_subset_subclass_rule():
    class Bad(Subset):
        def __getitem__(self, idx):
            return 0

    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Bad(Squares(3), [0])

    class Good(Bad):
        def __getitems__(self, indices):
            return [0 for _ in indices]

    assert Good(Squares(3), [0]).__getitems__([0]) == [0]


# --- ConcatDataset -------------------------------------------------------------------------


def test_concat_indexing_rules():
    c = ConcatDataset([Squares(2), Squares(0), Squares(3, offset=100)])
    assert c.cumulative_sizes == [2, 2, 5] and len(c) == 5
    assert [c[i] for i in range(5)] == [0, 1, 100, 101, 104]
    assert c[-1] == 104 and c[-5] == 0
    with pytest.raises(
        ValueError, match="absolute value of index should not exceed dataset length"
    ):
        c[-6]
    with pytest.raises(IndexError):
        c[5]
    with pytest.raises(ValueError, match="absolute value"):
        c.__getitems__([0, -6])
    with pytest.raises(IndexError):
        c.__getitems__([5])
    assert c.__getitems__([4, -5, 2]) == [104, 0, 100]
    assert c.__getitems__([]) == []


def test_concat_validation():
    with pytest.raises(ValueError, match="should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(TypeError, match=r"datasets\[1\] is Stream"):
        ConcatDataset([Squares(1), Stream([1])])


def test_concat_single_group_passes_inner_result_through():
    a = ArrayDataset(np.arange(4))
    c = ConcatDataset([a, ArrayDataset(np.arange(3))])
    out = c.__getitems__([3, 1])
    assert isinstance(out, BatchedItems) and out.columns[0].tolist() == [3, 1]


def test_concat_mixed_members_give_rows_in_order():
    lists = ListBatched(3)
    c = ConcatDataset([ArrayDataset(np.arange(3) * 10), lists, Squares(2, offset=50)])
    out = c.__getitems__([6, 0, 4, 7, 1])
    assert isinstance(out, list)
    assert [o if isinstance(o, int) else int(o[0]) for o in out] == [50, 0, 1, 51, 10]
    assert lists.received == [[1]]


@FAST
@given(
    sizes=st.lists(st.integers(0, 6), min_size=1, max_size=4),
    picks=st.lists(st.integers(0, 10_000), min_size=1, max_size=25),
    negative=st.booleans(),
)
def test_concat_batched_reassembly_equals_per_row_collation(sizes, picks, negative):
    if sum(sizes) == 0:
        return
    dtypes = [np.float32, np.float64, np.int64, np.float32]
    members = [
        ArrayDataset(
            (np.arange(n * 2).reshape(n, 2) + 100 * k).astype(dtypes[k]),
            np.arange(n) + 1000 * k,
        )
        for k, n in enumerate(sizes)
    ]
    c = ConcatDataset(members)
    n = len(c)
    idx = [p % n - (n if negative and p % 2 else 0) for p in picks]
    out = c.__getitems__(np.array(idx))
    assert isinstance(out, BatchedItems) and len(out) == len(idx)
    assert_collated_equal(default_collate(out), per_row(c, idx))
    assert_collated_equal(default_collate(list(out)), per_row(c, idx))


def test_concat_of_subsets_and_nested_concat():
    x = np.arange(30, dtype=np.float32).reshape(15, 2)
    base = ArrayDataset(x, np.arange(15))
    c = ConcatDataset(
        [Subset(base, [14, 13]), ConcatDataset([base, Subset(base, range(0, 15, 3))])]
    )
    idx = [0, 17, 1, 2, 21, 16]
    out = c.__getitems__(idx)
    assert isinstance(out, BatchedItems)
    assert_collated_equal(default_collate(out), per_row(c, idx))


def test_concat_shape_mismatch_falls_back_to_rows():
    c = ConcatDataset([ArrayDataset(np.zeros((2, 3))), ArrayDataset(np.zeros((2, 4)))])
    out = c.__getitems__([0, 2])
    assert isinstance(out, list) and len(out) == 2
    with pytest.raises(RuntimeError, match="stack expects each array to be equal size"):
        default_collate(out)


# --- random_split --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, fractions, expected",
    [
        (10, [0.3, 0.3, 0.4], [3, 3, 4]),
        (11, [0.5, 0.5], [6, 5]),
        (30, [0.3, 0.3, 0.4], [9, 9, 12]),
        (7, [0.2, 0.2, 0.2, 0.2, 0.2], [2, 2, 1, 1, 1]),
    ],
)
def test_random_split_fractions_use_torchs_remainder_rule(n, fractions, expected):
    parts = random_split(range(n), fractions, generator=0)
    assert [len(p) for p in parts] == expected


def test_random_split_zero_length_split_warns():
    with pytest.warns(UserWarning, match="Length of split at index 2 is 0"):
        parts = random_split(range(2), [0.5, 0.5, 0.0], generator=0)
    assert [len(p) for p in parts] == [1, 1, 0]


@FAST
@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=5), seed=st.integers(0, 2**32))
def test_random_split_partitions(lengths, seed):
    n = sum(lengths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # [1] or [1, 0] read as fractions
        parts = random_split(range(n), lengths, generator=seed)
        again = random_split(range(n), lengths, generator=seed)
    assert [len(p) for p in parts] == lengths
    flat = [p[i] for p in parts for i in range(len(p))]
    assert sorted(flat) == list(range(n))
    assert [list(p.indices) for p in parts] == [list(p.indices) for p in again]


def test_random_split_generators():
    a = random_split(range(100), [50, 50], generator=np.random.default_rng(1))
    b = random_split(range(100), [50, 50], generator=np.random.default_rng(1))
    assert a[0].indices.tolist() == b[0].indices.tolist()
    assert a[0].indices.dtype == np.int64
    c = random_split(range(100), [50, 50])
    d = random_split(range(100), [50, 50])
    assert c[0].indices.tolist() != d[0].indices.tolist()
    with pytest.raises(TypeError, match="generator must be None, an int seed"):
        random_split(range(3), [1, 2], generator="seed")


@pytest.mark.parametrize(
    "lengths, err, text",
    [
        (
            [3, 3],
            ValueError,
            r"Sum of input lengths does not equal the length of the input dataset! \(6 != 5\)",
        ),
        ([6, -1], ValueError, r"lengths\[1\]=-1 must be >= 0"),
        ([1.5, -0.5], ValueError, "Fraction at index 0 is not between 0 and 1"),
        ([2.5, 2.5], TypeError, r"lengths\[0\]=2.5 must be an int"),
    ],
)
def test_random_split_validation(lengths, err, text):
    with pytest.raises(err, match=text):
        random_split(range(5), lengths, generator=0)


def test_random_split_subsets_feed_batched_path():
    base = ArrayDataset(np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10))
    train, _ = random_split(base, [0.8, 0.2], generator=3)
    out = train.__getitems__(np.array([0, 7, 3]))
    assert isinstance(out, BatchedItems)
    assert_collated_equal(default_collate(out), per_row(train, [0, 7, 3]))


def test_concat_unpromotable_columns_fall_back_to_rows():
    c = ConcatDataset([ArrayDataset(np.array(["a", "b"])), ArrayDataset(np.array([1, 2]))])
    out = c.__getitems__([0, 2, 1])
    assert isinstance(out, list) and [r[0] for r in out] == ["a", 1, "b"]


def test_public_classes_pickle_under_their_public_module():
    import pickle

    assert BatchedItems.__module__ == ConcatDataset.__module__ == "dataloader.dataset"
    c = ConcatDataset([ArrayDataset(np.arange(3)), ArrayDataset(np.arange(2))])
    twin = pickle.loads(pickle.dumps(c))
    assert twin.cumulative_sizes == [3, 5] and twin[4][0] == 1
    items = pickle.loads(pickle.dumps(BatchedItems((np.arange(2),))))
    assert items[1][0] == 1
