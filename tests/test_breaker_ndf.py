"""Adversarial reproducers for .ndf reading and writing (found by the "breaker" pass)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dataloader.ndf import NdfWriter, open_ndf, save_ndf


@pytest.fixture
def small_ndf(tmp_path):
    path = tmp_path / "small.ndf"
    x = np.arange(20.0).reshape(10, 2)
    y = np.arange(10.0)
    save_ndf(path, x, y)
    with open_ndf(path) as f:
        yield f, x, y.reshape(-1, 1)


def test_read_rows_accepts_object_array_of_ints(small_ndf) -> None:
    f, x, y = small_ndf
    got_x, got_y = f.read_rows(np.array([1, 3], dtype=object))
    np.testing.assert_array_equal(got_x, x[[1, 3]])
    np.testing.assert_array_equal(got_y, y[[1, 3]])


def test_read_rows_object_array_out_of_range_names_the_index(small_ndf) -> None:
    f, _, _ = small_ndf
    with pytest.raises(IndexError, match=str(2**70)):
        f.read_rows(np.array([1, 2**70], dtype=object))
    with pytest.raises(IndexError, match="index 10 is out of range"):
        f.read_rows(np.array([1, 10], dtype=object))


@pytest.mark.parametrize("d, l", [(2**64, 0), (1, 2**64), (2**61, 0), (2**60, 2**60)])
def test_writer_rejects_rows_too_wide_for_the_format(tmp_path, d: int, l: int) -> None:  # noqa: E741
    path = tmp_path / "wide.ndf"
    with pytest.raises(ValueError, match="63-bit"):
        NdfWriter(path, d, l)
    assert os.listdir(tmp_path) == []  # no temporary file left behind
