"""Checks shared by the file-backed datasets of ``formats/``: the projection and equal schemas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["check_columns", "check_same_schema", "project"]


def check_columns(columns: Sequence[str] | None) -> tuple[str, ...] | None:
    """``columns`` as a tuple (None stays None).

    Raises:
        TypeError: a single string, or a name that is not a string.
        ValueError: a duplicate name.
    """
    if columns is None:
        return None
    if isinstance(columns, str):
        raise TypeError(f"columns must be a list of names, got the string {columns!r}")
    names = tuple(columns)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"a column name must be a str, got {type(name).__name__}")
    if len(set(names)) != len(names):
        raise ValueError(f"columns has a duplicate name: {list(names)}")
    return names


def project(schema: Any, columns: Sequence[str] | None, where: str) -> tuple[str, ...]:
    """The names to read: ``columns`` (already through ``check_columns``) in its order, or all
    of ``schema``'s in its order.

    Raises:
        ValueError: a column not in the schema (named, with ``where`` and its columns).
    """
    if columns is None:
        return tuple(schema.names)
    for name in columns:
        if schema.get_field_index(name) < 0:
            raise ValueError(f"column {name!r} is not in {where} (its columns: {list(schema.names)})")
    return tuple(columns)


def check_same_schema(first: Any, first_where: str, schema: Any, where: str, names: Sequence[str]) -> None:
    """Raises ValueError unless ``schema`` has each of ``names`` with ``first``'s type (the
    message names both files and the column)."""
    for name in names:
        if schema.get_field_index(name) < 0:
            raise ValueError(f"column {name!r} of {first_where} is missing from {where}")
        a, b = first.field(name).type, schema.field(name).type
        if a != b:
            raise ValueError(
                f"column {name!r} is {a} in {first_where} but {b} in {where}: the files' schemas differ"
            )
