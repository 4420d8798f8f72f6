"""Adversarial reproducers for ``python -m dataloader`` (dataloader/cli).

Contract: bad input -> exit status 2 with a one-line message naming the file
(and row/column for data), no traceback, and no output file left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dataloader.__main__ import main
from dataloader.ndf import save_ndf


def _leftovers(folder: Path) -> list[str]:
    return sorted(p for p in os.listdir(folder) if p.endswith((".ndf", ".tmp")))


def test_zero_byte_npy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # _read_arrays.py _load_npy catches OSError/ValueError but np.load raises
    # EOFError("No data left in file") on an empty file -> traceback, exit 1.
    src = tmp_path / "x.npy"
    src.write_bytes(b"")
    assert main(["convert", str(src), str(tmp_path / "o.ndf"), "-q"]) == 2
    assert "x.npy" in capsys.readouterr().err
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("where", ["header", "data"])
def test_csv_field_over_csv_module_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    # _read_csv.py _fields uses csv.reader, whose field_size_limit is 131072:
    # a longer header name, or a long bad cell in a block that fails to parse,
    # raised _csv.Error out of main() -> traceback, exit 1.
    src = tmp_path / "t.csv"
    long = "x" * 200_000
    src.write_text(f"{long},b\n1,2\n" if where == "header" else f"a,b\n1,2\n1,{long}\n")
    assert main(["convert", str(src), str(tmp_path / "o.ndf"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "t.csv" in err and "line" in err
    assert _leftovers(tmp_path) == []


def test_csv_trailing_blank_block_is_silent(tmp_path: Path) -> None:
    # _read_csv.py _parse_block: a block of only blank lines made np.loadtxt warn
    # "input contained no data" (an error under -W error, noise on stderr otherwise).
    src = tmp_path / "t.csv"
    src.write_text("a,b\n1,2\n\n\n\n\n")
    assert main(["convert", str(src), str(tmp_path / "o.ndf"), "-q", "--chunk-rows", "2"]) == 0


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("bench", ["--num-workers", "10000"]),
        ("bench", ["--prefetch-depth", str(10**11)]),
        ("demo", ["--num-workers", "10000"]),
    ],
)
def test_loader_limits_are_user_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, option: list[str]
) -> None:
    # bench.py / demo.py pass the numbers straight to DataLoader, whose ValueError
    # ("num_workers=10000 must be <= 1024") escaped main() -> traceback, exit 1.
    f = tmp_path / "d.ndf"
    save_ndf(f, np.random.default_rng(0).random((20, 3)), (np.arange(20) % 2)[:, None])
    args = [command, *option, "--epochs", "1", "--no-progress"]
    args += [str(f)] if command == "bench" else ["--data", str(f)]
    assert main(args) == 2
    assert option[0].lstrip("-").replace("-", "_") in capsys.readouterr().err.replace("-", "_")
