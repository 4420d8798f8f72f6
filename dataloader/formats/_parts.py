"""``PartsDataset``: the map-style base of ``formats/``: rows stored in parts (Parquet row
groups, Arrow record batches), read with column projection through a bounded part cache.

Row ``i`` lives in the part ``p`` with ``starts[p] <= i < starts[p + 1]``.  A batch of indices
is grouped by part (a stable sort), each part it touches is read once (or found in the cache),
and its rows are gathered into the batch's columns in the order asked for, so any index order
(an exact global shuffle included) gives exactly those rows.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.batched import BatchedItems
from dataloader._indices import as_index_array
from dataloader.formats._blocks import Blocks, gather, stack_columns
from dataloader.formats._cache import PartCache
from dataloader.formats._columns import NULLS, to_numpy

__all__ = ["Parts", "PartsDataset", "arrow"]


def arrow() -> Any:
    """The ``pyarrow`` module, imported on first use (``import dataloader`` never imports it).

    Raises:
        ImportError: pyarrow is not installed (``pip install 'dataloader[formats]'``).
    """
    try:
        import pyarrow  # lazy: optional (the 'formats' extra), never imported by `import dataloader`
    except ImportError as e:
        raise ImportError(
            "dataloader.formats needs pyarrow: pip install 'dataloader[formats]'"
        ) from e
    return pyarrow


@dataclass(frozen=True)
class Parts:
    """What a dataset's storage holds: ``names`` (the projected columns, in output order),
    ``starts`` (int64 ``(P + 1,)``: the first row of each part, then the total), ``where``
    (the file of each part, or ``"<table>"``, for messages) and ``locate`` (what the
    subclass's ``_read`` needs to find each part)."""

    names: tuple[str, ...]
    starts: np.ndarray
    where: tuple[str, ...]
    locate: tuple[Any, ...]


class PartsDataset(Dataset):
    """Rows as dicts ``{column: value}``; batches as a ``BatchedItems`` with names.

    Subclasses implement ``_scan() -> Parts`` (read once, lazily, under the lock) and
    ``_read(locate[p]) -> pyarrow.Table | RecordBatch`` (part ``p``'s projected columns, in
    ``names`` order).

    Thread-safety: the metadata is read once under a lock; parts go through a ``PartCache``
    (its own lock); nothing else is mutated after construction.
    """

    accepts_index_arrays = True

    def __init__(self, nulls: str, cache_row_groups: int) -> None:
        if nulls not in NULLS:
            raise ValueError(f"nulls must be one of {NULLS}, got {nulls!r}")
        if isinstance(cache_row_groups, bool) or not isinstance(cache_row_groups, int) or cache_row_groups < 1:
            raise ValueError(f"cache_row_groups must be an int >= 1, got {cache_row_groups!r}")
        self.nulls = nulls
        self.cache_row_groups = cache_row_groups
        self._init_state()

    def _init_state(self) -> None:
        self._lock = threading.Lock()
        self._parts: Parts | None = None
        self._cache = PartCache(self.cache_row_groups)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_lock", "_parts", "_cache"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_state()

    def _scan(self) -> Parts:
        raise NotImplementedError

    def _read(self, locate: Any) -> Any:
        raise NotImplementedError

    def parts(self) -> Parts:
        """The storage's parts, read on the first call (thread-safe: once)."""
        parts = self._parts
        if parts is None:
            with self._lock:
                if self._parts is None:
                    self._parts = self._scan()
                parts = self._parts
        return parts

    @property
    def columns(self) -> tuple[str, ...]:
        """The names of the columns each row has, in order (reads the metadata)."""
        return self.parts().names

    @property
    def row_group_reads(self) -> int:
        """Row groups (record batches) read and decoded so far, by all threads."""
        return self._cache.loads

    def __len__(self) -> int:
        return int(self.parts().starts[-1])

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Row ``index`` (negative counts from the end) as ``{column: value}``: a NumPy
        scalar, a ``(k,)`` array for a fixed-size list, ``str`` / ``bytes`` / ``None`` / a
        Python value for object columns.

        Raises:
            IndexError: ``index`` out of range.  ValueError: the null rule (``nulls``).
        """
        n = len(self)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"{type(self).__name__} index {index} out of range for length {n}")
        row: dict[str, Any] = self.__getitems__(np.array([i % n], dtype=np.int64))[0]
        return row

    def __getitems__(self, indices: Any) -> BatchedItems:
        """Rows ``indices`` (any order, repeats allowed) as one ``BatchedItems`` whose names
        are ``columns``: each column ``(B,)`` (``(B, k)`` for fixed-size lists), dtypes by the
        rule of ``dataloader.formats`` (strings / binaries: ``object`` arrays).

        Raises:
            IndexError: an index outside ``[0, len)``.  ValueError: the null rule (``nulls``).
        """
        parts = self.parts()
        idx = as_index_array(indices)
        n = int(parts.starts[-1])
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = idx[(idx < 0) | (idx >= n)][0]
            raise IndexError(f"{type(self).__name__} index {bad} out of range for length {n}")
        if not idx.size:  # no rows: part 0's columns, empty (their dtypes)
            which = order = np.zeros(min(n, 1), dtype=np.int64)
            groups = [order[:0]] if n else []
        else:
            which = np.searchsorted(parts.starts, idx, side="right") - 1
            order = np.argsort(which, kind="stable")
            groups = np.split(order, np.flatnonzero(np.diff(which[order])) + 1)
        if not groups:
            raise IndexError(f"{type(self).__name__} has no rows to read")
        pieces = []
        for positions in groups:
            p = int(which[positions[0]]) if positions.size else 0
            blocks = self._cache.get(p, self._decode)
            pieces.append((positions, blocks, idx[positions] - parts.starts[p]))
        return BatchedItems(gather(pieces, len(idx), len(parts.names)), parts.names)

    def _decode(self, part: int) -> Blocks:
        parts = self.parts()
        data = self._read(parts.locate[part])
        where = parts.where[part]
        return stack_columns(tuple(
            to_numpy(arrow(), data.column(name), name, where, self.nulls) for name in parts.names
        ))
