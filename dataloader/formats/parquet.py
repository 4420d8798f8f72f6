"""``ParquetDataset``: map-style rows of local Parquet files, read row group by row group."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader.formats._parts import Parts, PartsDataset, arrow
from dataloader.formats._paths import expand_paths
from dataloader.formats._schema import check_columns, check_same_schema, project

__all__ = ["ParquetDataset"]

PathArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


class ParquetDataset(PartsDataset):
    """The rows of one or many local Parquet files, in file order, as dicts ``{column: value}``.

    Args:
        paths: a file, a glob pattern (``"data/*.parquet"``: its matches sorted), or a list
            of them; the dataset's rows are the files' rows one file after the other.
        columns: the columns to read, in the order rows and batches give them; None: all
            columns of the first file, in its order.  Only these are read (projection).
        nulls: ``"error"`` (an int / bool / temporal column with a null raises) or
            ``"object"`` (that column becomes an ``object`` array with ``None``); floats keep
            nulls as NaN, strings as ``None`` (see ``dataloader.formats``).
        cache_row_groups: decoded row groups kept (least recently used out first).  A batch
            reads each row group it touches once; with the cache larger than the row groups a
            shuffled epoch touches, each is read once an epoch.

    ``len`` is the sum of the files' row counts, read from their footers once, on first use
    (``len``, a read, or ``columns``), thread-safely.  Batches: ``__getitems__`` returns a
    ``BatchedItems`` named by ``columns``, one NumPy column ``(B,)`` (``(B, k)`` for a
    fixed-size list) per column; ``default_collate`` makes it ``{column: array}`` (strings and
    bytes: a ``list``), ``dataloader.torch`` ``{column: tensor}``.

    Raises:
        FileNotFoundError / IsADirectoryError / TypeError / ValueError: at construction, for
            a missing file, a directory, a bad argument (``columns`` a string, a duplicate
            name, ``nulls`` or ``cache_row_groups`` out of their range).
        ValueError: on first use: a file that is not Parquet, a column not in the schema, or
            files whose schemas differ in the projected columns (the path and column named).
        ImportError: pyarrow is not installed (``pip install 'dataloader[formats]'``).

    Thread-safety: any number of threads may read one dataset (a lock guards the footers and
    the row-group cache); pickling keeps the arguments and drops the cache.
    """

    def __init__(
        self,
        paths: PathArg,
        columns: Sequence[str] | None = None,
        *,
        nulls: str = "error",
        cache_row_groups: int = 64,
    ) -> None:
        self.paths = expand_paths(paths, "ParquetDataset")
        self.requested_columns = check_columns(columns)
        arrow()
        super().__init__(nulls, cache_row_groups)

    def __repr__(self) -> str:
        return f"ParquetDataset({len(self.paths)} file(s), columns={self.requested_columns})"

    def _scan(self) -> Parts:
        pq = _parquet()
        names: tuple[str, ...] = ()
        counts: list[int] = []
        where: list[str] = []
        locate: list[Any] = []
        first: Any = None
        for path in self.paths:
            meta = _footer(pq, path)
            schema = meta.schema.to_arrow_schema()
            if first is None:
                first = schema
                names = project(schema, self.requested_columns, repr(path))
            else:
                check_same_schema(first, repr(self.paths[0]), schema, repr(path), names)
            for g in range(meta.num_row_groups):
                counts.append(meta.row_group(g).num_rows)
                where.append(repr(path))
                locate.append((path, meta, g))
        starts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return Parts(names, starts, tuple(where), tuple(locate))

    def _read(self, locate: Any) -> Any:
        path, meta, group = locate
        with _parquet().ParquetFile(path, metadata=meta) as f:
            return f.read_row_group(group, columns=list(self.parts().names))


def _parquet() -> Any:
    arrow()  # the ImportError that names the extra
    import pyarrow.parquet as pq  # lazy: optional (the 'formats' extra)

    return pq


def _footer(pq: Any, path: str) -> Any:
    """The footer (``FileMetaData``) of ``path``.  Raises: ValueError: not a Parquet file."""
    try:
        return pq.read_metadata(path)
    except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"{path!r} is not a readable Parquet file: {e}") from e
