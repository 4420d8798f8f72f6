"""The one index converter (``_indices.as_index_array``): what ``NdfFile.read_rows``, the
datasets and the batch sampler's fast path all accept, and the errors they all raise."""

from __future__ import annotations

import numpy as np
import pytest

from dataloader._indices import as_index_array


def _is_index_array(a: np.ndarray) -> bool:
    return a.dtype == np.int64 and a.dtype.isnative and a.ndim == 1 and a.flags.c_contiguous and a.flags.aligned


def test_an_int64_index_array_is_returned_as_is():
    a = np.arange(5)
    assert as_index_array(a) is a


@pytest.mark.parametrize(
    "indices",
    [
        [3, 1, 2],
        (3, 1, 2),
        range(3, 0, -1),
        (i for i in [3, 1, 2]),  # a generator (read_rows accepted them)
        np.array([3, 1, 2], dtype=np.uint8),
        np.array([3, 1, 2], dtype=">i8"),
        np.array([3, 9, 1, 9, 2])[::2],  # strided: copied to a contiguous array
        np.array([3, 1, 2], dtype=object),  # Python ints in an object array (read_rows accepted them)
        [np.int32(3), np.int64(1), 2],
    ],
)
def test_sequences_iterables_and_integer_arrays_become_contiguous_int64(indices):
    got = as_index_array(indices)
    assert _is_index_array(got) and got.tolist() in ([3, 1, 2], [3, 2, 1])


def test_an_unaligned_int64_array_is_copied_aligned():
    buf = np.zeros(8 * 4 + 1, dtype=np.uint8)
    a = np.frombuffer(buf.data, dtype=np.int64, count=4, offset=1)
    assert not a.flags.aligned
    assert _is_index_array(as_index_array(a))


def test_empty_batches_are_empty_int64():
    for empty in ([], (), range(0), iter([]), np.array([], dtype=np.float64)):
        got = as_index_array(empty)
        assert _is_index_array(got) and got.size == 0


@pytest.mark.parametrize(
    "indices, bad",
    [
        ([1, 2**70], 2**70),
        (np.array([1, -(2**64)], dtype=object), -(2**64)),
        (np.array([7, 2**63], dtype=np.uint64), 2**63),
        ([2**64 - 1], 2**64 - 1),
    ],
)
def test_an_index_beyond_int64_is_named_not_wrapped(indices, bad):
    with pytest.raises(IndexError, match=f"index {bad} is out of int64's range"):
        as_index_array(indices)


@pytest.mark.parametrize(
    "indices",
    [[0.0, 1.0], np.array([True, False]), [True, False], [0, None], ["a", "b"],
     np.array([1, True], dtype=object), 5],
)
def test_non_integers_are_a_type_error(indices):
    with pytest.raises(TypeError, match="indices must be integers"):
        as_index_array(indices)


@pytest.mark.parametrize("indices", [np.zeros((2, 2), dtype=np.int64), [[0, 1], [2, 3]]])
def test_another_shape_is_a_value_error(indices):
    with pytest.raises(ValueError, match=r"indices must be 1-D, got shape=\(2, 2\)"):
        as_index_array(indices)
