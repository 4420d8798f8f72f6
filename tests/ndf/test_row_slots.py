"""RowSlots: an .ndf file written by row index in any order appears only when complete."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dataloader._ndf.format import Layout
from dataloader._ndf.slots import RowSlots
from dataloader.ndf import NdfFile

pytestmark = pytest.mark.timeout(30)


def _rows(idx: np.ndarray) -> np.ndarray:
    """Rows of 2 float64 x and 1 int64 y, as the file's bytes: x = (i, -i), y = 10 * i."""
    out = np.empty(len(idx), [("x", "<f8", (2,)), ("y", "<i8", (1,))])
    out["x"] = np.stack([idx, -idx], axis=1)
    out["y"] = 10 * idx[:, None]
    return out.view(np.uint8).reshape(len(idx), -1)


def _layout(n: int) -> Layout:
    return Layout(2, n, 2, 1, np.dtype(np.float64), np.dtype(np.int64), extra={"note": [1, 2]})


def test_rows_in_shuffled_order_with_repeats_make_the_file_at_the_last_one(tmp_path):
    path = tmp_path / "r.ndf"
    slots = RowSlots(path, _layout(10))
    order = np.random.default_rng(0).permutation(10).astype(np.int64)
    assert not slots.write(order[:6], _rows(order[:6]))
    assert not slots.write(order[:3], _rows(order[:3]) * 0)  # already written: not written again
    assert not path.exists() and slots.written == 6
    assert list(slots.missing(np.arange(10, dtype=np.int64))) == sorted(order[6:].tolist())
    assert slots.write(order[4:], _rows(order[4:]))
    assert os.listdir(tmp_path) == ["r.ndf"] and slots.closed
    with NdfFile(path) as f:
        x, y = f.read_rows(np.arange(10))
        assert f.metadata == {"note": [1, 2]}
    assert np.array_equal(x[:, 0], np.arange(10)) and np.array_equal(y[:, 0], 10 * np.arange(10))


def test_an_aborted_file_leaves_path_untouched_and_later_writes_do_nothing(tmp_path):
    path = tmp_path / "r.ndf"
    path.write_bytes(b"previous")
    slots = RowSlots(path, _layout(4))
    slots.write(np.array([0, 1], dtype=np.int64), _rows(np.array([0, 1])))
    slots.abort()
    assert os.listdir(tmp_path) == ["r.ndf"] and path.read_bytes() == b"previous"
    assert not slots.write(np.array([2, 3], dtype=np.int64), _rows(np.array([2, 3])))
    slots.abort()
    assert path.read_bytes() == b"previous"


def test_a_dropped_writer_removes_its_temporary_file(tmp_path):
    slots = RowSlots(tmp_path / "r.ndf", _layout(4))
    assert len(os.listdir(tmp_path)) == 1
    del slots
    assert os.listdir(tmp_path) == []


def test_an_index_repeated_in_one_write_is_written_and_counted_once(tmp_path):
    path = tmp_path / "r.ndf"
    slots = RowSlots(path, _layout(4))
    twice = np.array([2, 0, 2, 0], dtype=np.int64)
    assert not slots.write(twice, _rows(twice))  # 2 rows: the file is not complete
    assert slots.written == 2 and not path.exists()
    assert list(slots.missing(np.arange(4, dtype=np.int64))) == [1, 3]
    assert slots.write(np.array([3, 1, 1], dtype=np.int64), _rows(np.array([3, 1, 1])))
    with NdfFile(path) as f:
        x, y = f.read_rows(np.arange(4))
    assert np.array_equal(x[:, 0], np.arange(4)) and np.array_equal(y[:, 0], 10 * np.arange(4))


@pytest.mark.parametrize("in_order_copy", [True, False])
def test_a_file_over_the_memory_bound_is_written_through_its_mapping_alike(tmp_path, monkeypatch,
                                                                          in_order_copy):
    import dataloader._ndf.slots as slots_module

    monkeypatch.setattr(slots_module, "BUFFER_MAX_BYTES", 0)  # rows go to the file's mapping
    if not in_order_copy:
        monkeypatch.setattr(slots_module, "MMAP_AUTO_MAX_BYTES", 0)  # no copy in order: msync
    path = tmp_path / "r.ndf"
    slots = RowSlots(path, _layout(50))
    order = np.random.default_rng(1).permutation(50).astype(np.int64)
    assert not slots.write(order[:30], _rows(order[:30]))
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] and not path.exists()
    assert slots.write(order[30:], _rows(order[30:]))
    assert os.listdir(tmp_path) == ["r.ndf"]
    with NdfFile(path) as f:
        x, y = f.read_rows(np.arange(50))
    assert np.array_equal(x[:, 1], -np.arange(50)) and np.array_equal(y[:, 0], 10 * np.arange(50))
