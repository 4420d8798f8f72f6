"""Helpers of the ``dataloader convert`` tests: run the command, write a CSV, read an .ndf back,
check a clean failure."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

import dataloader.ndf as ndf
from dataloader.__main__ import main


def read_back(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with ndf.open_ndf(path) as f:
        return f.read_rows(np.arange(f.n))


def convert(*args: object) -> int:
    return main(["convert", *map(str, args)])


def write_csv(
    path: Path, header: list[str] | None, rows: np.ndarray, sep: str = ",", newline: str = "\n"
) -> None:
    lines = [] if header is None else [sep.join(header)]
    lines += [sep.join(repr(float(v)) for v in row) for row in rows]
    data = newline.join(lines) + newline
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt", newline="") as f:
            f.write(data)
    else:
        with open(path, "w", newline="") as f:
            f.write(data)


def assert_failed_cleanly(
    rc: int, capsys: pytest.CaptureFixture[str], folder: Path, keep: set[str], *needles: str
) -> str:
    """Exit status 2, one line on stderr containing every needle, no output or temporary file."""
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0]
    assert set(os.listdir(folder)) == keep
    return lines[0]
