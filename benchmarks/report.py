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

Arguments after ``--`` go to compare.py.  Rendering needs only the standard library.
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


def splice(doc: str, section: str) -> str:
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + section + doc[end:]


def generated(doc: str) -> str:
    """The doc's current text between (and including) the markers."""
    return doc[doc.index(BEGIN) : doc.index(END) + len(END)]


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
    args = p.parse_args(argv)
    for python in args.run:
        run_compare(python, compare_args, args.note)
    paths = args.json or sorted(RESULTS.glob("*.json"))
    if not paths:
        p.error("no JSON: pass files, or --run PYTHON, or save them in benchmarks/results/")
    section = render(load_runs(paths))
    doc = args.doc.read_text()
    if args.check:
        if generated(doc) != section:
            print(f"{args.doc}: tables differ from {', '.join(map(str, paths))}; run benchmarks/report.py",
                  file=sys.stderr)
            return 1
        return 0
    args.doc.write_text(splice(doc, section))
    print(f"wrote {args.doc} from {', '.join(str(p) for p in paths)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
