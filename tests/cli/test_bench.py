"""``dataloader bench``: loader epochs against a plain NumPy loop (cli/bench.py)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import dataloader.ndf as ndf
from dataloader import DataLoader
from dataloader.__main__ import main
from dataloader.cli.bench import numpy_batches


@pytest.fixture
def path(tmp_path):
    rng = np.random.default_rng(5)
    p = tmp_path / "b.ndf"
    ndf.save_ndf(p, rng.standard_normal((1000, 4)), rng.standard_normal((1000, 2)))
    return p


@pytest.mark.timeout(60)
@pytest.mark.parametrize("shuffle", [False, True])
def test_numpy_loop_reads_the_same_batches_as_the_loader(path, shuffle):
    loader = DataLoader(ndf.NdfDataset(path), batch_size=64, shuffle=shuffle, num_workers=2, seed=7)
    for epoch in range(2):
        ours = list(loader)
        theirs = list(numpy_batches(str(path), 1000, 4, 2, 64, shuffle, 7, epoch))
        assert len(ours) == len(theirs) == 16
        for (x, y), (bx, by) in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(x, bx)
            np.testing.assert_array_equal(y, by)
    loader.close()


@pytest.mark.timeout(60)
def test_bench_prints_epochs_and_ratio(path, capsys):
    assert main(["bench", str(path), "--epochs", "2", "--batch-size", "100", "--shuffle"]) == 0
    out = capsys.readouterr().out
    assert "1,000 rows x 6 float64" in out
    lines = re.findall(
        r"^\s*(\d+|median)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d.]+)x$", out, re.M
    )
    assert [m[0] for m in lines] == ["1", "2", "median"]
    for m in lines:
        assert int(m[1].replace(",", "")) > 0 and float(m[5]) > 0


@pytest.mark.timeout(60)
def test_bench_without_baseline_and_without_workers(path, capsys):
    assert (
        main(
            [
                "bench",
                str(path),
                "--epochs",
                "1",
                "--num-workers",
                "0",
                "--no-baseline",
                "--progress",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "ratio" not in captured.out
    assert "median" in captured.out
    assert "epoch 1" in captured.err  # the tqdm bar


@pytest.mark.parametrize(
    ("opts", "needle"),
    [
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--epochs", "0"], "--epochs must be >= 1"),
        (["--num-workers", "-1"], "--num-workers must be >= 0"),
    ],
)
def test_bench_bad_options(path, capsys, opts, needle):
    assert main(["bench", str(path), *opts]) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_bench_takes_auto_workers(path, capsys):
    args = ["bench", str(path), "--epochs", "2", "--batch-size", "100", "--no-baseline", "--num-workers", "auto"]
    assert main(args) == 0
    assert "num_workers=auto" in capsys.readouterr().out
    assert main(["bench", str(path), "--num-workers", "many"]) == 2
    assert "'many'" in capsys.readouterr().err


def test_bench_bad_files(tmp_path, capsys):
    assert main(["bench", str(tmp_path / "nope.ndf")]) == 2
    assert "cannot open" in capsys.readouterr().err
    with ndf.NdfWriter(tmp_path / "empty.ndf", 3):
        pass
    assert main(["bench", str(tmp_path / "empty.ndf")]) == 2
    assert "has no rows" in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_bench_prints_the_last_epochs_stats_table(path, capsys):
    args = ["bench", str(path), "--epochs", "2", "--batch-size", "100", "--no-baseline", "--num-workers", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "last epoch (DataLoader.stats, num_workers=2)" in out
    assert re.search(r"batches delivered\s+10 in", out)
    for label in ("consumer waited", "builders fetching", "builders collating", "in flight min/mean/max"):
        assert label in out


@pytest.mark.timeout(60)
def test_bench_plot_writes_a_png_timeline(path, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "t.png"
    assert main(["bench", str(path), "--epochs", "1", "--no-baseline", "--plot", str(png)]) == 0
    assert f"timeline written to {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_plot_without_matplotlib_names_the_extra(path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError
    assert main(["bench", str(path), "--plot", "x.png"]) == 2
    err = capsys.readouterr().err
    assert "pip install matplotlib" in err and "'.[plot]'" in err and "epoch" not in err


def test_occupancy_sums_interval_overlap_per_bin():
    from dataloader.cli._plot import occupancy

    edges = np.array([0.0, 1.0, 2.0, 3.0])
    iv = np.array([[0.5, 1.5], [0.0, 3.0], [2.9, 2.9]])
    np.testing.assert_allclose(occupancy(iv, edges), [1.5, 1.5, 1.0])
    np.testing.assert_array_equal(occupancy(np.zeros((0, 2)), edges), [0.0, 0.0, 0.0])


@pytest.mark.timeout(60)
def test_bench_lets_the_loader_pick_its_workers_and_flags_epochs_too_short_to_time(path, capsys):
    # The file's epochs take a few ms at most (SHORT_EPOCH_S is 50 ms).
    assert main(["bench", str(path), "--epochs", "2", "--batch-size", "100"]) == 0
    out = capsys.readouterr().out
    assert "num_workers=auto" in out and "last epoch (DataLoader.stats, num_workers='auto')" in out
    assert re.search(r"^note: an epoch took [\d.]+ (us|ms): too short to time reliably", out, re.M), out


@pytest.mark.parametrize(
    ("where", "needle"),
    [
        ("missing/t.png", "folder {tmp}/missing does not exist"),
        (".", "is a folder; give a file name"),
    ],
)
def test_bench_refuses_a_plot_path_it_cannot_write_before_the_epochs_run(
    path, tmp_path, capsys, where, needle
):
    target = tmp_path / where
    assert main(["bench", str(path), "--epochs", "1", "--no-baseline", "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and needle.format(tmp=tmp_path) in lines[0], captured.err
    assert "epoch" not in captured.out  # refused before any epoch ran
    assert not (tmp_path / "missing").exists()


def test_bench_refuses_a_plot_suffix_matplotlib_cannot_write(path, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    target = tmp_path / "t.xyz"
    assert main(["bench", str(path), "--epochs", "1", "--no-baseline", "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    assert "matplotlib cannot write .xyz files (it writes" in captured.err and ".png" in captured.err
    assert "epoch" not in captured.out and not target.exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("name", "magic"), [("timeline", b"\x89PNG"), ("t.svg", b"<?xml")])
def test_bench_plot_is_written_at_exactly_the_path_given(path, tmp_path, capsys, name, magic):
    pytest.importorskip("matplotlib")
    target = tmp_path / name
    assert main(["bench", str(path), "--epochs", "1", "--no-baseline", "--plot", str(target)]) == 0
    assert f"timeline written to {target}" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["b.ndf", name])
    assert target.read_bytes().startswith(magic)
