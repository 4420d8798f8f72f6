"""default_collate / default_convert: PyTorch's rules with NumPy arrays out."""

from __future__ import annotations

import collections
import collections.abc
import re
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dataloader.collate import collate, default_collate, default_collate_fn_map, default_convert
from dataloader.dataset import BatchedItems

Point = collections.namedtuple("Point", ["x", "y"])


def check(a, dtype, shape, values=None):
    assert type(a) is np.ndarray, type(a)
    assert a.dtype == dtype and a.shape == shape and a.flags.c_contiguous
    if values is not None:
        np.testing.assert_array_equal(a, values)


# --- leaves --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float64, np.uint8, np.int16, np.bool_, np.complex64]
)
def test_arrays_are_stacked_keeping_dtype(dtype):
    batch = [np.ones((2, 3), dtype=dtype), np.zeros((2, 3), dtype=dtype)]
    check(default_collate(batch), dtype, (2, 2, 3))


def test_zero_d_arrays_and_views():
    check(default_collate([np.array(1.5, np.float32)] * 3), np.float32, (3,), [1.5] * 3)
    base = np.arange(12).reshape(3, 4)
    check(default_collate([base[:, 0], base[:, 1]]), np.int64, (2, 3), [[0, 4, 8], [1, 5, 9]])


def test_memmap_rows_become_plain_arrays(tmp_path):
    m = np.memmap(tmp_path / "m.bin", dtype=np.float32, mode="w+", shape=(3, 2))
    check(default_collate([m[0], m[2]]), np.float32, (2, 2))


@pytest.mark.parametrize(
    "batch, dtype, values",
    [
        ([np.float32(1), np.float32(2)], np.float32, [1, 2]),
        ([np.int8(1), np.int8(-2)], np.int8, [1, -2]),
        ([np.bool_(True), np.bool_(False)], np.bool_, [True, False]),
        ([np.float32(1), np.float64(2)], np.float64, [1, 2]),
        ([1.5, 2.0], np.float64, [1.5, 2.0]),
        ([1.5, 2], np.float64, [1.5, 2.0]),
        ([1, 2, 3], np.int64, [1, 2, 3]),
        ([True, False], np.bool_, [True, False]),
        ([1, True], np.int64, [1, 1]),
        ([1, 2.5], np.float32, [1, 2.5]),  # torch.tensor infers its default dtype
        ([-(2**63), 2**63 - 1], np.int64, [-(2**63), 2**63 - 1]),
    ],
)
def test_scalars(batch, dtype, values):
    check(default_collate(batch), dtype, (len(batch),), values)


@pytest.mark.parametrize("batch", [[2**63, 1], [1, 2**70], [-(2**63) - 1, 0]])
def test_int_overflow_is_value_error(batch):
    with pytest.raises(ValueError, match="does not fit in int64"):
        default_collate(batch)


def test_strings_are_left_alone():
    batch = ["a", "b"]
    assert default_collate(batch) is batch
    assert default_collate([b"x", b"y"]) == [b"x", b"y"]
    out = default_collate([np.str_("a"), np.str_("b")])
    assert out == ["a", "b"]
    assert default_collate([("a", 1), ("b", 2)])[0] == ("a", "b")  # torch: a tuple field


# --- containers ----------------------------------------------------------------------------


def test_tuple_becomes_list_of_fields():
    out = default_collate([(np.zeros(2, np.float32), 1), (np.ones(2, np.float32), 2)])
    assert type(out) is list and len(out) == 2
    check(out[0], np.float32, (2, 2), [[0, 0], [1, 1]])
    check(out[1], np.int64, (2,), [1, 2])


def test_list_of_lists_is_transposed():
    out = default_collate([[0, 1], [2, 3]])
    assert type(out) is list
    check(out[0], np.int64, (2,), [0, 2])
    check(out[1], np.int64, (2,), [1, 3])


def test_namedtuple_keeps_type():
    out = default_collate([Point(1, np.zeros(2)), Point(2, np.ones(2))])
    assert type(out) is Point
    check(out.x, np.int64, (2,), [1, 2])
    check(out.y, np.float64, (2, 2))


