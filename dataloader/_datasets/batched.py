"""``BatchedItems``: a batch that a dataset's ``__getitems__`` returns already stacked.

It is a ``Sequence`` of per-row tuples, so a custom ``collate_fn`` sees what it would have seen
from ``[dataset[i] for i in indices]``, while :func:`dataloader.collate.default_collate` returns
``list(columns)`` without touching the rows (equal to collating the rows, since PyTorch collates
a batch of tuples into a list of stacked fields).  With ``names`` the rows are dicts
``{name: c[i]}`` and ``default_collate`` returns ``dict(zip(names, columns))`` (a dict of stacked
fields, as PyTorch collates a batch of dicts).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np

__all__ = ["BatchedItems"]


class BatchedItems(Sequence):
    """Rows ``i -> tuple(c[i] for c in columns)`` over columns of equal length.

    Args:
        columns: a non-empty tuple (or other sequence) of arrays, each of shape ``(B, ...)``
            and any dtype; row ``i`` of the batch is ``tuple(c[i] for c in columns)``.
        names: None (rows are tuples), or one distinct ``str`` per column: row ``i`` is then
            the dict ``{name: c[i]}`` in column order.

    Raises:
        ValueError: no columns, a 0-d column, or columns of different lengths (named);
            ``names`` not one distinct name per column.
        TypeError: ``columns`` is a single array or not a sequence.

    Immutable after construction; safe to read from several threads.  The columns are not
    copied: whoever builds a ``BatchedItems`` hands over its arrays.
    """

    __slots__ = ("_columns", "_len", "_names")

    def __init__(self, columns: Sequence[np.ndarray], names: Sequence[str] | None = None) -> None:
        if type(columns) is not tuple:
            if isinstance(columns, np.ndarray) or not isinstance(columns, Sequence):
                raise TypeError(f"columns must be a tuple of arrays, got {type(columns).__name__}")
            columns = tuple(columns)
        if not columns:
            raise ValueError("BatchedItems needs at least one column")
        n = _length(columns[0], 0)
        for k in range(1, len(columns)):
            if _length(columns[k], k) != n:
                lengths = [_length(c, j) for j, c in enumerate(columns)]
                raise ValueError(f"columns must have the same length, got lengths {lengths}")
        self._columns = columns
        self._len = n
        self._names = None if names is None else _check_names(names, len(columns))

    @classmethod
    def _of(cls, columns: tuple[np.ndarray, ...], n: int) -> BatchedItems:
        """A ``BatchedItems`` of ``columns``, a non-empty tuple of arrays of length ``n`` that
        the caller made itself (``ArrayDataset``'s native gather), so nothing is checked."""
        batch = object.__new__(cls)
        batch._columns = columns
        batch._len = n
        batch._names = None
        return batch

    @property
    def columns(self) -> tuple[np.ndarray, ...]:
        """The stacked fields, each of shape ``(len(self), ...)``."""
        return self._columns

    @property
    def names(self) -> tuple[str, ...] | None:
        """The column names (rows are dicts), or None (rows are tuples)."""
        return self._names

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> BatchedItems: ...

    def __getitem__(self, index: int | slice) -> Any:
        """Row ``index`` as a tuple (a dict with ``names``); a slice gives a ``BatchedItems`` of
        sliced columns."""
        if isinstance(index, slice):
            return BatchedItems(tuple(c[index] for c in self._columns), self._names)
        index = operator.index(index)
        if not -self._len <= index < self._len:
            raise IndexError(f"BatchedItems index {index} out of range for length {self._len}")
        if self._names is not None:
            return {k: c[index] for k, c in zip(self._names, self._columns, strict=True)}
        return tuple(c[index] for c in self._columns)

    def __iter__(self) -> Iterator[Any]:
        rows = zip(*self._columns, strict=True)
        if self._names is None:
            return rows
        names = self._names
        return (dict(zip(names, row, strict=True)) for row in rows)

    def __repr__(self) -> str:
        cols = ", ".join(
            f"{getattr(c, 'dtype', type(c).__name__)}{tuple(getattr(c, 'shape', (len(c),)))}"
            for c in self._columns
        )
        names = "" if self._names is None else f", names={list(self._names)}"
        return f"BatchedItems(len={self._len}, columns=[{cols}]{names})"


def _check_names(names: Sequence[str], n: int) -> tuple[str, ...]:
    out = tuple(names)
    if len(out) != n or len(set(out)) != n or not all(isinstance(k, str) for k in out):
        raise ValueError(f"names must be {n} distinct strings, one per column, got {out!r}")
    return out


def _length(column: Any, k: int) -> int:
    shape = getattr(column, "shape", None)
    if shape is None:
        return len(column)
    if not shape:
        raise ValueError(f"column {k} is 0-d (shape ()); columns need a batch axis")
    return shape[0]
