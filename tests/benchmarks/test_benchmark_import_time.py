"""benchmarks/import_time.py (``import dataloader`` against ``import numpy``) and the import-time
table that benchmarks/report.py renders from its JSON into docs/benchmarks.md."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = _load("benchmark_report_import", "report.py")
import_time = _load("benchmark_import_time", "import_time.py")

SAMPLE = {
    "interpreter": {"version": "3.13.5", "free_threaded": True, "numpy": "2.4.6"},
    "python": "/venv/bin/python",
    "started": "2026-01-02 03:04 UTC",
    "commit": "abc1234",
    "samples": 21,
    "median_ms": {"numpy": 100.0, "dataloader": 120.0},
    "ratio": 1.2,
    "limit_ratio": 1.3,
    "load_average": [0.5, 0.25, 0.125],
    "load_average_end": [0.5, 0.25, 0.125],
    "machine": {"arch": "x86_64", "cpus": 2, "platform": "Linux"},
    "samples_us": {"numpy": [100000], "dataloader": [120000]},
}
ROW = re.compile(r"^\| (\S+), numpy (\S+) \| ([\d.]+) ms \| ([\d.]+) ms \| ([\d.]+)x \(([\d.]+)x\) \| (.+) \|$", re.M)


def sample_311() -> dict:
    run = json.loads(json.dumps(SAMPLE))
    run["interpreter"].update(version="3.11.7", free_threaded=False)
    return run


def test_renders_one_row_per_interpreter_between_the_markers():
    text = report.render_import([SAMPLE, sample_311()])
    assert text.startswith(report.IMPORT_BEGIN) and text.endswith(report.IMPORT_END)
    rows = ROW.findall(text)
    assert [r[:6] for r in rows] == [
        ("3.11.7", "2.4.6", "100.0", "120.0", "1.20", "1.3"),
        ("3.13.5t", "2.4.6", "100.0", "120.0", "1.20", "1.3"),
    ]
    assert "commit `abc1234`, median of 21, load 0.50 / 0.25 / 0.12" in rows[0][6]


def test_main_splices_both_generated_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "IMPORT_RESULTS", tmp_path / "import_time")
    report.IMPORT_RESULTS.mkdir()
    (report.IMPORT_RESULTS / "3.13t.json").write_text(json.dumps(SAMPLE))
    compare_run = json.loads((REPO / "benchmarks" / "results" / "3.11.json").read_text())
    compare_json = tmp_path / "3.11.json"
    compare_json.write_text(json.dumps(compare_run))
    doc = tmp_path / "doc.md"
    doc.write_text(f"a\n{report.BEGIN}\nold\n{report.END}\nb\n{report.IMPORT_BEGIN}\nold\n{report.IMPORT_END}\nc\n")
    args = [str(compare_json), "--doc", str(doc)]
    assert report.main([*args, "--check"]) == 1
    assert report.main(args) == 0
    out = doc.read_text()
    assert report.generated(out, report.IMPORT_BEGIN, report.IMPORT_END) == report.render_import([SAMPLE])
    assert report.generated(out) == report.render([compare_run])
    assert out.startswith("a\n") and "\nb\n" in out and out.endswith("\nc\n")
    assert report.main([*args, "--check"]) == 0


def test_docs_import_table_matches_the_saved_results():
    doc = (REPO / "docs" / "benchmarks.md").read_text()
    runs = report.load_runs(sorted(report.IMPORT_RESULTS.glob("*.json")))
    assert sorted(report.import_label(r) for r in runs) == ["3.11", "3.13t"]
    section = report.generated(doc, report.IMPORT_BEGIN, report.IMPORT_END)
    assert section == report.render_import(runs), "docs/benchmarks.md is stale: run python benchmarks/report.py"
    for run in runs:
        assert run["ratio"] == pytest.approx(run["median_ms"]["dataloader"] / run["median_ms"]["numpy"])


@pytest.mark.timeout(120)
def test_import_us_reads_the_top_level_figure_and_refuses_a_failed_import():
    assert import_time.import_us(sys.executable, "json") > 0
    with pytest.raises(RuntimeError, match="no_such_module_xyz"):
        import_time.import_us(sys.executable, "no_such_module_xyz")


@pytest.mark.timeout(120)
def test_measure_alternates_and_records_every_sample():
    times = import_time.measure(sys.executable, 2)
    assert list(times) == ["numpy", "dataloader"]
    assert all(len(v) == 2 and min(v) > 0 for v in times.values())
