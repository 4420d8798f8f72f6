"""benchmarks/compare.py runs end to end on tiny sizes and prints its three tables."""

from __future__ import annotations

import re

import pytest
from conftest import run_python


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
