"""Render docs/benchmarks.md's tables from ``benchmarks/compare.py --json`` output.

The tables of docs/benchmarks.md sit between two markers and are written only by this
script, from the JSON files in ``benchmarks/results/`` (one per interpreter), so the
doc shows one current run per interpreter, stamped with its machine, load and commit::

    # run compare.py with each interpreter (built in place), save its JSON, render the doc
    PYTHONPATH=. python benchmarks/report.py --run python3.11 --run python3.13t \\
        --note "idle 2-core VM" -- --rows 300000 --items 6000
    # render again from the saved JSON (no benchmark runs)
    python benchmarks/report.py
    # exit 1 if the doc differs from what the saved JSON renders
    python benchmarks/report.py --check
    # time `import dataloader` against `import numpy` (benchmarks/import_time.py) per interpreter
    python benchmarks/report.py --import-time python3.11 --import-time python3.13t

Arguments after ``--`` go to compare.py.  Rendering needs only the standard library.  The import
times have their own markers and JSON (``benchmarks/results/import_time/``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "benchmarks.md"
RESULTS = REPO / "benchmarks" / "results"
BEGIN = "<!-- BEGIN TABLES: written by benchmarks/report.py from benchmarks/results/*.json; do not edit -->"
END = "<!-- END TABLES -->"
IMPORT_RESULTS = RESULTS / "import_time"
IMPORT_BEGIN = (
    "<!-- BEGIN IMPORT TIME: written by benchmarks/report.py from benchmarks/results/import_time/*.json;"
    " do not edit -->"
)
IMPORT_END = "<!-- END IMPORT TIME -->"
WORKERS = ("0", "1", "2", "auto")


def label(run: dict) -> str:
    """"3.11" or "3.13t": the file name and the order of the sections."""
    major_minor = ".".join(run["interpreter"]["version"].split(".")[:2])
    return major_minor + ("t" if run["interpreter"]["free_threaded"] else "")


def heading(run: dict) -> str:
    it = run["interpreter"]
    gil = "free-threaded, GIL disabled" if it["free_threaded"] and not it["gil_enabled"] else "GIL"
    torch = f"torch {run['torch']}" if run.get("torch") else "no torch"
    return f"{it['implementation']} {it['version']}{'t' if it['free_threaded'] else ''} ({gil}), numpy {run['numpy']}, {torch}"


def stamp(run: dict) -> list[str]:
    m = run["machine"]
    load = " / ".join(f"{x:.2f}" for x in run["load_average"])
    end = " / ".join(f"{x:.2f}" for x in run.get("load_average_end", []))
    lines = [
        f"- run: {run['started']}, commit `{run.get('commit') or 'unknown'}`, "
        f"workloads took {run['seconds']:.0f} s; `{run['command']}` (median of {run['epochs']} epochs after a warm-up)",
        f"- machine: {m['cpu'] or 'unknown CPU'} ({m['arch']}), {m['cpus']} CPUs; {m['platform']}",
        f"- load average (1 / 5 / 15 min) at start {load}" + (f", at end {end}" if end else "")
        + f"; parallelism probe {run['parallelism']:.2f}x (2.00x = two idle cores)",
    ]
    if run.get("note"):
        lines.append(f"- note: {run['note']}")
    return lines


def workload_table(title: str, rows: list[dict]) -> list[str]:
    base = rows[0]["items_per_s"]
    out = [f"#### {title}", "", "| method | items/s | ratio to baseline | note |", "|---|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['method']} | {r['items_per_s']:,.0f} | {r['items_per_s'] / base:.2f}x | {r['note']} |")
    return out


def ours(rows: list[dict]) -> dict[str, float]:
    """This loader's rows by worker setting ("0", "1", "2", "auto")."""
    return {
        r["method"].rsplit(", ", 1)[-1].split()[0]: r["items_per_s"]
        for r in rows
        if r["method"].startswith("dataloader")
    }


def ratio_table(run: dict) -> list[str]:
    out = [
        "#### Workers, as ratios",
        "",
        "| workload | vs baseline: 0 / 1 / 2 / auto workers | vs 0 workers: 1 / 2 / auto | auto / best fixed |",
        "|---|---|---|---:|",
    ]
    for key, w in run["workloads"].items():
        o, base = ours(w["rows"]), w["rows"][0]["items_per_s"]
        if "0" not in o:
            continue
        to_base = " / ".join(f"{o[k] / base:.2f}x" for k in WORKERS if k in o)
        to_zero = " / ".join(f"{o[k] / o['0']:.2f}x" for k in WORKERS[1:] if k in o)
        fixed = [o[k] for k in WORKERS[:3] if k in o]
        auto = f"{o['auto'] / max(fixed):.2f}x" if "auto" in o else "-"
        out.append(f"| {key} | {to_base} | {to_zero} | {auto} |")
    return out


def render(runs: list[dict]) -> str:
    """The text between the markers, for these runs (sorted by interpreter label)."""
    out = [BEGIN, ""]
    for run in sorted(runs, key=label):
        out += [f"### {heading(run)}", "", *stamp(run), ""]
        for w in run["workloads"].values():
            out += [*workload_table(w["title"], w["rows"]), ""]
        out += [*ratio_table(run), ""]
    out.append(END)
    return "\n".join(out)


