"""``dataloader convert`` on CSV dialects: header detection, positions vs names, skipped
rows, column selection, tab and whitespace delimiters (cli/_read_csv.py, _source.py)."""

from __future__ import annotations

import gzip
import shutil
from importlib import resources

import numpy as np
import pytest
from tests.cli._convert import assert_failed_cleanly, convert, read_back


@pytest.fixture
def digits(tmp_path):
    """A copy of the shipped digits table (1,797 rows of 64 pixels and a label, no header)."""
    with resources.as_file(resources.files("dataloader").joinpath("data", "digits.csv.gz")) as src:
        shutil.copy(src, tmp_path / "digits.csv.gz")
    with gzip.open(tmp_path / "digits.csv.gz", "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    assert table.shape == (1797, 65)
    return tmp_path / "digits.csv.gz", table


def test_headerless_csv_keeps_its_first_row_and_says_so(tmp_path, digits, capsys):
    path, table = digits
    assert convert(path, tmp_path / "d.ndf", "--label-columns", "64") == 0
    out = capsys.readouterr().out
    assert "line 1 is all numbers, so it is data and there is no header" in out
    assert "--header" in out
    assert "n=1,797 rows, d=64 features, l=1 labels" in out
    x, y = read_back(tmp_path / "d.ndf")
    np.testing.assert_array_equal(x, table[:, :64])
    np.testing.assert_array_equal(y[:, 0], table[:, 64])


def test_headerless_plain_csv_with_label_column_from_the_end(tmp_path, digits, capsys):
    path, table = digits
    plain = tmp_path / "digits.csv"
    with gzip.open(path, "rb") as f:
        plain.write_bytes(f.read())
    assert convert(plain, tmp_path / "d.ndf", "--label-columns", "-1", "-q") == 0
    assert capsys.readouterr().out == ""
    x, y = read_back(tmp_path / "d.ndf")
    assert x.shape == (1797, 64)
    np.testing.assert_array_equal(y[:, 0], table[:, 64])


def test_header_is_detected_and_reported(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b,label\n1,2,0\n3,4,1\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "label") == 0
    out = capsys.readouterr().out
    assert "line 1 is a header ('a', 'b', 'label'); pass --no-header if it is data" in out
    assert "label columns: 2 ('label')" in out
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(y, [[0], [1]])


def test_header_option_forces_a_numeric_first_line_to_be_names(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("10,20,30\n1,2,3\n4,5,6\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--header", "--label-columns", "name:30") == 0
    assert "all numbers" not in capsys.readouterr().out
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[1, 2], [4, 5]])
    np.testing.assert_array_equal(y, [[3], [6]])


