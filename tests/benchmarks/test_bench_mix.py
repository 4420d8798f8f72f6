"""benchmarks/bench_mix.py runs at CI size and reports every contender's samples/s."""

from __future__ import annotations

import importlib.util
import json

import pytest

from benchmarks import bench_mix


@pytest.mark.timeout(120)
def test_bench_mix_reports_samples_per_second(capsys):
    bench_mix.main(["--rows", "3000", "--rounds", "1"])
    out = json.loads(capsys.readouterr().out)
    rates = out["samples_per_s"]
    expected = {f"{who} {kind} {w}w" for who in ("one", "mix") for kind in ("ints", "array") for w in (0, 2)}
    expected.add("placement")
    if importlib.util.find_spec("datasets") is not None:
        expected |= {"hf interleave", "hf one"}
    assert set(rates) == expected and all(r > 0 for r in rates.values())
    assert out["rows"] == 3000 and len(out["load_average_at_start"]) == 3
