"""Turning a batch of indices (list of ints or 1-D integer array) into a 1-D int64 array."""

from __future__ import annotations

import numpy as np

__all__ = ["as_index_array"]

_INT64 = np.dtype(np.int64)
_INT64_MAX = int(np.iinfo(np.int64).max)


def as_index_array(indices: object) -> np.ndarray:
    """``indices`` as a 1-D int64 array (no copy when it already is one).

    Args:
        indices: a sequence of ints (Python or NumPy) or a 1-D integer array.

    Raises:
        TypeError: not integers (floats, bools, strings, objects) or not 1-D.
        IndexError: an unsigned index over int64's range (named; a cast would wrap it to a
            negative index, a row counted from the end).
    """
    if isinstance(indices, np.ndarray) and indices.ndim == 1 and (
        indices.dtype is _INT64 or indices.dtype == _INT64  # ``is``: the common case, ~4x cheaper
    ):
        return indices
    arr = np.asarray(indices)
    if arr.size == 0 and arr.ndim == 1:
        return np.empty(0, dtype=np.int64)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(
            "indices must be a flat sequence of ints or a 1-D integer array, "
            f"got dtype {arr.dtype} shape {arr.shape}"
        )
    if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 and (top := int(arr.max())) > _INT64_MAX:
        raise IndexError(f"index {top} is out of int64's range (it would wrap to {np.int64(np.uint64(top))})")
    return arr.astype(np.int64, copy=False)
