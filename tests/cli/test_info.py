"""``dataloader info``: shape, size, first rows, streamed column stats (cli/info.py, _stats.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dataloader.ndf as ndf
from dataloader.__main__ import main
from dataloader.cli import _stats


def stats_table(out: str) -> dict[str, tuple[float, float, float, int]]:
    rows = {}
    for m in re.finditer(r"^  ([xy]\[\d+\])\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)$", out, re.M):
        rows[m[1]] = (float(m[2]), float(m[3]), float(m[4]), int(m[5]))
    return rows


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((257, 6)) * [1, 10, 100, 1, 1, 1]
    y = rng.integers(0, 5, (257, 1)).astype(float)
    path = tmp_path / "d.ndf"
    ndf.save_ndf(path, x, y)
    return path, x, y


def test_info_prints_shape_size_rows_and_stats(data, capsys):
    path, x, y = data
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rows (n)       257" in out
    assert "features (d)   6" in out
    assert "labels (l)     1" in out
    size = 28 + 257 * 7 * 8
    assert f"size on disk   {size:,} bytes" in out
    assert out.count("\n  [") == 5  # first 5 rows
    assert f"{x[0, 0]:.4f}"[:6] in out
    table = stats_table(out)
    assert set(table) == {f"x[{j}]" for j in range(6)} | {"y[0]"}
    full = np.hstack([x, y])
    for j, name in enumerate([f"x[{j}]" for j in range(6)] + ["y[0]"]):
        lo, mean, hi, nans = table[name]
        np.testing.assert_allclose(
            [lo, mean, hi], [full[:, j].min(), full[:, j].mean(), full[:, j].max()], rtol=1e-5
        )
        assert nans == 0
    assert "labels: y[0] takes 5 distinct integers from 0 to 4" in out


def test_column_stats_over_many_blocks_with_nans(tmp_path, monkeypatch):
    monkeypatch.setattr(_stats, "CHUNK_BYTES", 8 * 4 * 10)  # 10 rows per block
    rng = np.random.default_rng(4)
    x = rng.standard_normal((95, 3))
    x[::7, 1] = np.nan
    x[:, 2] = np.nan
    y = rng.standard_normal((95, 1))
    ndf.save_ndf(tmp_path / "d.ndf", x, y)
    with ndf.open_ndf(tmp_path / "d.ndf") as f:
        blocks = []
        s = _stats.column_stats(f, blocks.append)
    assert blocks == [10] * 9 + [5]
    full = np.hstack([x, y])
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        np.testing.assert_allclose(s.minimum, np.nanmin(full, axis=0), equal_nan=True)
        np.testing.assert_allclose(s.maximum, np.nanmax(full, axis=0), equal_nan=True)
        np.testing.assert_allclose(s.mean, np.nanmean(full, axis=0), equal_nan=True)
    np.testing.assert_array_equal(s.nan_count, np.isnan(full).sum(axis=0))
    assert s.distinct is None or len(s.distinct) == 95


def test_info_options(data, capsys):
    path, _, _ = data
    assert main(["info", str(path), "--head", "0", "--max-columns", "2"]) == 0
    out = capsys.readouterr().out
    assert "first" not in out
    assert set(stats_table(out)) == {"x[0]", "x[1]", "y[0]"}
    assert "4 more feature columns (--max-columns 0 lists them all)" in out
    assert main(["info", str(path), "--no-stats", "--head", "2"]) == 0
    out = capsys.readouterr().out
    assert "column statistics" not in out
    assert out.count("\n  [") == 2


def test_info_without_labels_and_with_zero_rows(tmp_path, capsys):
    ndf.save_ndf(tmp_path / "a.ndf", np.arange(6.0).reshape(3, 2))
    assert main(["info", str(tmp_path / "a.ndf")]) == 0
    out = capsys.readouterr().out
    assert "labels (l)     0" in out
    assert set(stats_table(out)) == {"x[0]", "x[1]"}
    with ndf.NdfWriter(tmp_path / "empty.ndf", 2, 1):
        pass
    assert main(["info", str(tmp_path / "empty.ndf")]) == 0
    assert "rows (n)       0" in capsys.readouterr().out


def test_info_bad_files(tmp_path, capsys):
    assert main(["info", str(tmp_path / "missing.ndf")]) == 2
    assert "cannot open" in capsys.readouterr().err
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    assert main(["info", str(tmp_path / "t.csv")]) == 2
    err = capsys.readouterr().err
    assert "is not an .ndf file" in err and err.count("\n") == 1
    ndf.save_ndf(tmp_path / "d.ndf", np.ones((4, 2)))
    raw = (tmp_path / "d.ndf").read_bytes()
    (tmp_path / "cut.ndf").write_bytes(raw[:-8])
    assert main(["info", str(tmp_path / "cut.ndf")]) == 2
    assert "cut.ndf" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "d.ndf"), "--head", "-1"]) == 2
    assert "--head must be >= 0" in capsys.readouterr().err
