"""benchmarks/bench_tar.py runs at CI size and reports every contender's samples/s."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("PIL", reason="bench_tar writes and decodes JPEGs with Pillow (the 'image' extra)")

from benchmarks import bench_tar  # noqa: E402 - after the skip: it imports Pillow


@pytest.mark.timeout(120)
def test_bench_tar_reports_samples_per_second(capsys):
    bench_tar.main(["--shards", "2", "--per-shard", "16", "--rounds", "1", "--workers", "0"])
    out = json.loads(capsys.readouterr().out)
    rates = out["samples_per_s"]
    expected = {"ours 0w"}
    if importlib.util.find_spec("torch") is not None and importlib.util.find_spec("webdataset") is not None:
        expected |= {"wds+torch 0w"}
    assert set(rates) == expected and all(r > 0 for r in rates.values())
    assert out["samples"] == 32 and len(out["load_average_at_start"]) == 3
