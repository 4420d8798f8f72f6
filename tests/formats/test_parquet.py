"""ParquetDataset: rows, batches, projection, many files, shuffled epochs, workers, resume,
threads (tests/formats/_tables.py writes the files with pyarrow)."""

from __future__ import annotations

import json
import pickle
import threading

import numpy as np
import pytest

from tests.formats._tables import as_lists, expected, write_parquet

import dataloader
from dataloader import BatchedItems, DataLoader, ParquetDataset, default_collate


def _epoch(loader) -> dict:
    out: dict = {}
    for batch in loader:
        for k, v in as_lists(batch).items():
            out.setdefault(k, []).extend(v)
    return out


def test_rows_and_batches_match_the_table(tmp_path):
    paths, t = write_parquet(tmp_path, [30])
    ds = ParquetDataset(paths[0])
    assert len(ds) == 30 and ds.columns == ("id", "x", "s", "b", "v")
    row = ds[12]
    assert row["id"] == 12 and row["s"] == "row-12" and row["b"] == b"" and ds[13]["b"] == b"\x0d"
    np.testing.assert_array_equal(row["v"], [12.0, -12.0])
    assert ds[-1]["id"] == 29
    items = ds.__getitems__([29, 0, 12, 12])
    assert isinstance(items, BatchedItems) and items.names == ds.columns
    cols = dict(zip(items.names, items.columns))
    assert cols["x"].dtype == np.float32 and cols["v"].shape == (4, 2) and cols["s"].dtype == object
    assert all(c.flags.c_contiguous for c in items.columns)
    assert list(items[2]) == list(ds.columns) and items[2]["id"] == 12 and items[2]["s"] == "row-12"
    assert as_lists(default_collate(items)) == expected(t, [29, 0, 12, 12])


def test_the_collated_batch_equals_collating_the_dict_rows(tmp_path):
    paths, _ = write_parquet(tmp_path, [20])
    ds = ParquetDataset(paths)
    items = ds.__getitems__([3, 19, 7])
    fast = default_collate(items)
    rows = default_collate([ds[3], ds[19], ds[7]])
    assert list(fast) == list(rows)
    for k in fast:
        assert type(fast[k]) is type(rows[k])
        if isinstance(rows[k], np.ndarray):
            assert fast[k].dtype == rows[k].dtype and fast[k].shape == rows[k].shape
    assert as_lists(fast) == as_lists(rows)


def test_many_files_by_list_and_glob_and_projection(tmp_path):
    paths, t = write_parquet(tmp_path, [10, 1, 25])
    by_list = ParquetDataset(paths, columns=["s", "id"])
    by_glob = ParquetDataset(str(tmp_path / "part-*.parquet"), columns=["s", "id"])
    assert len(by_list) == len(by_glob) == 36 and by_list.columns == ("s", "id")
    rows = [35, 10, 0, 11, 9]
    for ds in (by_list, by_glob):
        batch = default_collate(ds.__getitems__(rows))
        assert list(batch) == ["s", "id"]
        assert batch["id"].tolist() == rows and batch["s"] == [f"row-{i}" for i in rows]
    assert list(ds[10]) == ["s", "id"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_shuffled_epoch_is_the_table_taken_in_a_permutation(tmp_path, num_workers):
    paths, t = write_parquet(tmp_path, [40, 23])
    ds = ParquetDataset(paths, cache_row_groups=2)  # smaller than the 10 row groups
    with DataLoader(ds, batch_size=8, shuffle=True, num_workers=num_workers, seed=3) as loader:
        got = _epoch(loader)
    perm = got["id"]
    assert sorted(perm) == list(range(63)) and perm != list(range(63))
    assert got == expected(t, perm)


@pytest.mark.timeout(60)
def test_a_sequential_epoch_reads_each_row_group_once(tmp_path):
    paths, t = write_parquet(tmp_path, [50], row_group_size=10)
    ds = ParquetDataset(paths, cache_row_groups=1)
    with DataLoader(ds, batch_size=10) as loader:
        assert _epoch(loader) == expected(t, list(range(50)))
    assert ds.row_group_reads == 5


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [(0, 2), (2, 0)])
def test_resume_mid_epoch_gives_exactly_the_rest(tmp_path, workers):
    paths, _ = write_parquet(tmp_path, [45])

    def loader(w):
        return DataLoader(ParquetDataset(paths), batch_size=4, shuffle=True, num_workers=w, seed=11)

    with loader(0) as reference:
        full = [b["id"].tolist() for b in reference]
    with loader(workers[0]) as first:
        it = iter(first)
        seen = [next(it)["id"].tolist() for _ in range(5)]
        state = json.loads(json.dumps(first.state_dict()))
        it.close()
    with loader(workers[1]) as second:
        second.load_state_dict(state)
        rest = [b["id"].tolist() for b in second]
    assert seen + rest == full


@pytest.mark.timeout(120)
def test_many_threads_reading_one_dataset_get_their_rows(tmp_path):
    paths, t = write_parquet(tmp_path, [300], row_group_size=16)
    ds = ParquetDataset(paths, columns=["id", "s"], cache_row_groups=3)
    rng = np.random.default_rng(0)
    jobs = [rng.integers(0, 300, size=32) for _ in range(64)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def read(k: int) -> None:
        try:
            barrier.wait(timeout=30)
            for rows in jobs[k::8]:
                batch = default_collate(ds.__getitems__(rows))
                assert batch["id"].tolist() == rows.tolist()
                assert batch["s"] == [f"row-{i}" for i in rows]
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=read, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads) and errors == []


def test_pickle_keeps_the_rows_and_drops_the_cache(tmp_path):
    paths, _ = write_parquet(tmp_path, [12])
    ds = ParquetDataset(paths, columns=["id"])
    ds.__getitems__([0, 11])
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.row_group_reads == 0 and copy[5]["id"] == 5 and len(copy) == 12


def test_import_dataloader_does_not_import_pyarrow():
    from tests._support import run_python

    out = run_python("-c", "import sys, dataloader, dataloader.formats; print('pyarrow' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    assert "ParquetDataset" in dataloader.__all__ and "ArrowDataset" in dataloader.__all__


def test_the_torch_face_gives_tensors_for_numeric_columns(tmp_path):
    torch = pytest.importorskip("torch", reason="dataloader.torch needs torch (absent on 3.13t)")
    from dataloader.torch import DataLoader as TorchLoader

    paths, _ = write_parquet(tmp_path, [9])
    loader = TorchLoader(ParquetDataset(paths), batch_size=4)
    batch = next(iter(loader))
    assert isinstance(batch["id"], torch.Tensor) and batch["id"].tolist() == [0, 1, 2, 3]
    assert batch["x"].dtype == torch.float32 and batch["v"].shape == (4, 2)
    assert batch["s"] == ["row-0", "row-1", "row-2", "row-3"]
