"""ArrowDataset: Arrow IPC / Feather v2 files (memory-mapped) and a pyarrow.Table in memory."""

from __future__ import annotations

import numpy as np
import pytest

from tests.formats._tables import as_lists, expected, pa, table

from dataloader import ArrowDataset, DataLoader, default_collate

feather = pytest.importorskip("pyarrow.feather")


def _write_ipc(path, t: pa.Table, max_chunksize: int) -> None:
    with pa.ipc.new_file(str(path), t.schema) as writer:
        for batch in t.to_batches(max_chunksize=max_chunksize):
            writer.write_batch(batch)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_ipc_files_read_as_the_table_in_a_shuffled_epoch(tmp_path, num_workers):
    a, b = table(20), table(13, start=20)
    _write_ipc(tmp_path / "a.arrow", a, 6)
    feather.write_feather(b, tmp_path / "b.feather", chunksize=5)  # Feather v2 = IPC file
    ds = ArrowDataset([tmp_path / "a.arrow", tmp_path / "b.feather"], cache_row_groups=2)
    assert len(ds) == 33 and ds.row_group_reads == 0
    with DataLoader(ds, batch_size=5, shuffle=True, num_workers=num_workers, seed=5) as loader:
        got: dict = {}
        for batch in loader:
            for k, v in as_lists(batch).items():
                got.setdefault(k, []).extend(v)
    assert sorted(got["id"]) == list(range(33))
    assert got == expected(pa.concat_tables([a, b]), got["id"])


def test_a_table_in_memory_with_projection():
    t = pa.concat_tables([table(10), table(10, start=10)])  # two chunks
    ds = ArrowDataset(t, columns=["v", "id"])
    assert len(ds) == 20 and ds.columns == ("v", "id")
    batch = default_collate(ds.__getitems__([19, 3, 10]))
    assert list(batch) == ["v", "id"] and batch["id"].tolist() == [19, 3, 10]
    np.testing.assert_array_equal(batch["v"], [[19.0, -19.0], [3.0, -3.0], [10.0, -10.0]])
    assert ds[4]["id"] == 4


def test_a_table_with_a_missing_column_fails_at_construction():
    with pytest.raises(ValueError, match=r"column 'nope' is not in <table>"):
        ArrowDataset(table(3), columns=["id", "nope"])


def test_not_a_table_nor_paths_is_a_type_error():
    with pytest.raises(TypeError, match="pyarrow.Table"):
        ArrowDataset(np.arange(3))


def test_a_file_that_is_not_arrow_is_named(tmp_path):
    bad = tmp_path / "bad.arrow"
    bad.write_bytes(b"not arrow at all" * 10)
    ds = ArrowDataset(bad)
    with pytest.raises(ValueError, match=r"bad\.arrow.* not a readable Arrow IPC file"):
        len(ds)
