"""benchmarks/report.py renders compare.py's JSON into docs/benchmarks.md's tables (no benchmark runs)."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("benchmark_report", REPO / "benchmarks" / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)

SAMPLE = {
    "interpreter": {"implementation": "CPython", "version": "3.13.5", "free_threaded": True, "gil_enabled": False},
    "numpy": "2.4.6",
    "torch": None,
    "machine": {"cpu": "AMD EPYC", "arch": "x86_64", "cpus": 2, "platform": "Linux-6.18-x86_64"},
    "load_average": [1.5, 1.25, 1.0],
    "load_average_end": [2.0, 1.5, 1.0],
    "parallelism": 1.9,
    "commit": "abc1234",
    "command": "python benchmarks/compare.py --only W3",
    "epochs": 3,
    "started": "2026-01-02 03:04 UTC",
    "seconds": 12.3,
    "note": "test sample",
    "workloads": {
        "W3": {
            "title": "W3: pure-Python items (~30 µs), 20,000 items, batch 64",
            "rows": [
                {"method": "plain loop [ds[i] for i in batch]", "items_per_s": 30000.0, "note": "baseline"},
                {"method": "dataloader, 0 workers", "items_per_s": 29700.0, "note": ""},
                {"method": "dataloader, 1 worker", "items_per_s": 27000.0, "note": ""},
                {"method": "dataloader, 2 workers", "items_per_s": 54000.0, "note": ""},
                {"method": "dataloader, auto workers", "items_per_s": 51300.0, "note": "settled on 2 workers"},
            ],
        }
    },
}
TABLE_ROW = re.compile(r"^\| (.+?) \| ([\d,]+) \| ([\d.]+)x \| (.*?) \|$", re.M)


def sample_311() -> dict:
    run = copy.deepcopy(SAMPLE)
    run["interpreter"].update(version="3.11.7", free_threaded=False, gil_enabled=True)
    run["torch"] = "2.13.0+cpu"
    return run


def test_renders_one_table_per_workload_with_ratios_and_the_stamp():
    text = report.render([SAMPLE])
    assert text.startswith(report.BEGIN) and text.endswith(report.END)
    assert "### CPython 3.13.5t (free-threaded, GIL disabled), numpy 2.4.6, no torch" in text
    assert "commit `abc1234`" in text and "`python benchmarks/compare.py --only W3`" in text
    assert "AMD EPYC (x86_64), 2 CPUs" in text
    assert "at start 1.50 / 1.25 / 1.00, at end 2.00 / 1.50 / 1.00; parallelism probe 1.90x" in text
    assert "- note: test sample" in text
    assert "#### W3: pure-Python items (~30 µs), 20,000 items, batch 64" in text
    rows = TABLE_ROW.findall(text)
    assert [(m, n, r) for m, n, r, _ in rows] == [
        ("plain loop [ds[i] for i in batch]", "30,000", "1.00"),
        ("dataloader, 0 workers", "29,700", "0.99"),
        ("dataloader, 1 worker", "27,000", "0.90"),
        ("dataloader, 2 workers", "54,000", "1.80"),
        ("dataloader, auto workers", "51,300", "1.71"),
    ]
    assert "| W3 | 0.99x / 0.90x / 1.80x / 1.71x | 0.91x / 1.82x / 1.73x | 0.95x |" in text


def test_sections_follow_the_interpreters_and_splice_between_the_markers(tmp_path):
    text = report.render([SAMPLE, sample_311()])
    assert text.index("### CPython 3.11.7 (GIL)") < text.index("### CPython 3.13.5t")
    assert "torch 2.13.0+cpu" in text
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\nbefore\n\n{report.BEGIN}\nold\n{report.END}\n\nafter\n")
    files = []
    for run in (SAMPLE, sample_311()):
        files.append(tmp_path / f"{report.label(run)}.json")
        files[-1].write_text(json.dumps(run))
    assert report.main([*map(str, files), "--doc", str(doc), "--check"]) == 1
    assert report.main([*map(str, files), "--doc", str(doc)]) == 0
    out = doc.read_text()
    assert out.startswith("# Title\n\nbefore\n\n") and out.endswith("\n\nafter\n")
    assert report.generated(out) == text
    assert report.main([*map(str, files), "--doc", str(doc), "--check"]) == 0


def test_docs_benchmarks_generated_section_parses_and_matches_the_saved_results():
    doc = (REPO / "docs" / "benchmarks.md").read_text()
    assert doc.count(report.BEGIN) == 1 and doc.count(report.END) == 1
    section = report.generated(doc)
    runs = report.load_runs(sorted((REPO / "benchmarks" / "results").glob("*.json")))
    assert sorted(report.label(r) for r in runs) == ["3.11", "3.13t"]
    assert section == report.render(runs), "docs/benchmarks.md is stale: run python benchmarks/report.py"
    parts = re.split(r"^### ", section, flags=re.M)[1:]
    assert [p.split()[1] for p in parts] == [r["interpreter"]["version"] + ("t" if r["interpreter"]["free_threaded"] else "")
                                              for r in sorted(runs, key=report.label)]
    for part in parts:
        for field in ("- run: ", ", commit `", "- machine: ", "- load average (1 / 5 / 15 min) at start "):
            assert field in part
        tables = re.split(r"^#### ", part, flags=re.M)[1:]
        assert tables[-1].startswith("Workers, as ratios")
        assert [t.split(":")[0] for t in tables[:-1]] == ["W1", "W2", "W3", "W4"]
        for table in tables[:-1]:
            rows = TABLE_ROW.findall(table)
            assert len(rows) >= 5 and rows[0][3] == "baseline" and rows[0][2] == "1.00"
            base = float(rows[0][1].replace(",", ""))
            for _, n, ratio, _ in rows:
                # items/s are printed rounded to units, so small counts (W4) carry ~0.3% more
                assert float(ratio) == pytest.approx(float(n.replace(",", "")) / base, rel=0.01, abs=0.006)
