"""``dataloader convert``: .csv(.gz) / .npy / .npz to .ndf (cli/convert.py, _read_*.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dataloader.__main__ import main
from tests.cli._convert import assert_failed_cleanly, convert, read_back, write_csv


# -- CSV -----------------------------------------------------------------------------


def test_csv_label_column_by_name(tmp_path, table, capsys):
    write_csv(tmp_path / "t.csv", ["a", "b", "c", "d", "label"], table)
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "label") == 0
    assert "n=103 rows, d=4 features, l=1 labels" in capsys.readouterr().out
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, table[:, :4])
    np.testing.assert_array_equal(y, table[:, 4:])


def test_csv_without_labels(tmp_path, table):
    write_csv(tmp_path / "t.csv", list("abcde"), table)
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf") == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, table)
    assert y.shape == (103, 0)


@pytest.mark.parametrize("spec", [["b", "d"], ["b,d"], ["1", "-2"], ["b", "-2"]])
def test_csv_label_columns_in_the_middle(tmp_path, table, spec):
    write_csv(tmp_path / "t.csv", list("abcde"), table)
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", *spec) == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, table[:, [0, 2, 4]])
    np.testing.assert_array_equal(y, table[:, [1, 3]])


def test_csv_label_order_follows_the_option(tmp_path, table):
    write_csv(tmp_path / "t.csv", list("abcde"), table)
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "e", "a") == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(y, table[:, [4, 0]])
    np.testing.assert_array_equal(x, table[:, 1:4])


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 10_000])
def test_csv_blocks_do_not_change_the_result(tmp_path, table, chunk_rows):
    write_csv(tmp_path / "t.csv", list("abcde"), table)
    out = tmp_path / "t.ndf"
    assert convert(tmp_path / "t.csv", out, "--label-columns", "e", "--chunk-rows", chunk_rows) == 0
    x, y = read_back(out)
    np.testing.assert_array_equal(np.hstack([x, y]), table)


def test_csv_gz_no_header_semicolons_crlf(tmp_path, table):
    path = tmp_path / "t.csv.gz"
    write_csv(path, None, table, sep=";", newline="\r\n")
    assert (
        convert(path, tmp_path / "t.ndf", "--no-header", "--delimiter", ";", "--label-columns", "4")
        == 0
    )
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x, table[:, :4])
    np.testing.assert_array_equal(y, table[:, 4:])


def test_csv_quotes_blank_lines_bom_and_integers(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes('\ufeff"a","b"\n"1",2\n\n3,4.5e1\n-7,nan\n'.encode())
    assert convert(path, tmp_path / "t.ndf", "--label-columns", "b") == 0
    x, y = read_back(tmp_path / "t.ndf")
    np.testing.assert_array_equal(x[:, 0], [1, 3, -7])
    np.testing.assert_array_equal(y[:, 0], [2, 45, np.nan])


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        ("a,b,c\n1,2,3\n4,x,6\n", ["bad.csv: line 3, column 1 ('b'): 'x' is not a number"]),
        ("a,b,c\n1,2,3\n4,6\n", ["bad.csv: line 3: 2 columns, expected 3 (ragged row)"]),
        ("a,b,c\n1,2,3\n4,5,6,7\n", ["line 3: 4 columns, expected 3"]),
        ("a,b,c\n1,,3\n", ["line 2, column 1 ('b'): an empty value is not a number"]),
        ("a,b,c\n1,2,3\n4,1_0,6\n", ["bad.csv: line 3, column 1 ('b'): '1_0' is not a number"]),  # float() takes it
        ("a,b,c\n1,2,3\n4,5,\u0661\u0662\n", ["bad.csv: line 3, column 2 ('c'): '\u0661\u0662' is not a number"]),
        ("a,b,c\n\uff11,2,3\n", ["bad.csv: line 2, column 0 ('a'): '\uff11' is not a number"]),
        ("", ["bad.csv: is empty"]),
        ("a,b,c\n", ["bad.csv: has no data rows"]),
    ],
)
def test_csv_bad_input(tmp_path, capsys, body, needles):
    (tmp_path / "bad.csv").write_text(body)
    rc = convert(tmp_path / "bad.csv", tmp_path / "bad.ndf")
    assert_failed_cleanly(rc, capsys, tmp_path, {"bad.csv"}, *needles)


def test_csv_bad_value_late_in_a_large_file_names_its_line(tmp_path, capsys):
    lines = ["a,b"] + [f"{i},{i}" for i in range(1000)]
    lines[777] = "776,7e"
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    rc = convert(tmp_path / "bad.csv", tmp_path / "bad.ndf", "--chunk-rows", "100")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"bad.csv"}, "line 778, column 1 ('b'): '7e' is not a number"
    )


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        (["nope"], "no column named 'nope'"),
        (["9"], "label column 9 is out of range for 3 columns"),
        (["a", "a"], "label column 'a' is given twice"),
        (["a", "b", "c"], "at least one feature column is needed"),
    ],
)
def test_csv_bad_label_columns(tmp_path, capsys, spec, needle):
    (tmp_path / "t.csv").write_text("a,b,c\n1,2,3\n")
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", *spec)
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, needle)


def test_csv_rejects_labels_file_option(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--labels", "y.npy")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, "--label-columns")


# -- .npy ----------------------------------------------------------------------------


def test_npy_with_labels_file(tmp_path):
    x = np.arange(60, dtype=np.float32).reshape(20, 3)
    y = np.arange(20) % 4
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    assert convert(tmp_path / "x.npy", tmp_path / "o.ndf", "--labels", tmp_path / "y.npy") == 0
    xs, ys = read_back(tmp_path / "o.ndf")
    np.testing.assert_array_equal(xs, x)
    np.testing.assert_array_equal(ys[:, 0], y)


@pytest.mark.parametrize(
    ("x", "d"),
    [
        (np.arange(10, dtype=np.int16), 1),
        (np.arange(240, dtype=np.uint8).reshape(10, 4, 6), 24),
        (np.asfortranarray(np.arange(30.0).reshape(10, 3)), 3),
        (np.arange(20).reshape(10, 2) % 3 == 0, 2),
    ],
)
def test_npy_shapes_and_dtypes(tmp_path, x, d):
    np.save(tmp_path / "x.npy", x)
    assert convert(tmp_path / "x.npy", tmp_path / "o.ndf") == 0
    xs, ys = read_back(tmp_path / "o.ndf")
    np.testing.assert_array_equal(xs, np.asarray(x, dtype=np.float64).reshape(10, d))
    assert ys.shape == (10, 0)


def test_npy_many_blocks(tmp_path, monkeypatch):
    import dataloader.cli._read_arrays as ra

    monkeypatch.setattr(ra, "CHUNK_BYTES", 8 * 3 * 7)  # 7 rows per block
    x = np.random.default_rng(0).standard_normal((100, 3))
    np.save(tmp_path / "x.npy", x)
    assert convert(tmp_path / "x.npy", tmp_path / "o.ndf", "--label-columns", "-1") == 0
    xs, ys = read_back(tmp_path / "o.ndf")
    np.testing.assert_array_equal(xs, x[:, :2])
    np.testing.assert_array_equal(ys, x[:, 2:])


def test_npy_bad_inputs(tmp_path, capsys):
    np.save(tmp_path / "obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    rc = convert(tmp_path / "obj.npy", tmp_path / "o.ndf")
    assert_failed_cleanly(rc, capsys, tmp_path, {"obj.npy"}, "obj.npy", "not a numeric .npy array")

    np.save(tmp_path / "c.npy", np.ones((3, 2), dtype=complex))
    rc = convert(tmp_path / "c.npy", tmp_path / "o.ndf")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"obj.npy", "c.npy"}, "c.npy", "complex128 which is not numeric"
    )

    np.save(tmp_path / "x.npy", np.ones((3, 2)))
    np.save(tmp_path / "y.npy", np.ones(4))
    rc = convert(tmp_path / "x.npy", tmp_path / "o.ndf", "--labels", tmp_path / "y.npy")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"obj.npy", "c.npy", "x.npy", "y.npy"}, "4 labels for 3 feature rows"
    )

    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    rc = convert(tmp_path / "junk.npy", tmp_path / "o.ndf")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"obj.npy", "c.npy", "x.npy", "y.npy", "junk.npy"}, "junk.npy"
    )


# -- .npz ----------------------------------------------------------------------------


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz_default_names(tmp_path, save):
    x = np.random.default_rng(2).standard_normal((50, 3))
    y = np.arange(50) % 2
    save(tmp_path / "d.npz", x=x, y=y)
    assert convert(tmp_path / "d.npz", tmp_path / "o.ndf") == 0
    xs, ys = read_back(tmp_path / "o.ndf")
    np.testing.assert_array_equal(xs, x)
    np.testing.assert_array_equal(ys[:, 0], y)


def test_npz_named_arrays_fortran_and_many_blocks(tmp_path, monkeypatch):
    import dataloader.cli._read_arrays as ra

    monkeypatch.setattr(ra, "CHUNK_BYTES", 8 * 5 * 3)  # 3 rows per block
    pixels = np.arange(40 * 2 * 2, dtype=np.uint8).reshape(40, 2, 2)
    target = np.asfortranarray(np.stack([np.arange(40), -np.arange(40)], axis=1))
    np.savez_compressed(tmp_path / "d.npz", pixels=pixels, target=target, other=np.zeros(3))
    assert (
        convert(
            tmp_path / "d.npz", tmp_path / "o.ndf", "--features", "pixels", "--labels", "target"
        )
        == 0
    )
    xs, ys = read_back(tmp_path / "o.ndf")
    np.testing.assert_array_equal(xs, pixels.reshape(40, 4))
    np.testing.assert_array_equal(ys, target)


def test_npz_single_array_and_label_columns(tmp_path):
    data = np.arange(30.0).reshape(10, 3)
    np.savez(tmp_path / "d.npz", whatever=data)
    assert convert(tmp_path / "d.npz", tmp_path / "o.ndf", "--label-columns", "0") == 0
    xs, ys = read_back(tmp_path / "o.ndf")
    np.testing.assert_array_equal(xs, data[:, 1:])
    np.testing.assert_array_equal(ys, data[:, :1])


@pytest.mark.parametrize(
    ("arrays", "opts", "needle"),
    [
        (
            {"a": np.ones((2, 2)), "b": np.ones(2)},
            [],
            "which array holds the features? pass --features NAME",
        ),
        ({"x": np.ones((2, 2))}, ["--labels", "nope"], "no array named 'nope' (arrays: x)"),
        ({"x": np.ones((2, 2)), "y": np.ones(3)}, [], "3 labels in 'y' for 2 rows in 'x'"),
        ({"x": np.array(["a", "b"])}, [], "array 'x' has dtype <U1 which is not numeric"),
    ],
)
def test_npz_bad_inputs(tmp_path, capsys, arrays, opts, needle):
    np.savez(tmp_path / "d.npz", **arrays)
    rc = convert(tmp_path / "d.npz", tmp_path / "o.ndf", *opts)
    assert_failed_cleanly(rc, capsys, tmp_path, {"d.npz"}, "d.npz", needle)


def test_npz_that_is_not_a_zip(tmp_path, capsys):
    (tmp_path / "d.npz").write_bytes(b"hello")
    rc = convert(tmp_path / "d.npz", tmp_path / "o.ndf")
    assert_failed_cleanly(rc, capsys, tmp_path, {"d.npz"}, "is not an .npz (zip) archive")


# -- paths -----------------------------------------------------------------------------


def test_paths_and_format(tmp_path, capsys):
    (tmp_path / "t.txt").write_text("a\n1\n")
    rc = convert(tmp_path / "t.txt", tmp_path / "o.ndf")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.txt"}, "pass --format npy|npz|csv")
    assert convert(tmp_path / "t.txt", tmp_path / "o.ndf", "--format", "csv") == 0
    capsys.readouterr()
    rc = convert(tmp_path / "missing.csv", tmp_path / "p.ndf")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.txt", "o.ndf"}, "cannot open", "missing.csv")
    rc = convert(tmp_path / "t.txt", tmp_path / "nowhere" / "o.ndf", "--format", "csv")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.txt", "o.ndf"}, "does not exist")
    rc = convert(tmp_path / "t.txt", tmp_path / "t.txt", "--format", "csv", "--force")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.txt", "o.ndf"}, "is the same file as input")


def test_existing_output_needs_force_and_survives_a_failed_conversion(tmp_path, capsys):
    (tmp_path / "good.csv").write_text("a,b\n1,2\n3,4\n")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3,x\n")
    out = tmp_path / "o.ndf"
    assert convert(tmp_path / "good.csv", out) == 0
    before = out.read_bytes()
    capsys.readouterr()
    rc = convert(tmp_path / "good.csv", out)
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"good.csv", "bad.csv", "o.ndf"}, "exists (use --force"
    )
    rc = convert(tmp_path / "bad.csv", out, "--force")
    assert_failed_cleanly(
        rc, capsys, tmp_path, {"good.csv", "bad.csv", "o.ndf"}, "line 3, column 1"
    )
    assert out.read_bytes() == before
    assert convert(tmp_path / "bad.csv", out, "--force", "--label-columns", "a", "-q") == 2
    capsys.readouterr()
    (tmp_path / "good2.csv").write_text("a,b\n5,6\n")
    assert convert(tmp_path / "good2.csv", out, "--force", "-q") == 0
    assert capsys.readouterr().out == ""
    np.testing.assert_array_equal(read_back(out)[0], [[5, 6]])


def test_progress_bar_goes_to_stderr(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("a,b\n1,2\n")
    assert convert(tmp_path / "t.csv", tmp_path / "o.ndf", "--progress") == 0
    captured = capsys.readouterr()
    assert "convert t.csv" in captured.err
    assert "convert t.csv" not in captured.out


def _leftovers(folder: Path) -> list[str]:
    return sorted(p for p in os.listdir(folder) if p.endswith((".ndf", ".tmp")))


def test_zero_byte_npy_is_a_user_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # np.load raises EOFError on an empty file: exit 2 naming the file, no output left.
    src = tmp_path / "x.npy"
    src.write_bytes(b"")
    assert main(["convert", str(src), str(tmp_path / "o.ndf"), "-q"]) == 2
    assert "x.npy" in capsys.readouterr().err
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("where", ["header", "data"])
def test_csv_field_over_csv_module_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    # csv.reader's field_size_limit is 131072: a longer header name, or a long bad cell in a
    # block that fails to parse, is exit 2 naming the file and line.
    src = tmp_path / "t.csv"
    long = "x" * 200_000
    src.write_text(f"{long},b\n1,2\n" if where == "header" else f"a,b\n1,2\n1,{long}\n")
    assert main(["convert", str(src), str(tmp_path / "o.ndf"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "t.csv" in err and "line" in err
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("blank", ["   ", "\t", "\u00a0", "\x0c", " \r"])
@pytest.mark.parametrize("chunk_rows", ["2", "65536"])
def test_csv_lines_of_only_white_space_are_blank_lines(tmp_path, capsys, blank, chunk_rows):
    # loadtxt skips empty lines only: a block with "   " failed with numpy's "the number of
    # columns changed from 2 to 1 at row 2; use `usecols` ...", naming no line.
    big = 2**53 + 1
    src = tmp_path / "t.csv"
    src.write_bytes(f"a,b\n1,{big}\n{blank}\n{big},2\n{blank}\n4,x\n".encode())
    rc = convert(src, tmp_path / "t.ndf", "--label-columns", "a", "--dtype", "int64", "--label-dtype", "int64",
                 "--chunk-rows", chunk_rows, "-q")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, "line 6, column 1 ('b'): 'x' is not a number")
    src.write_bytes(f"a,b\n1,{big}\n{blank}\n{big},2\n{blank}\n".encode())
    assert convert(src, tmp_path / "t.ndf", "--label-columns", "a", "--dtype", "int64", "--label-dtype", "int64",
                   "--chunk-rows", chunk_rows, "-q") == 0
    x, y = read_back(tmp_path / "t.ndf")
    assert x[:, 0].tolist() == [big, 2] and y[:, 0].tolist() == [1, big]


def test_csv_trailing_blank_block_is_silent(tmp_path: Path) -> None:
    # A block of only blank lines must not make np.loadtxt warn "input contained no data".
    src = tmp_path / "t.csv"
    src.write_text("a,b\n1,2\n\n\n\n\n")
    assert main(["convert", str(src), str(tmp_path / "o.ndf"), "-q", "--chunk-rows", "2"]) == 0
