"""benchmarks/compare.py runs end to end on tiny sizes and prints its three tables."""

from __future__ import annotations

import json
import os
import platform
import re

import pytest
from tests._support import run_python


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_compare_prints_every_workload_table():
    done = run_python(
        "benchmarks/compare.py", "--rows", "3000", "--items", "300", "--epochs", "1", timeout=280
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for title in (
        "### W1: in-memory rows, 3,000 x 32",
        "### W2: page-cached .ndf, 3,000 rows",
        "### W3: pure-Python",
    ):
        assert title in out
    rows = re.findall(r"^\| (.+?) \| ([\d,]+) \| ([\d.]+)x \|", out, re.M)
    names = [r[0] for r in rows]
    for name in (
        "dataloader ArrayDataset, 2 workers",
        "dataloader NdfDataset, 2 workers",
        "dataloader, 2 workers",
    ):
        assert name in names
    assert all(int(r[1].replace(",", "")) > 0 for r in rows)
    assert [
        r[2] for r in rows if r[0].startswith(("NumPy loop", "numpy.memmap", "plain loop"))
    ] == ["1.00"] * 3


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_compare_prints_auto_rows_with_their_settled_count_and_the_worker_ratios(tmp_path):
    done = run_python(
        "benchmarks/compare.py", "--rows", "3000", "--items", "300", "--epochs", "1", "--only", "W1,W3",
        "--no-torch", "--json", str(tmp_path / "run.json"), timeout=280,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "dataloader ArrayDataset, auto workers" in out and "dataloader, 1 worker |" in out
    assert len(re.findall(r"auto workers \| .* \| (settled inline \(0 workers\)|settled on \d workers?) \|$", out, re.M)) == 2
    assert "### Workers: ratios from this run" in out
    ratios = re.findall(r"^\| (W\d) \| (.+?) \| (.+?) \| ([\d.]+)x \|$", out, re.M)
    assert [r[0] for r in ratios] == ["W1", "W3"]
    assert all(len(r[1].split(" / ")) == 4 and len(r[2].split(" / ")) == 3 for r in ratios)
    # --json: the same rows, with what benchmarks/report.py stamps (machine, load, commit)
    run = json.loads((tmp_path / "run.json").read_text())
    assert list(run["workloads"]) == ["W1", "W3"] and run["torch"] is None and run["epochs"] == 1
    assert run["machine"]["cpus"] == os.cpu_count() and len(run["load_average"]) == 3
    assert run["interpreter"]["version"] == platform.python_version() and "commit" in run
    table_rows = re.findall(r"^\| (.+?) \| ([\d,]+) \| [\d.]+x \|", out, re.M)
    json_rows = [(r["method"], f"{r['items_per_s']:,.0f}") for w in run["workloads"].values() for r in w["rows"]]
    assert json_rows == table_rows


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_scaling_prints_one_row_per_worker_count():
    done = run_python(
        "benchmarks/scaling.py", "--max-workers", "3", "--rows", "2000", "--items", "200", "--epochs", "1",
        "--only", "W1,W3", timeout=280,
    )
    assert done.returncode == 0, done.stderr
    labels = re.findall(r"^\| (\d+|auto \(settled on \d+ of \d+\)) \| [\d,]+ \|", done.stdout, re.M)
    assert [label.split()[0] for label in labels] == ["0", "1", "2", "3", "auto"] * 2


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_thread_penalty_prints_one_row_per_kind_of_work():
    done = run_python("benchmarks/thread_penalty.py", "--rounds", "1", timeout=280)
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\| ([^|]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \|$", done.stdout, re.M)
    assert [r[0] for r in rows] == [
        "W3 item (allocates ints)", "W3 loop, small ints", "sha256 of 64 KiB (C)", "zlib level 6 of 64 KiB (C)",
    ]
    for _, one, two, ratio, _wall in rows:
        assert float(one) > 0 and float(two) > 0
        assert float(ratio) == pytest.approx(float(two) / float(one), abs=0.002)
