"""Arrow columns as NumPy columns: the one conversion rule of ``formats/`` (types and nulls).

=====================================  ===================================================
Arrow type                             NumPy column of a batch of ``B`` rows
=====================================  ===================================================
integers, floats, bool                 that dtype, shape ``(B,)``
timestamp, date, duration              ``datetime64`` / ``timedelta64``, shape ``(B,)``
fixed-size list of a fixed-width type  shape ``(B, k)`` of the value type (no nulls)
string, binary (large too)             ``object``: ``str`` / ``bytes`` (null: ``None``)
anything else (lists, structs...)      ``object``: the Python values (``to_pylist``)
=====================================  ===================================================

Nulls: a float column keeps them as NaN; a string / binary / other object column as ``None``;
an integer, bool, temporal or fixed-size-list column with nulls raises ``ValueError`` (naming
the column and the file) unless ``nulls="object"``, which makes that column an ``object``
array of Python values with ``None`` for nulls.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NULLS", "to_numpy"]

NULLS = ("error", "object")


def to_numpy(pa: Any, column: Any, name: str, where: str, nulls: str) -> np.ndarray:
    """The NumPy column of the Arrow ``column`` (an ``Array`` or ``ChunkedArray``).

    Args:
        pa: the ``pyarrow`` module.
        name, where: the column's name and its file (or ``"<table>"``), for the error.
        nulls: ``"error"`` or ``"object"`` (the module's rule).

    Raises:
        ValueError: nulls in an integer / bool / temporal / fixed-size-list column with
            ``nulls="error"``.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    types = pa.types
    if types.is_floating(t):
        return column.to_numpy(zero_copy_only=False)
    if _is_text(types, t) or types.is_dictionary(t):
        if types.is_dictionary(t):
            column = column.dictionary_decode()
        if _is_text(types, column.type):
            return column.to_numpy(zero_copy_only=False)
        return _objects(column)
    fixed = types.is_integer(t) or types.is_boolean(t) or types.is_temporal(t)
    fixed_list = types.is_fixed_size_list(t) and _fixed_width(types, t.value_type)
    if not (fixed or fixed_list):
        return _objects(column)
    if column.null_count:
        if nulls == "object":
            return _objects(column)
        raise ValueError(
            f"column {name!r} of {where} has {column.null_count} null(s) in type {t}, which a "
            f"NumPy {t} column cannot hold: pass nulls='object' for None in an object column"
        )
    if fixed_list:
        values = column.flatten().to_numpy(zero_copy_only=False)
        return values.reshape(len(column), t.list_size)
    return column.to_numpy(zero_copy_only=False)


def _is_text(types: Any, t: Any) -> bool:
    return bool(
        types.is_string(t) or types.is_large_string(t) or types.is_binary(t)
        or types.is_large_binary(t) or types.is_fixed_size_binary(t)
    )


def _fixed_width(types: Any, t: Any) -> bool:
    return bool(types.is_integer(t) or types.is_floating(t) or types.is_boolean(t))


def _objects(column: Any) -> np.ndarray:
    out = np.empty(len(column), dtype=object)
    for i, value in enumerate(column.to_pylist()):  # item by item: a list value stays one item
        out[i] = value
    return out