def import_label(run: dict) -> str:
    """"3.11" or "3.13t" for an import_time.py record."""
    it = run["interpreter"]
    return ".".join(it["version"].split(".")[:2]) + ("t" if it["free_threaded"] else "")


def render_import(runs: list[dict]) -> str:
    """The import-time table between its markers: one row per interpreter (import_time.py's JSON)."""
    out = [
        IMPORT_BEGIN,
        "",
        "| interpreter | import numpy | import dataloader | ratio (limit) | run |",
        "|---|---:|---:|---:|---|",
    ]
    for run in sorted(runs, key=import_label):
        it, ms = run["interpreter"], run["median_ms"]
        load = " / ".join(f"{x:.2f}" for x in run["load_average"])
        out.append(
            f"| {it['version']}{'t' if it['free_threaded'] else ''}, numpy {it['numpy']} "
            f"| {ms['numpy']:.1f} ms | {ms['dataloader']:.1f} ms | {run['ratio']:.2f}x ({run['limit_ratio']}x) "
            f"| {run['started']}, commit `{run.get('commit') or 'unknown'}`, median of {run['samples']}, "
            f"load {load} |"
        )
    out += ["", IMPORT_END]
    return "\n".join(out)


def splice(doc: str, section: str, begin: str = BEGIN, end: str = END) -> str:
    start, stop = doc.index(begin), doc.index(end) + len(end)
    return doc[:start] + section + doc[stop:]


def generated(doc: str, begin: str = BEGIN, end: str = END) -> str:
    """The doc's current text between (and including) the markers."""
    return doc[doc.index(begin) : doc.index(end) + len(end)]


def load_runs(paths: list[Path]) -> list[dict]:
    return [json.loads(p.read_text()) for p in paths]


def run_compare(python: str, compare_args: list[str], note: str) -> Path:
    """Run compare.py under ``python`` (PYTHONPATH = the repository), save its JSON in RESULTS."""
    RESULTS.mkdir(exist_ok=True)
    tmp = RESULTS / f".run-{os.getpid()}.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [python, str(REPO / "benchmarks" / "compare.py"), *compare_args, "--json", str(tmp)]
    print("$", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    run = json.loads(tmp.read_text())
    tmp.unlink()
    run["command"] = run["command"].replace(f" --json {tmp}", "")
    if note:
        run["note"] = note
    path = RESULTS / f"{label(run)}.json"
    path.write_text(json.dumps(run, indent=1) + "\n")
    return path


def run_import_time(python: str) -> Path:
    """Run import_time.py for ``python``; save its JSON in IMPORT_RESULTS as ``<label>.json``."""
    IMPORT_RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = IMPORT_RESULTS / f".run-{os.getpid()}.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "import_time.py"), "--python", python, "--json", str(tmp)]
    print("$", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=REPO, check=True)
    run = json.loads(tmp.read_text())
    tmp.unlink()
    path = IMPORT_RESULTS / f"{import_label(run)}.json"
    path.write_text(json.dumps(run, indent=1) + "\n")
    return path


def sections(doc: str, paths: list[Path]) -> list[tuple[str, str, str]]:
    """(begin, end, text) of each generated part the doc has markers for."""
    out = [(BEGIN, END, render(load_runs(paths)))]
    import_paths = sorted(IMPORT_RESULTS.glob("*.json"))
    if IMPORT_BEGIN in doc and import_paths:
        out.append((IMPORT_BEGIN, IMPORT_END, render_import(load_runs(import_paths))))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    compare_args = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("json", nargs="*", type=Path, help="compare.py --json files (default: benchmarks/results/*.json)")
    p.add_argument("--run", action="append", default=[], metavar="PYTHON",
                   help="run compare.py with this interpreter first and save its JSON (repeatable)")
    p.add_argument("--note", default="", help="with --run: a line about the run, shown under its stamp")
    p.add_argument("--doc", type=Path, default=DOC, help="the Markdown file with the markers")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the doc is out of date")
    p.add_argument("--import-time", action="append", default=[], metavar="PYTHON",
                   help="run benchmarks/import_time.py with this interpreter first and save its JSON (repeatable)")
    args = p.parse_args(argv)
    for python in args.run:
        run_compare(python, compare_args, args.note)
    for python in args.import_time:
        run_import_time(python)
    paths = args.json or sorted(RESULTS.glob("*.json"))
    if not paths:
        p.error("no JSON: pass files, or --run PYTHON, or save them in benchmarks/results/")
    doc = args.doc.read_text()
    parts = sections(doc, paths)
    if args.check:
        if any(generated(doc, begin, end) != text for begin, end, text in parts):
            print(f"{args.doc}: tables differ from {', '.join(map(str, paths))} or {IMPORT_RESULTS}; "
                  "run benchmarks/report.py", file=sys.stderr)
            return 1
        return 0
    for begin, end, text in parts:
        doc = splice(doc, text, begin, end)
    args.doc.write_text(doc)
    print(f"wrote {args.doc} from {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
