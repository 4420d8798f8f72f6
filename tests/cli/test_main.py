"""``python -m dataloader``: dispatch, --help, --version, exit statuses (dataloader/__main__.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from tests._support import REPO, run_python

import dataloader
from dataloader.__main__ import main
from dataloader.ndf import save_ndf

COMMANDS = ("convert", "info", "bench", "demo")


def run_module(
    *args: str, cwd: Path = REPO, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m dataloader ARGS`` in a fresh interpreter, from the source tree."""
    return run_python("-m", "dataloader", *args, cwd=cwd, timeout=timeout)


def test_version_prints_package_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == dataloader.__version__


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: dataloader {command}")
    assert "``" not in out  # no RST markup in terminal help


def test_no_command_is_a_usage_error(capsys):
    assert main([]) == 2
    assert "required" in capsys.readouterr().err


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["frobnicate"]) == 2
    assert "invalid choice" in capsys.readouterr().err


def test_unknown_option_is_a_usage_error(capsys):
    assert main(["info", "--no-such-option", "x.ndf"]) == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_subprocess_version_and_help():
    done = run_module("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == dataloader.__version__
    done = run_module("demo", "--help")
    assert done.returncode == 0
    assert "usage: dataloader demo" in done.stdout


@pytest.mark.timeout(120)
def test_subprocess_convert_info_bench_pipeline(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 4))
    y = rng.integers(0, 3, 500)
    csv_path = tmp_path / "table.csv"
    with open(csv_path, "w") as f:
        f.write("a,b,c,d,label\n")
        for row, label in zip(x, y, strict=True):
            f.write(",".join(repr(float(v)) for v in row) + f",{label}\n")
    out = tmp_path / "table.ndf"
    done = run_module("convert", str(csv_path), str(out), "--label-columns", "label")
    assert done.returncode == 0, done.stderr
    assert "n=500 rows, d=4 features, l=1 labels" in done.stdout
    done = run_module("info", str(out))
    assert done.returncode == 0, done.stderr
    assert "rows (n)       500" in done.stdout
    done = run_module("bench", str(out), "--epochs", "1", "--batch-size", "64", "--shuffle")
    assert done.returncode == 0, done.stderr
    assert "median" in done.stdout


def test_subprocess_bad_input_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,oops\n")
    out = tmp_path / "bad.ndf"
    done = run_module("convert", str(bad), str(out))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "bad.csv: line 3, column 1 ('b'): 'oops' is not a number" in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["bad.csv"]


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
    # DataLoader's ValueError ("num_workers=10000 must be <= 1024") is exit 2, no traceback.
    f = tmp_path / "d.ndf"
    save_ndf(f, np.random.default_rng(0).random((20, 3)), (np.arange(20) % 2)[:, None])
    args = [command, *option, "--epochs", "1", "--no-progress"]
    args += [str(f)] if command == "bench" else ["--data", str(f)]
    assert main(args) == 2
    assert option[0].lstrip("-").replace("-", "_") in capsys.readouterr().err.replace("-", "_")
