"""Small tables written by pyarrow for the tests of dataloader.formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow", reason="dataloader.formats needs pyarrow (the 'formats' extra)")
pq = pytest.importorskip("pyarrow.parquet")


def table(n: int, start: int = 0) -> pa.Table:
    """``n`` rows: id (int64 = row number), x (float32), s (str), b (bytes), v (2 x float64)."""
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "x": (ids * 0.5).astype(np.float32),
        "s": [f"row-{i}" for i in ids],
        "b": [bytes([i % 256]) * (i % 3) for i in ids],
        "v": pa.array([[float(i), -float(i)] for i in ids], pa.list_(pa.float64(), 2)),
    })


def write_parquet(tmp_path: Path, sizes: list[int], row_group_size: int = 7) -> tuple[list[Path], pa.Table]:
    """Files ``part-k.parquet`` of ``sizes[k]`` consecutive rows; their concatenated table."""
    paths, tables, start = [], [], 0
    for k, n in enumerate(sizes):
        t = table(n, start)
        path = tmp_path / f"part-{k}.parquet"
        pq.write_table(t, path, row_group_size=row_group_size)
        paths.append(path)
        tables.append(t)
        start += n
    return paths, pa.concat_tables(tables)


def as_lists(batch: dict) -> dict:
    """A collated batch's columns as Python lists (arrays compared by value)."""
    return {k: (v.tolist() if isinstance(v, np.ndarray) else list(v)) for k, v in batch.items()}


def expected(t: pa.Table, rows: list[int]) -> dict:
    """``t.take(rows)`` as the lists a collated batch holds."""
    taken = t.take(pa.array(rows, pa.int64())).to_pydict()
    taken["x"] = [float(np.float32(x)) for x in taken["x"]]
    return taken
