"""Bad input to ParquetDataset: clear errors naming the path and the column; the null rule."""

from __future__ import annotations

import numpy as np
import pytest

from tests.formats._tables import pa, pq, table, write_parquet

from dataloader import DataLoader, ParquetDataset, default_collate


def test_a_missing_file_or_pattern_fails_at_construction(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nope\.parquet"):
        ParquetDataset(tmp_path / "nope.parquet")
    with pytest.raises(FileNotFoundError, match=r"no file matches the pattern .*\*\.parquet"):
        ParquetDataset(str(tmp_path / "*.parquet"))
    with pytest.raises(IsADirectoryError, match="is a directory"):
        ParquetDataset(tmp_path)
    with pytest.raises(ValueError, match="at least one file"):
        ParquetDataset([])


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    bad = tmp_path / "notes.parquet"
    bad.write_text("hello, not parquet\n" * 20)
    with pytest.raises(ValueError, match=r"notes\.parquet.* not a readable Parquet file"):
        len(ParquetDataset(bad))


def test_a_column_not_in_the_schema_names_column_and_file(tmp_path):
    paths, _ = write_parquet(tmp_path, [5])
    ds = ParquetDataset(paths, columns=["id", "label"])
    with pytest.raises(ValueError, match=r"column 'label' is not in .*part-0\.parquet"):
        len(ds)
    with pytest.raises(ValueError, match="duplicate"):
        ParquetDataset(paths, columns=["id", "id"])
    with pytest.raises(TypeError, match="list of names"):
        ParquetDataset(paths, columns="id")


def test_files_whose_schemas_differ_name_both_files_and_the_column(tmp_path):
    paths, _ = write_parquet(tmp_path, [5])
    other = table(4).set_column(0, "id", pa.array(np.arange(4, dtype=np.int32)))
    pq.write_table(other, tmp_path / "other.parquet")
    ds = ParquetDataset([paths[0], tmp_path / "other.parquet"])
    with pytest.raises(ValueError, match=r"column 'id' is int64 in .*part-0.* but int32 in .*other\.parquet"):
        len(ds)
    only_s = ParquetDataset([paths[0], tmp_path / "other.parquet"], columns=["s"])
    assert len(only_s) == 9  # the projection leaves the differing column out
    pq.write_table(table(3).drop_columns(["s"]), tmp_path / "no_s.parquet")
    with pytest.raises(ValueError, match=r"column 's' of .*part-0.* is missing from .*no_s\.parquet"):
        len(ParquetDataset([paths[0], tmp_path / "no_s.parquet"]))


def test_nulls_nan_for_floats_none_for_strings(tmp_path):
    t = pa.table({
        "f": pa.array([1.5, None, 3.0], pa.float64()),
        "s": pa.array(["a", None, "c"]),
        "b": pa.array([b"x", None, b""], pa.binary()),
    })
    pq.write_table(t, tmp_path / "n.parquet")
    ds = ParquetDataset(tmp_path / "n.parquet")
    items = ds.__getitems__([0, 1, 2])
    f, s, b = items.columns
    assert f.dtype == np.float64 and np.isnan(f[1]) and f[2] == 3.0
    assert s.tolist() == ["a", None, "c"] and b.tolist() == [b"x", None, b""]
    batch = default_collate(items)  # a None in a str column: collated row by row, kept
    assert batch["s"] == ["a", None, "c"]


def test_nulls_in_an_int_column_raise_unless_asked_for_objects(tmp_path):
    t = pa.table({"i": pa.array([1, None, 3], pa.int64()), "ok": pa.array([True, False, True])})
    pq.write_table(t, tmp_path / "n.parquet")
    ds = ParquetDataset(tmp_path / "n.parquet")
    with pytest.raises(ValueError, match=r"column 'i' of .*n\.parquet' has 1 null"):
        ds.__getitems__([0])
    with DataLoader(ds, batch_size=2) as loader, pytest.raises(ValueError, match="nulls='object'"):
        next(iter(loader))
    objects = ParquetDataset(tmp_path / "n.parquet", nulls="object")
    i, ok = objects.__getitems__([1, 2]).columns
    assert i.dtype == object and i.tolist() == [None, 3] and ok.dtype == np.bool_
    with pytest.raises(ValueError, match="nulls must be one of"):
        ParquetDataset(tmp_path / "n.parquet", nulls="zero")


def test_bad_indices_and_cache_size(tmp_path):
    paths, _ = write_parquet(tmp_path, [5])
    ds = ParquetDataset(paths)
    with pytest.raises(IndexError, match="index 5 out of range"):
        ds[5]
    with pytest.raises(IndexError, match="index -1 out of range"):
        ds.__getitems__([0, -1])
    with pytest.raises(ValueError, match="cache_row_groups"):
        ParquetDataset(paths, cache_row_groups=0)
    empty = ds.__getitems__([])
    assert len(empty) == 0 and empty.names == ds.columns


def test_files_whose_null_rule_gives_other_dtypes_promote_per_column(tmp_path):
    pq.write_table(pa.table({"i": pa.array([1, None], pa.int64()), "x": [0.5, 1.5]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"i": pa.array([3, 4], pa.int64()), "x": [2.5, 3.5]}), tmp_path / "b.parquet")
    ds = ParquetDataset([tmp_path / "a.parquet", tmp_path / "b.parquet"], nulls="object")
    i, x = ds.__getitems__([3, 1, 0, 2]).columns  # object in a.parquet, int64 in b.parquet
    assert i.dtype == object and i.tolist() == [4, None, 1, 3]
    assert x.dtype == np.float64 and x.tolist() == [3.5, 1.5, 0.5, 2.5]
    i, _ = ds.__getitems__([2, 3]).columns  # b.parquet alone: its own dtype
    assert i.dtype == np.int64 and i.tolist() == [3, 4]
