"""``dataloader demo``: softmax regression on the shipped digits (cli/demo.py, _softmax.py)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dataloader.ndf as ndf
from dataloader.__main__ import main
from dataloader.cli._softmax import SoftmaxRegression


def final_accuracy(out: str) -> float:
    m = re.search(r"^final test accuracy: ([\d.]+)%", out, re.M)
    assert m is not None, out
    return float(m[1])


@pytest.mark.timeout(120)
def test_demo_on_digits_beats_90_percent(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "UCI handwritten digits" in out
    assert "1,797 rows: 64 features, 10 classes; 1,438 for training, 359 held out" in out
    epochs = re.findall(
        r"^epoch\s+(\d+)/10  loss ([\d.]+)  test accuracy ([\d.]+)%  ([\d,]+) rows/s", out, re.M
    )
    assert [int(e[0]) for e in epochs] == list(range(1, 11))
    losses = [float(e[1]) for e in epochs]
    assert losses[-1] < losses[0]
    assert final_accuracy(out) > 90.0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 1])
def test_demo_is_deterministic_across_workers(capsys, num_workers):
    assert main(["demo", "--epochs", "2", "--optimizer", "sgd", "--lr", "0.1"]) == 0
    reference = [
        line.split("  ")[:3]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("epoch")
    ]
    assert (
        main(
            [
                "demo",
                "--epochs",
                "2",
                "--optimizer",
                "sgd",
                "--lr",
                "0.1",
                "--num-workers",
                str(num_workers),
            ]
        )
        == 0
    )
    other = [
        line.split("  ")[:3]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("epoch")
    ]
    assert other == reference and len(reference) == 2


@pytest.mark.timeout(120)
def test_demo_on_a_user_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    centers = np.array([[4.0, 0, 0], [0, 4.0, 0], [0, 0, 4.0]])
    y = rng.integers(0, 3, 600)
    x = centers[y] + rng.standard_normal((600, 3))
    ndf.save_ndf(tmp_path / "blobs.ndf", x, y)
    assert main(["demo", "--data", str(tmp_path / "blobs.ndf"), "--epochs", "3"]) == 0
    out = capsys.readouterr().out
    assert "600 rows: 3 features, 3 classes; 480 for training, 120 held out" in out
    assert final_accuracy(out) > 90.0


@pytest.mark.parametrize(
    ("y", "needle"),
    [
        (None, "has l=0 label columns; the demo needs exactly one"),
        (np.zeros((10, 2)), "has l=2 label columns"),
        (np.r_[np.zeros(5), 1.5, np.ones(4)], "row 5: label 1.5 is not a class id"),
        (np.r_[np.zeros(5), -1, np.ones(4)], "row 5: label -1.0 is not a class id"),
        (np.full(10, np.nan), "row 0: label nan is not a class id"),
        (np.zeros(10), "every row has the same label 0"),
    ],
)
def test_demo_rejects_files_without_class_ids(tmp_path, capsys, y, needle):
    ndf.save_ndf(tmp_path / "u.ndf", np.ones((10, 2)), y)
    assert main(["demo", "--data", str(tmp_path / "u.ndf")]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_demo_bad_options(tmp_path, capsys):
    assert main(["demo", "--test-fraction", "1.5"]) == 2
    assert "--test-fraction must be between 0 and 1" in capsys.readouterr().err
    assert main(["demo", "--data", str(tmp_path / "missing.ndf")]) == 2
    assert "cannot open" in capsys.readouterr().err
    ndf.save_ndf(tmp_path / "tiny.ndf", np.ones((2, 2)), np.array([0, 1]))
    assert main(["demo", "--data", str(tmp_path / "tiny.ndf"), "--test-fraction", "0.1"]) == 2
    assert "cannot be split" in capsys.readouterr().err


# -- the model -------------------------------------------------------------------------


def test_softmax_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((7, 4))
    y = rng.integers(0, 3, 7)
    model = SoftmaxRegression(4, 3, lr=1.0, optimizer="sgd", weight_decay=0.0)
    model.w[:] = rng.standard_normal((4, 3))
    w0 = model.w.copy()

    def loss(w: np.ndarray) -> float:
        z = x @ w + model.b
        z = z - z.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(7), y]))

    numeric = np.zeros_like(w0)
    eps = 1e-6
    for idx in np.ndindex(*w0.shape):
        dw = np.zeros_like(w0)
        dw[idx] = eps
        numeric[idx] = (loss(w0 + dw) - loss(w0 - dw)) / (2 * eps)
    expected = loss(w0)
    assert model.step(x, y) == pytest.approx(expected)
    np.testing.assert_allclose(
        w0 - model.w, numeric, rtol=1e-5, atol=1e-8
    )  # lr=1: the step is the gradient


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_softmax_learns_a_separable_problem(optimizer):
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 200)
    x = np.c_[y * 2.0 - 1, rng.standard_normal(200)] + 0.1 * rng.standard_normal((200, 2))
    model = SoftmaxRegression(2, 2, lr=0.1, optimizer=optimizer)
    first = model.step(x, y)
    for _ in range(50):
        last = model.step(x, y)
    assert last < first / 2
    assert np.mean(model.predict(x) == y) > 0.95


def test_softmax_rejects_bad_arguments():
    with pytest.raises(ValueError, match="optimizer='rmsprop'"):
        SoftmaxRegression(2, 2, optimizer="rmsprop")
    with pytest.raises(ValueError, match="classes=1"):
        SoftmaxRegression(2, 1)
    with pytest.raises(ValueError, match="lr=0"):
        SoftmaxRegression(2, 2, lr=0)
