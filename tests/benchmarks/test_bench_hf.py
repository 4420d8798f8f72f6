"""benchmarks/bench_hf.py runs at CI size and reports every contender's rows/s."""

from __future__ import annotations

import importlib.util
import json

import pytest

pytest.importorskip("datasets", reason="bench_hf needs datasets (does not install on 3.13t: no PyYAML cp313t wheel)")

from benchmarks import bench_hf  # noqa: E402 - after the skip: it imports datasets


@pytest.mark.timeout(180)
def test_bench_hf_reports_rows_per_second(capsys):
    bench_hf.main(["--rows", "1024", "--rounds", "1"])
    out = json.loads(capsys.readouterr().out)
    rates = out["rows_per_s"]
    faces = ["ours"] + (["ours-torch", "torch"] if importlib.util.find_spec("torch") is not None else [])
    expected = {f"{face} {order} {w}w" for face in faces for order in ("seq", "shuf") for w in (0, 2)}
    assert set(rates) == expected and all(r > 0 for r in rates.values())
    assert out["rows"] == 1024 and len(out["load_average_at_start"]) == 3