def test_mappings():
    out = default_collate([{"a": 0, "b": 1.0}, {"a": 100, "b": 2.0}])
    assert type(out) is dict and list(out) == ["a", "b"]
    check(out["a"], np.int64, (2,), [0, 100])
    check(out["b"], np.float64, (2,), [1.0, 2.0])
    od = default_collate([collections.OrderedDict(z=1, a=2)] * 2)
    assert type(od) is collections.OrderedDict and list(od) == ["z", "a"]
    dd = collections.defaultdict(list, a=1)
    out = default_collate([dd, dd])
    assert type(out) is collections.defaultdict and out.default_factory is list
    proxy = default_collate([MappingProxyType({"k": 1})] * 2)
    assert type(proxy) is MappingProxyType and proxy["k"].tolist() == [1, 1]

    class Frozen(collections.abc.Mapping):  # not constructible from a dict -> dict
        def __init__(self, data, tag):
            self._d, self.tag = data, tag

        def __getitem__(self, k):
            return self._d[k]

        def __iter__(self):
            return iter(self._d)

        def __len__(self):
            return len(self._d)

    out = default_collate([Frozen({"k": 1}, "t"), Frozen({"k": 2}, "t")])
    assert type(out) is dict and out["k"].tolist() == [1, 2]
    nested = default_collate([{"img": {"px": np.zeros((2, 2))}, "s": "a"}] * 3)
    check(nested["img"]["px"], np.float64, (3, 2, 2))
    assert nested["s"] == ["a", "a", "a"]


def test_sequence_types():
    out = default_collate([range(2), range(2)])
    assert type(out) is list and [o.tolist() for o in out] == [[0, 0], [1, 1]]

    class MyList(list):
        pass

    out = default_collate([MyList([1, 2]), MyList([3, 4])])
    assert type(out) is MyList and out[1].tolist() == [2, 4]


# --- errors --------------------------------------------------------------------------------


def test_none_is_type_error_naming_nonetype():
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        default_collate([None, None])
    with pytest.raises(
        TypeError, match=r"found <class 'NoneType'> \[in field sample\['x'\]\[1\]\]"
    ):
        default_collate([{"x": (1, None)}, {"x": (2, None)}])


_Point = collections.namedtuple("_Point", "x y")
_FIELD_SAMPLES = {  # one sample per container kind, its field path, and how to put None in it
    "tuple": ((1.5, 2), "[0]", lambda v: (v, 2)),
    "list": ([1.5, 2], "[0]", lambda v: [v, 2]),
    "dict": ({"x": 1.5, "y": 2}, "['x']", lambda v: {"x": v, "y": 2}),
    "namedtuple": (_Point(1.5, 2), ".x", lambda v: _Point(v, 2)),
}
_NONE_MESSAGE = r"found <class 'NoneType'>"


@pytest.mark.parametrize("value", [1.5, 1, True, np.float32(1.5), np.int16(1), np.zeros(3)])
@pytest.mark.parametrize("size", [2, 5])
def test_none_at_any_position_of_a_batch_of_numbers_is_type_error(value, size):
    for j in range(size):
        batch = [value] * size
        batch[j] = None
        where = "" if j == 0 else f" at element {j} of the batch"
        with pytest.raises(TypeError, match=_NONE_MESSAGE + where):
            default_collate(batch)


@pytest.mark.parametrize("kind", sorted(_FIELD_SAMPLES))
@pytest.mark.parametrize("j", [0, 1, 3])
def test_none_inside_a_sample_is_type_error_naming_the_field(kind, j):
    _, field, make = _FIELD_SAMPLES[kind]
    batch = [make(1.5) for _ in range(4)]
    batch[j] = make(None)
    with pytest.raises(TypeError, match=_NONE_MESSAGE + ".*" + re.escape(f"[in field sample{field}]")):
        default_collate(batch)
    nested = [{"outer": sample} for sample in batch]
    with pytest.raises(TypeError, match=re.escape(f"[in field sample['outer']{field}]")):
        default_collate(nested)


@pytest.mark.parametrize("kind", sorted(_FIELD_SAMPLES))
def test_none_in_place_of_a_whole_sample_is_type_error(kind):
    sample = _FIELD_SAMPLES[kind][0]
    with pytest.raises(TypeError, match=_NONE_MESSAGE + " at element 2 of the batch"):
        default_collate([sample, sample, None])


def test_none_never_becomes_nan():
    for batch in ([1.5, None], [0.0, None, 2.0], [(1.0, 2), (None, 3)], [{"a": 1.0}, {"a": None}]):
        with pytest.raises(TypeError, match=_NONE_MESSAGE):
            default_collate(batch)


def test_none_in_a_batch_of_strings_is_kept_as_in_pytorch():
    assert default_collate(["a", None]) == ["a", None]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_batch_with_none_raises_type_error_and_the_next_batch_follows(num_workers):
    from dataloader import DataLoader

    it = iter(DataLoader([0.0, None, 2.0, 3.0], batch_size=2, num_workers=num_workers))
    with pytest.raises(TypeError, match=_NONE_MESSAGE + " at element 1 of the batch"):
        next(it)
    np.testing.assert_array_equal(next(it), [2.0, 3.0])
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.parametrize(
    "arr",
    [np.array(["a", "b"]), np.array([b"a"]), np.array([object(), None], dtype=object)],
)
def test_object_and_string_arrays_are_type_errors(arr):
    msg = (
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found"
    )
    with pytest.raises(TypeError, match=msg):
        default_collate([arr, arr])


