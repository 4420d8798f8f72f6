"""Sort ThreadSanitizer reports: ``python tools/tsan_reports.py LOGDIR [MODULE ...]``.

Reads every ``LOGDIR/tsan.<pid>`` (TSAN_OPTIONS=log_path=LOGDIR/tsan). A report (one
``WARNING: ThreadSanitizer:`` block up to its ``SUMMARY:`` line) is *ours* when a frame's
source is in ``dataloader/_native/`` or its module is one of the MODULE file names (our
extensions, e.g. ``_ring.cpython-313t-x86_64-linux-gnu.so``); any other report (CPython,
NumPy, libc only) is counted and its summary line printed. Prints the reports that are ours
in full and the suppressions that matched, with their counts. Exits 1 if one is ours.
Used by tools/tsan-check.
"""

from __future__ import annotations

import pathlib
import re
import sys

REPORT = re.compile(r"WARNING: ThreadSanitizer:.*?SUMMARY: ThreadSanitizer:[^\n]*", re.S)
USED = re.compile(r"^\s*(\d+) (\w+:\S+)$", re.M)  # after "ThreadSanitizer: Matched N suppressions"


def main(logdir: str, *modules: str) -> int:
    logs = sorted(pathlib.Path(logdir).glob("tsan.*"))
    marks = ["dataloader/_native/", *(f"({m}+" for m in modules)]
    ours, other, used = [], [], {}
    for log in logs:
        text = log.read_text(errors="replace")
        for block in REPORT.findall(text):
            (ours if any(m in block for m in marks) else other).append((log.name, block))
        for n, name in USED.findall(text.partition("ThreadSanitizer: Matched")[2]):
            used[name] = used.get(name, 0) + int(n)
    print(f"tsan-check: {len(logs)} log file(s), {len(ours)} report(s) in our code, {len(other)} elsewhere")
    for name, block in other:
        print(f"tsan-check: not ours ({name}): {block.splitlines()[-1]}")
    for name, block in ours:
        print(f"----- {name}\n{block}\n")
    for name, n in sorted(used.items(), key=lambda kv: -kv[1]):
        print(f"tsan-check: suppressed {n:6d} x {name}")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
