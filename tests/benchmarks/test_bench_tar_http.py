"""benchmarks/bench_tar_http.py runs at CI size and reports every contender's samples/s."""

from __future__ import annotations

import importlib.util
import json

import pytest

from benchmarks import bench_tar_http


@pytest.mark.timeout(120)
def test_bench_tar_http_reports_samples_per_second(capsys):
    bench_tar_http.main(["--shards", "2", "--per-shard", "8", "--sample-kib", "4", "--rounds", "1"])
    out = json.loads(capsys.readouterr().out)
    rates = out["samples_per_s"]
    expected = {"urlopen (before)", "retrying", "retrying, each shard cut once", "loader 2w"}
    if importlib.util.find_spec("aiohttp") is not None:
        expected |= {"aiohttp bridge"}
    assert set(rates) == expected and all(r > 0 for r in rates.values())
    assert out["samples"] == 16 and len(out["load_average_at_start"]) == 3


@pytest.mark.timeout(120)
def test_bench_tar_http_starts_its_plain_and_cutting_servers_through_the_harness(monkeypatch, capsys):
    started = []
    real = bench_tar_http.server_process

    def spy(script, *args):
        started.append(args[1:])  # args[0]: the shards' temporary folder
        return real(script, *args)

    monkeypatch.setattr(bench_tar_http, "server_process", spy)
    bench_tar_http.main(["--shards", "1", "--per-shard", "4", "--sample-kib", "4", "--rounds", "1"])
    assert started == [(), ("--cut",)]
    assert json.loads(capsys.readouterr().out)["samples"] == 4