def test_unsupported_types():
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <class 'str'>"):
        default_collate([1, "a"])
    with pytest.raises(TypeError, match="found <class 'complex'>"):
        default_collate([1j, 2j])


def test_ragged_sequences_name_the_field():
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [1]])
    with pytest.raises(RuntimeError, match=r"element 2 has length 1\) \[in field sample\['x'\]\]"):
        default_collate([{"x": [1, 2]}, {"x": [3, 4]}, {"x": [5]}])


def test_shape_mismatch_names_shapes_and_field():
    with pytest.raises(
        RuntimeError,
        match=r"stack expects each array to be equal size, but got \(2,\) at entry 0 and "
        r"\(3,\) at entry 1 "
        r"\[in field sample\[0\]\]",
    ):
        default_collate([(np.zeros(2), 1), (np.zeros(3), 2)])


def test_missing_key_is_key_error_naming_the_key():
    with pytest.raises(KeyError, match="key 'b' is missing from element 1"):
        default_collate([{"a": 1, "b": 2}, {"a": 1}])


def test_empty_batch_is_index_error():
    with pytest.raises(IndexError):
        default_collate([])


def test_custom_fn_map_errors_get_a_note():
    class Boom(Exception):
        pass

    def boom(batch, *, collate_fn_map):
        raise Boom("custom")

    fmap = {**default_collate_fn_map, complex: boom}
    with pytest.raises(Boom) as info:
        collate([{"z": [1j]}, {"z": [2j]}], collate_fn_map=fmap)
    assert info.value.args == ("custom",)
    assert info.value.__notes__ == ["while collating field sample['z'][0]"]


def test_collate_fn_map_extension_point():
    class Meters(float):
        pass

    def as_list(batch, *, collate_fn_map):
        return list(batch)

    fmap = {Meters: as_list, **default_collate_fn_map}
    assert collate([(Meters(1.0),), (Meters(2.0),)], collate_fn_map=fmap) == [[1.0, 2.0]]


# --- BatchedItems fast path ----------------------------------------------------------------


def test_batched_items_fast_path_returns_columns():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y = np.array([1, 2, 3])
    out = default_collate(BatchedItems((x, y)))
    assert type(out) is list and out[0] is x and out[1] is y
    rows = default_collate(list(BatchedItems((x, y))))
    for a, b in zip(out, rows, strict=True):
        check(b, a.dtype, a.shape, a)


def test_batched_items_non_numeric_columns_take_the_row_path():
    names = np.array(["a", "b"])
    out = default_collate(BatchedItems((np.zeros((2, 1)), names)))
    assert out[1] == (np.str_("a"), np.str_("b"))
    with pytest.raises(TypeError, match="found object"):
        default_collate(BatchedItems((np.array([[None], [None]], dtype=object),)))


def test_batched_items_fast_path_respects_modified_fn_map(monkeypatch):
    monkeypatch.setitem(
        default_collate_fn_map, np.ndarray, lambda batch, *, collate_fn_map: "custom"
    )
    out = default_collate(BatchedItems((np.zeros((2, 3)),)))
    assert out == ["custom"]


dtypes = st.sampled_from(
    [np.float32, np.float64, np.int64, np.uint8, np.bool_, np.int32, np.float16]
)
tails = st.lists(st.integers(1, 3), max_size=2).map(tuple)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n_cols=st.integers(1, 3), batch=st.integers(1, 5))
def test_batched_items_fast_path_equals_row_path(data, n_cols, batch):
    cols = [
        data.draw(hnp.arrays(dtype=data.draw(dtypes), shape=(batch, *data.draw(tails))))
        for _ in range(n_cols)
    ]
    items = BatchedItems(tuple(cols))
    fast = default_collate(items)
    slow = default_collate([tuple(c[i] for c in cols) for i in range(batch)])
    assert type(fast) is type(slow) is list and len(fast) == len(slow)
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# --- default_convert -----------------------------------------------------------------------


def test_default_convert():
    a = np.zeros(3, np.float32)
    assert default_convert(a) is a
    assert default_convert(1) == 1 and type(default_convert(1.5)) is float
    assert default_convert("ab") == "ab" and default_convert(b"x") == b"x"
    s = default_convert(np.float32(2))
    check(s, np.float32, (), 2)
    assert default_convert(np.str_("q")) == "q"
    out = default_convert((np.int8(1), [np.float64(2)], "s"))
    assert type(out) is list and out[0].dtype == np.int8 and out[1][0].dtype == np.float64
    assert out[2] == "s"
    p = default_convert(Point(np.int16(1), 2))
    assert type(p) is Point and p.x.dtype == np.int16 and p.y == 2
    m = default_convert(collections.OrderedDict(k=np.uint8(3)))
    assert type(m) is collections.OrderedDict and m["k"].dtype == np.uint8
    assert default_convert(range(2)) == [0, 1]
    items = BatchedItems((a,))
    assert default_convert(items) is items
    assert default_convert(None) is None
