"""``convert --dtype / --label-dtype`` and the column names a CSV header gives: kept in the
.ndf file, shown by ``info``, read by ``bench`` (cli/convert.py, info.py, bench.py)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.cli._convert import assert_failed_cleanly, convert

import dataloader.ndf as ndf
from dataloader import DataLoader
from dataloader.__main__ import main
from dataloader.cli.bench import numpy_batches


@pytest.fixture
def iris_like(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((30, 3)).round(3)
    y = np.arange(30) % 3
    lines = ["sepal length,petal,width,species"]
    lines += [f"{a},{b},{c},{k}" for (a, b, c), k in zip(x, y)]
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, x, y


def test_convert_stores_the_dtypes_asked_for_and_the_headers_names(iris_like, tmp_path, capsys):
    path, x, y = iris_like
    out = tmp_path / "t.ndf"
    args = ["--label-columns", "species", "--dtype", "float32", "--label-dtype", "int64"]
    assert convert(path, out, *args) == 0
    assert "l=1 labels (float32, int64 labels)" in capsys.readouterr().out
    with ndf.open_ndf(out) as f:
        assert (f.version, f.x_dtype, f.y_dtype) == (2, np.float32, np.int64)
        assert f.feature_names == ("sepal length", "petal", "width")
        assert f.label_names == ("species",)
        bx, by = f.read_rows(range(30))
    np.testing.assert_array_equal(bx, x.astype(np.float32))
    np.testing.assert_array_equal(by[:, 0], y)
    with ndf.NdfDataset(out, scalar_labels=True) as ds:
        batch_x, batch_y = next(iter(DataLoader(ds, batch_size=8)))
    assert batch_x.dtype == np.float32 and batch_y.shape == (8,) and batch_y.dtype == np.int64


def test_convert_without_a_header_or_options_writes_a_version_1_file(tmp_path):
    (tmp_path / "t.csv").write_text("1,2,0\n3,4,1\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "-1") == 0
    with ndf.open_ndf(tmp_path / "t.ndf") as f:
        assert f.version == 1 and f.feature_names is None and f.label_names is None


def test_convert_npy_to_float16_features(tmp_path):
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    np.save(tmp_path / "x.npy", x)
    assert convert(tmp_path / "x.npy", tmp_path / "x.ndf", "--dtype", "float16", "-q") == 0
    with ndf.open_ndf(tmp_path / "x.ndf") as f:
        assert f.x_dtype == np.float16 and f.feature_names is None
        np.testing.assert_array_equal(f.read_rows(range(4))[0], x)


@pytest.mark.parametrize(
    ("body", "opts", "needle"),
    [
        ("a,label\n1,0\n2,0.5\n", ["--label-dtype", "int64"],
         "data row 1, label column 0 ('label'): 0.5 cannot be stored as --label-dtype int64: "
         "it is not a whole number in int64's range"),
        ("a,label\n1,0\n2,nan\n", ["--label-dtype", "int32"], "data row 1, label column 0 ('label'): nan"),
        ("a,label\n300,0\n", ["--dtype", "int8"],
         "data row 0, feature column 0 ('a'): 300.0 cannot be stored as --dtype int8"),
        ("1,0\n1e300,1\n", ["--dtype", "float32", "--no-header"],
         "data row 1, feature column 0: 1e+300 cannot be stored as --dtype float32: "
         "it is outside float32's range (it would become inf)"),
    ],
)
def test_convert_refuses_a_value_the_dtype_would_change(tmp_path, capsys, body, opts, needle):
    (tmp_path / "t.csv").write_text(body)
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "-1", *opts)
    line = assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, needle)
    assert f"error: {tmp_path / 't.csv'}: data row" in line


BIG = 2**53 + 1  # the first integer float64 cannot hold


@pytest.mark.parametrize("chunk_rows", ["65536", "2"])
def test_convert_stores_int64_csv_integers_past_2_to_the_53_exactly(tmp_path, capsys, chunk_rows):
    ids = [BIG, -BIG, 2**63 - 1, -(2**63), 7, 1_700_000_000_123_456_789, 0]
    labels = [3, 2**62 + 1, 1, 0, 2, 5, 4]
    lines = ["ts,a,kind"] + [f"{t},{i}.5,{k}" for i, (t, k) in enumerate(zip(ids, labels))]
    lines.insert(3, "")  # a blank line: the text of each parsed row is still found
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "t.ndf"
    rc = convert(tmp_path / "t.csv", out, "--label-columns", "kind", "--columns", "ts", "--dtype", "int64",
                 "--label-dtype", "int64", "--chunk-rows", chunk_rows, "-q")
    assert rc == 0, capsys.readouterr().err
    with ndf.open_ndf(out) as f:
        x, y = f.read_rows(range(len(ids)))
    assert x[:, 0].tolist() == ids and y[:, 0].tolist() == labels


@pytest.mark.parametrize(("body", "opts", "needle"), [
    (f"a,label\n1,0\n2,{BIG}.5\n", ["--label-dtype", "int64"],
     f"data row 1, label column 0 ('label'): '{BIG}.5' cannot be stored as --label-dtype int64: "
     "it is not a whole number in int64's range"),
    (f"a,label\n1,0\n{2**63},1\n", ["--dtype", "int64"],
     f"data row 1, feature column 0 ('a'): {2**63} cannot be stored as --dtype int64"),
    (f"a,label\n1.5,0\n{BIG},1\n", ["--dtype", "int64"],
     "data row 0, feature column 0 ('a'): 1.5 cannot be stored as --dtype int64"),  # the first, in order
    (f"{BIG},1\n", ["--dtype", "float32", "--label-dtype", "int64", "--no-header"], None),  # float32: rounding asked
])
def test_convert_refuses_an_int64_csv_value_past_2_to_the_53_that_is_not_a_whole_number_in_range(
    tmp_path, capsys, body, opts, needle
):
    (tmp_path / "t.csv").write_text(body)
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "-1", "-q", *opts)
    if needle is None:
        assert rc == 0
        return
    line = assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"}, needle)
    assert f"error: {tmp_path / 't.csv'}: data row" in line


@pytest.mark.parametrize(("value", "shown"), [
    ("1e400", "'1e400'"),
    ("-1e309", "'-1e309'"),
    ("1" + "0" * 400, "'100000000000000000000000...000000000000 (401 characters)'"),
    ("-" + "9" * 5000, "'-99999999999999999999999...999999999999 (5001 characters)'"),  # past int()'s 4300 digits
    ("inf", "inf"),
    ("-Infinity", "-inf"),
    ("nan", "nan"),
])
def test_convert_names_an_int64_csv_value_past_float64s_range_as_written_not_as_inf(tmp_path, capsys, value, shown):
    # float64 parsed 1e400 (or a 400-digit integer) as inf, and the refusal said "inf cannot be stored".
    (tmp_path / "t.csv").write_text(f"a,label\n1,0\n{value},1\n")
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--label-columns", "-1", "-q", "--dtype", "int64")
    assert_failed_cleanly(rc, capsys, tmp_path, {"t.csv"},
                          f"data row 1, feature column 0 ('a'): {shown} cannot be stored as --dtype int64")


def test_convert_reads_int64_past_2_to_the_53_from_quoted_whitespace_separated_fields(tmp_path, capsys):
    # line.split() cut '" 5 " 9007199254740993' into four fields, and column 1's exact value was
    # read from the wrong one: 5 was stored for 9007199254740993, silently.
    (tmp_path / "t.csv").write_text(f'a b\n" 5 " {BIG}\n7 "{BIG}"\n"8" 2\n')
    rc = convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--delimiter", "whitespace", "--label-columns", "a",
                 "--dtype", "int64", "-q")
    assert rc == 0, capsys.readouterr().err
    with ndf.open_ndf(tmp_path / "t.ndf") as f:
        x, y = f.read_rows(range(3))
    assert x[:, 0].tolist() == [BIG, BIG, 2] and y[:, 0].tolist() == [5, 7, 8]


def test_convert_refuses_a_dtype_it_does_not_know(tmp_path, capsys):
    (tmp_path / "t.csv").write_text("1,2\n")
    assert convert(tmp_path / "t.csv", tmp_path / "t.ndf", "--dtype", "complex64") == 2
    assert "invalid choice: 'complex64'" in capsys.readouterr().err


def test_info_shows_the_format_dtypes_and_column_names(iris_like, tmp_path, capsys):
    path, _, _ = iris_like
    out = tmp_path / "t.ndf"
    assert convert(path, out, "--label-columns", "species", "--dtype", "float32",
                   "--label-dtype", "int64", "-q") == 0
    assert main(["info", str(out), "--max-columns", "2"]) == 0
    text = capsys.readouterr().out
    assert "format         .ndf version 2: features float32, labels int64" in text
    assert "feature names  'sepal length', 'petal', ... (3 names)" in text
    assert "label names    'species'" in text
    assert "row            20 bytes (3 float32 + 1 int64)" in text
    assert "'sepal length'\n" in text and "'species'\n" in text  # beside their statistics
    assert "labels: y[0] takes 3 distinct integers from 0 to 2" in text
    ndf.save_ndf(tmp_path / "plain.ndf", np.ones((2, 2)))
    assert main(["info", str(tmp_path / "plain.ndf")]) == 0
    text = capsys.readouterr().out
    assert "format         .ndf version 1: float64" in text and "names" not in text


@pytest.mark.timeout(60)
def test_bench_reads_a_file_of_other_dtypes_in_both_loops(tmp_path, capsys):
    x, y = np.arange(300.0).reshape(100, 3), np.arange(100) % 4
    path = tmp_path / "b.ndf"
    ndf.save_ndf(path, x, y, x_dtype=np.float32, y_dtype=np.int64, feature_names=["a", "b", "c"])
    with ndf.open_ndf(path) as f:
        offset = f.data_offset
    theirs = list(numpy_batches(str(path), 100, 3, 1, 32, True, 7, 0, offset=offset,
                                x_dtype=np.dtype(np.float32), y_dtype=np.dtype(np.int64)))
    with DataLoader(ndf.NdfDataset(path), batch_size=32, shuffle=True, seed=7) as loader:
        ours = list(loader)
    for (bx, by), (nx, ny) in zip(ours, theirs, strict=True):
        assert nx.dtype == np.float32 and ny.dtype == np.int64
        np.testing.assert_array_equal(bx, nx)
        np.testing.assert_array_equal(by, ny)
    assert main(["bench", str(path), "--epochs", "1", "--num-workers", "0"]) == 0
    assert "100 rows x (3 float32 + 1 int64)" in capsys.readouterr().out
