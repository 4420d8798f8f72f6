"""benchmarks/bench_parquet.py runs at CI size and reports every contender's rows/s."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("pyarrow", reason="bench_parquet reads Parquet with pyarrow (the 'formats' extra)")

from benchmarks import bench_parquet  # noqa: E402 - after the skip: it imports pyarrow


@pytest.mark.timeout(120)
def test_bench_parquet_reports_rows_per_second(capsys):
    bench_parquet.main(["--rows", "2048", "--rounds", "1", "--torch-rows", "512", "--thrash-batches", "2"])
    out = json.loads(capsys.readouterr().out)
    rates = out["rows_per_s"]
    expected = {"ours seq 0w", "ours shuf 0w", "ours seq 2w", "ours shuf 2w", "ours shuf cache=2 0w",
                "pyarrow seq", "pyarrow+numpy shuf"}
    if importlib.util.find_spec("torch") is not None:
        expected |= {"torch naive 0w", "torch naive 2w"}
    assert set(rates) == expected and all(r > 0 for r in rates.values())
    assert out["rows"] == 2048 and len(out["load_average_at_start"]) == 3
