"""``BatchedItems``: a batch that a dataset's ``__getitems__`` returns already stacked.

It is a ``Sequence`` of per-row tuples, so a custom ``collate_fn`` sees what it would have seen
from ``[dataset[i] for i in indices]``, while :func:`dataloader.collate.default_collate` returns
``list(columns)`` without touching the rows (equal to collating the rows, since PyTorch collates
a batch of tuples into a list of stacked fields).
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

    Raises:
        ValueError: no columns, a 0-d column, or columns of different lengths (named).
        TypeError: ``columns`` is a single array or not a sequence.

    Immutable after construction; safe to read from several threads.  The columns are not
    copied: whoever builds a ``BatchedItems`` hands over its arrays.
    """

    __slots__ = ("_columns", "_len")

    def __init__(self, columns: Sequence[np.ndarray]) -> None:
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

    @classmethod
    def _of(cls, columns: tuple[np.ndarray, ...], n: int) -> BatchedItems:
        """A ``BatchedItems`` of ``columns``, a non-empty tuple of arrays of length ``n`` that
        the caller made itself (``ArrayDataset``'s native gather), so nothing is checked."""
        batch = object.__new__(cls)
        batch._columns = columns
        batch._len = n
        return batch

    @property
    def columns(self) -> tuple[np.ndarray, ...]:
        """The stacked fields, each of shape ``(len(self), ...)``."""
        return self._columns

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> tuple[Any, ...]: ...
    @overload
    def __getitem__(self, index: slice) -> BatchedItems: ...

    def __getitem__(self, index: int | slice) -> tuple[Any, ...] | BatchedItems:
        """Row ``index`` as a tuple; a slice gives a ``BatchedItems`` of sliced columns."""
        if isinstance(index, slice):
            return BatchedItems(tuple(c[index] for c in self._columns))
        index = operator.index(index)
        if not -self._len <= index < self._len:
            raise IndexError(f"BatchedItems index {index} out of range for length {self._len}")
        return tuple(c[index] for c in self._columns)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return zip(*self._columns, strict=True)

    def __repr__(self) -> str:
        cols = ", ".join(
            f"{getattr(c, 'dtype', type(c).__name__)}{tuple(getattr(c, 'shape', (len(c),)))}"
            for c in self._columns
        )
        return f"BatchedItems(len={self._len}, columns=[{cols}])"


def _length(column: Any, k: int) -> int:
    shape = getattr(column, "shape", None)
    if shape is None:
        return len(column)
    if not shape:
        raise ValueError(f"column {k} is 0-d (shape ()); columns need a batch axis")
    return shape[0]
