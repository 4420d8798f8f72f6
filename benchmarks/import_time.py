"""How long ``import dataloader`` takes against ``import numpy``, each in a fresh interpreter.

Issue 21 asks ``import dataloader`` to stay within 1.3x ``import numpy`` on both
interpreters.  Each sample starts a new ``python -X importtime -c "import <module>"``
(``-X importtime`` reports the cumulative microseconds of the top-level import, so the
interpreter's own start-up is left out) and the two modules alternate, sample by
sample, so load that comes and goes hits both alike.  The figure is the median of
``--samples`` samples each; the ratio is median(dataloader) / median(numpy).
``import dataloader`` includes numpy, so the ratio is at least 1.

Command lines, from the repository root after building in place with the same
interpreter (``python setup.py build_ext --inplace -q``)::

    PYTHONPATH=. python benchmarks/import_time.py               # 21 samples each
    PYTHONPATH=. python benchmarks/import_time.py --json out.json --samples 41

``benchmarks/report.py --import-time PYTHON`` runs this script and shows its figure in
docs/benchmarks.md.  On a shared 2-core machine single samples move by 2x with other
load: read the load average printed beside the figure, and compare runs made under
similar load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODULES = ("numpy", "dataloader")
LIMIT_RATIO = 1.3  # issue 21: import dataloader <= 1.3x import numpy


def import_us(python: str, module: str) -> int:
    """Microseconds ``import module`` takes in a fresh ``python`` (``-X importtime``'s
    cumulative figure for the top-level module).

    Raises:
        RuntimeError: the import failed or printed no figure for ``module``.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False,
    )
    for line in done.stderr.splitlines() if done.returncode == 0 else ():
        fields = [f.strip() for f in line.split("|")]
        if len(fields) == 3 and fields[2] == module:
            return int(fields[1])
    raise RuntimeError(f"`{python} -X importtime -c 'import {module}'` gave no figure:\n{done.stderr[-2000:]}")


def measure(python: str, samples: int) -> dict[str, list[int]]:
    """``samples`` import times (µs) per module, the modules alternating sample by sample."""
    times: dict[str, list[int]] = {m: [] for m in MODULES}
    for m in MODULES:  # one unrecorded round: fills the page cache and writes .pyc files
        import_us(python, m)
    for i in range(samples):
        order = MODULES if i % 2 == 0 else MODULES[::-1]
        for m in order:
            times[m].append(import_us(python, m))
    return times


def interpreter(python: str) -> dict:
    code = (
        "import json, platform, sys, sysconfig, numpy\n"
        "print(json.dumps({'version': platform.python_version(),"
        " 'free_threaded': bool(sysconfig.get_config_var('Py_GIL_DISABLED')), 'numpy': numpy.__version__}))"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout)


def run(python: str, samples: int) -> dict:
    """The figures as one JSON-able record: medians (ms), ratio, load, machine, commit."""
    load_start = list(os.getloadavg())
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    times = measure(python, samples)
    medians = {m: statistics.median(t) / 1000 for m, t in times.items()}
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    return {
        "interpreter": interpreter(python),
        "python": python,
        "started": started,
        "commit": commit or None,
        "samples": samples,
        "median_ms": medians,
        "ratio": medians["dataloader"] / medians["numpy"],
        "limit_ratio": LIMIT_RATIO,
        "load_average": load_start,
        "load_average_end": list(os.getloadavg()),
        "machine": {"arch": platform.machine(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "samples_us": times,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=sys.executable, help="the interpreter to time (default: this one)")
    p.add_argument("--samples", type=int, default=21, help="fresh interpreters per module (default 21)")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    args = p.parse_args(argv)
    if args.samples < 1:
        p.error(f"--samples must be >= 1, got {args.samples}")
    result = run(args.python, args.samples)
    it, ms = result["interpreter"], result["median_ms"]
    load = " / ".join(f"{x:.2f}" for x in result["load_average"])
    print(f"Python {it['version']}{'t' if it['free_threaded'] else ''}, numpy {it['numpy']}, "
          f"median of {args.samples}: import numpy {ms['numpy']:.1f} ms, import dataloader "
          f"{ms['dataloader']:.1f} ms, ratio {result['ratio']:.2f}x (limit {LIMIT_RATIO}x); "
          f"load average {load}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