def test_no_header_option_forces_a_text_first_line_to_fail_as_data(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--no-header")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, "line 1, column 0", "'a' is not a number")


def test_header_and_no_header_are_exclusive(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("1,2\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--header", "--no-header") == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_an_integer_is_a_position_even_when_a_column_has_that_name(tmp_path, capsys):
    # columns: 0='a', 1='4', 2='b', 3='c', 4='d'; "4" is position 4 ('d'), name:4 is column 1
    table = np.arange(15.0).reshape(3, 5)
    lines = ["a,4,b,c,d"] + [",".join(map(str, row)) for row in table]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    assert convert(tmp_path / "t.csv", tmp_path / "pos.ndf", "--label-columns", "4") == 0
    out = capsys.readouterr().out
    assert "label column 4 is position 4 ('d'), not the column named '4' (position 1)" in out
    assert "write name:4 for that" in out
    _, y = read_back(tmp_path / "pos.ndf")
    np.testing.assert_array_equal(y[:, 0], table[:, 4])
    assert convert(tmp_path / "t.csv", tmp_path / "name.ndf", "--label-columns", "name:4") == 0
    assert "not the column named" not in capsys.readouterr().out
    x, y = read_back(tmp_path / "name.ndf")
    np.testing.assert_array_equal(y[:, 0], table[:, 1])
    np.testing.assert_array_equal(x, table[:, [0, 2, 3, 4]])


@pytest.mark.parametrize(
    ("body", "opts", "needle"),
    [
        ("1,2,3\n", ["--label-columns", "label"], "no column named 'label': the file has no header"),
        ("1,2,3\n", ["--label-columns", "name:0"], "no column named '0': the file has no header"),
        ("a,b,c\n1,2,3\n", ["--label-columns", "name:z"], "no column named 'z' (columns: 'a'"),
        ("a,b,c\n1,2,3\n", ["--drop-columns", "c", "--label-columns", "c"], "column 2 ('c') is both"),
        ("a,b,c\n1,2,3\n", ["--drop-columns", "a", "b", "c"], "at least one feature column"),
        ("a,b,c\n1,2,3\n", ["--columns", "a", "a"], "column 'a' is given twice"),
        ("a,b,c\n1,2,3\n", ["--drop-columns", "7"], "column 7 is out of range for 3 columns"),
        ("a,7,c\n1,2,3\n", ["--label-columns", "7"], "out of range for 3 columns (write name:7"),
        ("a,b\n1,2\n", ["--skip-rows", "5"], "has only 2 lines; --skip-rows 5 skips them all"),
        ("a,b\n1,2\n", ["--skip-rows", "-1"], "--skip-rows must be >= 0"),
        ("\n\n", ["--skip-rows", "1"], "is empty after --skip-rows 1"),
        ("a,b\n1,2\n", ["--delimiter", "ab"], "--delimiter must be one character, '\\t' or 'whitespace'"),
    ],
)
def test_bad_column_and_dialect_options(tmp_path, capsys, body, opts, needle):
    (tmp_path / "t.csv").write_text(body)
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", *opts)
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, needle)


@pytest.mark.parametrize(
    "opts",
    [
        ["--label-columns", "a"],
        ["--label-columns", "name:a"],
        ["--label-columns", "label", "--drop-columns", "a"],
        ["--label-columns", "label", "--columns", "name:a"],
    ],
)
def test_a_name_that_several_header_columns_have_is_refused_with_their_positions(
    tmp_path, capsys, opts
):
    (tmp_path / "t.csv").write_text("a,a,label\n1,2,0\n3,4,1\n")
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", *opts)
    line = assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, "'a' is ambiguous", "columns 0, 1")
    assert "give the position" in line
    # positions still pick one of them
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "label", "--drop-columns", "1") == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[1], [3]])
    np.testing.assert_array_equal(y, [[0], [1]])


def test_skip_rows_skips_lines_before_the_header_and_keeps_line_numbers(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("# exported 2024\n# by a tool, with, commas\nx,y\n1,2\n3,4\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--skip-rows", "2", "--label-columns", "y") == 0
    assert "line 3 is a header ('x', 'y')" in capsys.readouterr().out
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x[:, 0], [1, 3])
    np.testing.assert_array_equal(y[:, 0], [2, 4])
    (tmp_path / "bad.csv").write_text("junk\nx,y\n1,2\n3,oops\n")
    rc = convert(tmp_path / "bad.csv", tmp_path / "bad.ndf", "--skip-rows", "1")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"t.csv", "t.ndf", "bad.csv"}, "line 4, column 1 ('y'): 'oops'"
    )


def test_skip_rows_on_headerless_data(tmp_path):
    (tmp_path / "t.csv").write_text("some title\n1,2\n3,4\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--skip-rows", "1") == 0
    x, _ = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[1, 2], [3, 4]])


