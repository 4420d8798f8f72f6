"""``ArrowDataset``: map-style rows of Arrow IPC (Feather v2) files, memory-mapped, or of a
``pyarrow.Table`` in memory."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader.formats._parts import Parts, PartsDataset, arrow
from dataloader.formats._paths import expand_paths
from dataloader.formats._schema import check_columns, check_same_schema, project

__all__ = ["ArrowDataset"]

TABLE = "<table>"


class ArrowDataset(PartsDataset):
    """The rows of Arrow IPC files (``.arrow``, Feather v2) or of a ``pyarrow.Table``, as dicts
    ``{column: value}``; batches as ``ParquetDataset``'s (same types, nulls rule and cache).

    Args:
        source: a file, a glob pattern or a list of them (IPC *file* format, as written by
            ``pyarrow.ipc.new_file`` or ``pyarrow.feather.write_feather``; each memory-mapped,
            so a record batch is decoded without a copy of its file bytes), or a
            ``pyarrow.Table`` (kept, not copied).
        columns: the columns to read, in output order; None: all, in the schema's order.
        nulls: ``"error"`` or ``"object"``: see ``ParquetDataset``.
        cache_row_groups: decoded record batches kept (least recently used out first).

    The parts are the record batches (of the files in order, or ``table.to_batches()``);
    ``len`` is their total rows, read once on first use (a table's: at construction).

    Raises:
        FileNotFoundError / IsADirectoryError / TypeError: at construction (a missing file,
            a directory, a source that is neither paths nor a ``pyarrow.Table``).
        ValueError: a file that is not an Arrow IPC file, a column not in the schema, files
            whose schemas differ (path and column named): a table's at construction, a file's
            on first use.
        ImportError: pyarrow is not installed (``pip install 'dataloader[formats]'``).

    Thread-safety: as ``ParquetDataset``; the memory-mapped readers are opened once, under
    the dataset's lock, and read under it.
    """

    def __init__(
        self,
        source: Any,
        columns: Sequence[str] | None = None,
        *,
        nulls: str = "error",
        cache_row_groups: int = 64,
    ) -> None:
        pa = arrow()
        self.requested_columns = check_columns(columns)
        if isinstance(source, pa.Table):
            self.table: Any = source
            self.paths: tuple[str, ...] = ()
            project(source.schema, self.requested_columns, TABLE)
        elif isinstance(source, (str, os.PathLike, list, tuple)):
            self.table = None
            self.paths = expand_paths(source, "ArrowDataset")
        else:
            raise TypeError(f"ArrowDataset takes Arrow IPC file paths or a pyarrow.Table, got {type(source).__name__}")
        super().__init__(nulls, cache_row_groups)

    def __repr__(self) -> str:
        what = "a Table" if self.table is not None else f"{len(self.paths)} file(s)"
        return f"ArrowDataset({what}, columns={self.requested_columns})"

    def _scan(self) -> Parts:
        if self.table is not None:
            projected = project(self.table.schema, self.requested_columns, TABLE)
            batches = self.table.select(list(projected)).to_batches()
            return _parts(projected, [(TABLE, b) for b in batches])
        found: list[tuple[str, Any]] = []
        names: tuple[str, ...] = ()
        first: Any = None
        for path in self.paths:
            reader = _open(path)
            if first is None:
                first = reader.schema
                names = project(first, self.requested_columns, repr(path))
            else:
                check_same_schema(first, repr(self.paths[0]), reader.schema, repr(path), names)
            found.extend((repr(path), (reader, g)) for g in range(reader.num_record_batches))
        return _parts(names, found)

    def _read(self, locate: Any) -> Any:
        if not isinstance(locate, tuple):  # a table's record batch
            return locate
        reader, group = locate
        with self._lock:  # one reader, many threads: its reads are not documented thread-safe
            return reader.get_batch(group)


def _parts(names: tuple[str, ...], found: list[tuple[str, Any]]) -> Parts:
    counts = [_rows(locate) for _, locate in found]
    starts = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return Parts(names, starts, tuple(w for w, _ in found), tuple(loc for _, loc in found))


def _rows(locate: Any) -> int:
    if isinstance(locate, tuple):
        reader, group = locate
        return int(reader.get_batch(group).num_rows)  # metadata only: the file is mapped
    return int(locate.num_rows)


def _open(path: str) -> Any:
    """The IPC file reader of ``path``, memory-mapped.  Raises: ValueError: not an Arrow file."""
    pa = arrow()
    try:
        return pa.ipc.open_file(pa.memory_map(path, "r"))
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        raise ValueError(f"{path!r} is not a readable Arrow IPC file: {e}") from e
