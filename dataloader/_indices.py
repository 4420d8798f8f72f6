"""Turning a batch of indices (ints, an iterable of them, or an integer array) into a 1-D
C-contiguous native int64 array: the one index converter of the package."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["as_index_array"]

_INT64 = np.dtype(np.int64)
_INT64_MIN = int(np.iinfo(np.int64).min)
_INT64_MAX = int(np.iinfo(np.int64).max)


def as_index_array(indices: object) -> np.ndarray:
    """``indices`` as a 1-D C-contiguous native int64 array (no copy when it already is one).

    Args:
        indices: a sequence or other iterable (a generator) of ints, Python or NumPy, or a
            1-D integer array; an object array of Python ints too (any size: one beyond
            int64 is named).

    Raises:
        TypeError: not integers (floats, bools, strings, None, objects), or one scalar.
        ValueError: not 1-D (an array or nested sequence of another shape).
        IndexError: an index beyond int64's range (named; a cast would wrap an unsigned one
            to a negative index, a row counted from the end).
    """
    if (isinstance(indices, np.ndarray) and indices.ndim == 1
            and (indices.dtype is _INT64 or indices.dtype == _INT64)  # ``is``: the common case, ~4x cheaper
            and (flags := indices.flags).c_contiguous and flags.aligned):
        return indices
    if not isinstance(indices, (np.ndarray, list, tuple, range)) and isinstance(indices, Iterable):
        indices = list(indices)  # a generator, a set, a dict's keys: np.asarray would make one object
    arr = np.asarray(indices)
    if arr.size == 0 and arr.ndim == 1:
        return np.empty(0, dtype=np.int64)
    if arr.dtype.kind == "O" and all(
        isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) for i in arr.flat
    ):
        if (bad := next((int(i) for i in arr.flat if not _INT64_MIN <= i <= _INT64_MAX), None)) is not None:
            raise IndexError(f"index {bad} is out of int64's range")
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu" or arr.ndim == 0:  # a scalar is not a batch
        raise TypeError(
            "indices must be integers: a flat sequence of ints or a 1-D integer array, "
            f"got dtype {arr.dtype} shape {arr.shape}"
        )
    if arr.ndim != 1:
        raise ValueError(f"indices must be 1-D, got shape={arr.shape}")
    if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 and arr.size and (top := int(arr.max())) > _INT64_MAX:
        raise IndexError(f"index {top} is out of int64's range (it would wrap to {np.int64(np.uint64(top))})")
    return np.require(arr, _INT64, ("C_CONTIGUOUS", "ALIGNED"))