@pytest.mark.parametrize("chunk_rows", [1, 2, 100])
def test_columns_keeps_the_given_columns_in_order_and_never_parses_the_others(tmp_path, chunk_rows):
    lines = ["id,name,a,b,label"] + [f"{i},row {i},{i * 1.5},{-i},{i % 3}" for i in range(7)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "t.ndf"
    opts = ["--columns", "b,a", "label", "--label-columns", "label", "--chunk-rows", chunk_rows]
    assert convert(tmp_path / "t.csv", out, *opts) == 0
    x, y = read_back(out)
    i = np.arange(7.0)
    np.testing.assert_array_equal(x, np.stack([-i, i * 1.5], axis=1))
    np.testing.assert_array_equal(y[:, 0], i % 3)


def test_columns_keeps_the_label_columns_without_listing_them(tmp_path):
    (tmp_path / "t.csv").write_text("id,a,b,y\nx1,1,2,0\nx2,3,4,1\n")
    opts = ["--columns", "b", "a", "--label-columns", "y"]
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", *opts) == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[2, 1], [4, 3]])
    np.testing.assert_array_equal(y[:, 0], [0, 1])


def test_drop_columns_leaves_out_text_columns(tmp_path):
    lines = ["id,name,a,label"] + [f"{i},item-{i},{i / 4},{i % 2}" for i in range(5)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--drop-columns", "name", "--label-columns", "-1") == 0
    x, y = read_back(tmp_path / "t.ndf")
    i = np.arange(5.0)
    np.testing.assert_array_equal(x, np.stack([i, i / 4], axis=1))
    np.testing.assert_array_equal(y[:, 0], i % 2)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("a,b,c\n1,x,3\n4,y,6,7\n", "line 3: 4 columns, expected 3 (ragged row)"),
        ('a,b,c\n1,x,3\n4,"y,z",6,7\n', "line 3: 4 columns, expected 3 (ragged row)"),
        ("a,b,c\n1,x,3\n4,y\n", "line 3: 2 columns, expected 3 (ragged row)"),
        ("a,b,c\n1,x,3\n4,y,q\n", "line 3, column 2 ('c'): 'q' is not a number"),
    ],
)
def test_rows_are_checked_whole_when_columns_are_dropped(tmp_path, capsys, body, needle):
    (tmp_path / "t.csv").write_text(body)
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--drop-columns", "b")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, needle)


def test_csv_only_options_are_refused_for_npy(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((3, 2)))
    for opts in (["--skip-rows", "1"], ["--columns", "0"], ["--no-header"], ["--delimiter", ";"]):
        rc = convert(tmp_path / "x.npy", tmp_path / "o.ndf", *opts)
        assert_failed_cleanly(rc, capsys, tmp_path, {"x.npy"}, "applies to CSV input only")


def test_tab_delimiter_spelled_backslash_t(tmp_path):
    (tmp_path / "t.tsv").write_text("a\tb\tc\n1\t2\t3\n4\t5\t6\n")
    opts = ["--format", "csv", "--delimiter", "\\t", "--label-columns", "c"]
    assert convert(tmp_path / "t.tsv", tmp_path / "t.ndf", *opts) == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[1, 2], [4, 5]])
    np.testing.assert_array_equal(y[:, 0], [3, 6])
    assert convert(tmp_path / "t.tsv", tmp_path / "t2.ndf", "--format", "csv", "--delimiter", "\t") == 0
    np.testing.assert_array_equal(read_back(tmp_path / "t2.ndf")[0], [[1, 2, 3], [4, 5, 6]])


def test_whitespace_delimiter_splits_on_runs_of_spaces_and_tabs(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("  1.5   2\t 3\n4 5  6\n\n 7 8 9 \n")
    opts = ["--format", "csv", "--delimiter", "whitespace", "--label-columns", "0"]
    assert convert(tmp_path / "t.txt", tmp_path / "t.ndf", *opts) == 0
    assert "line 1 is all numbers" in capsys.readouterr().out
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, [[2, 3], [5, 6], [8, 9]])
    np.testing.assert_array_equal(y[:, 0], [1.5, 4, 7])
    (tmp_path / "bad.txt").write_text("a b\n1 2\n3 4 5\n")
    rc = convert(tmp_path / "bad.txt", tmp_path / "bad.ndf", "--format", "csv", "--delimiter", "whitespace")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"t.txt", "t.ndf", "bad.txt"}, "line 3: 3 columns, expected 2"
    )
