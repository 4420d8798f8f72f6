"""``python -m dataloader convert INPUT OUTPUT.ndf``: a table to an ``.ndf`` row file.

Inputs (chosen by the file name, or ``--format``):

* ``.npy`` features, with optional labels ``--labels y.npy``;
* ``.npz`` named arrays: ``--features NAME`` (default: the first of x, X,
  features, data in the archive, or its only array) and ``--labels NAME``
  (default: the first of y, Y, labels, target, or no labels);
* ``.csv`` / ``.csv.gz`` of numeric values, with or without a header line of
  column names.  Unless ``--header`` or ``--no-header`` says which, the first
  line (after ``--skip-rows N`` lines) is data when every field is a number
  and a header otherwise; convert prints what it decided.  ``--delimiter``
  is one character, ``'\\t'`` for a tab, or ``whitespace`` for runs of spaces
  and tabs.  ``--columns`` keeps only the feature columns given, in that
  order (the label columns are kept too); ``--drop-columns`` leaves the
  columns given out.
  Columns left out are not parsed, so they may hold text.

Columns (``--label-columns``, ``--columns``, ``--drop-columns``) are given by
position or by name: an integer is always a position (0-based, negative from
the end), even where a header column has that name; ``name:X`` is the header
column named ``X`` (``name:4`` for a column named "4"); any other token is a
name (refused when several header columns have it: give its position).
Positions work for every format, names for CSV with a header.  Give
several columns as several words or separated by commas.

Features and labels are stored as float64 unless ``--dtype`` / ``--label-dtype``
say otherwise: ``--dtype float32 --label-dtype int64`` is what a torch model and
``CrossEntropyLoss`` take (read the labels as a batch of shape (B,) with
``NdfDataset(path, scalar_labels=True)``).  A value the dtype cannot hold as it
is (a label 0.5 or NaN for int64, 300 for int8, 1e300 for float32) is refused,
naming its row and column.  CSV values are read as float64, which rounds
integers past 2**53; for an int64 column they are read exactly from their text
instead (``9007199254740993`` stays itself; ``cli/_exact_ints.py``).  A CSV header's column names are kept in the file
(``info`` shows them).

The input is read and written in blocks, so a file larger than memory
converts in bounded memory.  Output is written by ``NdfWriter`` under a
temporary name and renamed at the end: on any error (bad value, Ctrl-C) no
output file is left behind.
"""

from __future__ import annotations

import argparse
import os
import time

from dataloader.cli._common import (
    CliError,
    add_command,
    add_progress_flag,
    check_output_path,
    format_bytes,
    progress,
)
from dataloader.cli._constants import CSV_CHUNK_ROWS
from dataloader.cli._read_arrays import open_npy, open_npz
from dataloader.cli._read_csv import open_csv
from dataloader.cli._source import Source
from dataloader._ndf.format import DTYPES, ConversionError
from dataloader.ndf import NdfWriter

__all__ = ["add_parser", "run", "open_source", "write_ndf"]

FORMATS = ("npy", "npz", "csv")
DTYPE_NAMES = tuple(t.name for t in DTYPES)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    summary = "convert .npy / .npz / .csv to an .ndf row file"
    p = add_command(subparsers, "convert", summary, __doc__, raw=True)
    _add_input_arguments(p)
    _add_csv_arguments(p)
    _add_output_arguments(p)
    p.set_defaults(run=run)


def _add_input_arguments(p: argparse.ArgumentParser) -> None:
    """INPUT, OUTPUT, ``--format`` and which arrays or columns hold the labels."""
    p.add_argument("input", metavar="INPUT", help="input file: .npy, .npz, .csv or .csv.gz")
    p.add_argument("output", metavar="OUTPUT.ndf", help="output file (written atomically)")
    p.add_argument("--format", choices=FORMATS, help="input format (default: from INPUT's suffix)")
    p.add_argument(
        "--labels",
        metavar="FILE_OR_NAME",
        help=".npy input: a .npy file of labels, shape (n,) or (n, l); "
        ".npz input: the labels' array name",
    )
    p.add_argument("--features", metavar="NAME", help=".npz input: the features' array name")
    p.add_argument(
        "--label-columns",
        metavar="COL",
        nargs="+",
        action="extend",
        default=[],
        help="label columns: an integer is a position (negative from the end), name:X the CSV "
        "column named X, another word a name; also comma-separated",
    )


def _add_csv_arguments(p: argparse.ArgumentParser) -> None:
    """How a CSV file is read: header, skipped lines, columns kept, delimiter, block size."""
    header = p.add_mutually_exclusive_group()
    header.add_argument(
        "--header",
        dest="header",
        action="store_const",
        const=True,
        help="CSV: the first line names the columns (default: it does unless all numbers)",
    )
    header.add_argument(
        "--no-header",
        dest="header",
        action="store_const",
        const=False,
        help="CSV: the first line is data (columns are positions 0..)",
    )
    p.add_argument(
        "--skip-rows",
        metavar="N",
        type=int,
        default=0,
        help="CSV: skip N lines at the start (before the header)",
    )
    select = p.add_mutually_exclusive_group()
    select.add_argument(
        "--columns",
        metavar="COL",
        nargs="+",
        action="extend",
        help="CSV: keep only these feature columns, in this order (and the label columns)",
    )
    select.add_argument(
        "--drop-columns", metavar="COL", nargs="+", action="extend", help="CSV: leave these out"
    )
    p.add_argument(
        "--delimiter",
        help="CSV: one character (default ','), '\\t' for a tab, or 'whitespace' for runs of "
        "spaces and tabs",
    )
    p.add_argument(
        "--chunk-rows", type=int, default=CSV_CHUNK_ROWS,
        help="CSV: lines parsed per block, at most (a block is also at most ~2 MiB of text)",
    )


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    """The stored dtypes, replacing OUTPUT, and what is printed."""
    p.add_argument(
        "--dtype", choices=DTYPE_NAMES, default="float64", metavar="DTYPE",
        help=f"store the features as DTYPE: {', '.join(DTYPE_NAMES)} (default float64)",
    )
    p.add_argument(
        "--label-dtype", choices=DTYPE_NAMES, default="float64", metavar="DTYPE",
        help="store the labels as DTYPE (default float64; int64 for class ids)",
    )
    p.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    add_progress_flag(p)


def detect_format(path: str) -> str:
    lower = path.lower()
    for suffix, fmt in ((".npy", "npy"), (".npz", "npz"), (".csv", "csv"), (".csv.gz", "csv")):
        if lower.endswith(suffix):
            return fmt
    raise CliError(f"cannot tell the format of {path} from its name; pass --format npy|npz|csv")


def _tokens(values: list[str] | None) -> list[str] | None:
    return None if values is None else [t for tok in values for t in tok.split(",") if t]


def parse_delimiter(value: str | None) -> str | None:
    """``--delimiter``: one character, ``\\t`` (a tab), or ``whitespace`` (None: any run).

    Raises:
        CliError: anything else.
    """
    if value is None:
        return ","
    if value == "whitespace":
        return None
    if value == "\\t":
        return "\t"
    if len(value) != 1 or value in "\r\n\"":
        raise CliError(
            f"--delimiter must be one character, '\\t' or 'whitespace', got {value!r}"
        )
    return value


def open_source(args: argparse.Namespace) -> Source:
    """Open ``args.input`` as a :class:`Source` (raises :class:`CliError`)."""
    fmt = args.format or detect_format(args.input)
    tokens = _tokens(args.label_columns) or []
    if not os.path.exists(args.input):
        raise CliError(f"cannot open {args.input}: No such file or directory")
    if os.path.isdir(args.input):
        raise CliError(f"{args.input} is a directory")
    if fmt != "npz" and args.features is not None:
        raise CliError("--features NAME applies to .npz input only")
    if fmt != "csv":
        csv_only = {
            "--header/--no-header": args.header is not None,
            "--skip-rows": args.skip_rows != 0,
            "--columns": args.columns is not None,
            "--drop-columns": args.drop_columns is not None,
            "--delimiter": args.delimiter is not None,
        }
        given = [name for name, used in csv_only.items() if used]
        if given:
            raise CliError(f"{given[0]} applies to CSV input only")
    if fmt == "npy":
        return open_npy(args.input, args.labels, tokens)
    if fmt == "npz":
        return open_npz(args.input, args.features, args.labels, tokens)
    if args.labels is not None:
        raise CliError("CSV input: pick label columns with --label-columns, not --labels")
    delimiter = parse_delimiter(args.delimiter)
    if args.chunk_rows < 1:
        raise CliError(f"--chunk-rows must be >= 1, got {args.chunk_rows}")
    if args.skip_rows < 0:
        raise CliError(f"--skip-rows must be >= 0, got {args.skip_rows}")
    return open_csv(
        args.input,
        tokens,
        header=args.header,
        delimiter=delimiter,
        chunk_rows=args.chunk_rows,
        skip_rows=args.skip_rows,
        columns=_tokens(args.columns),
        drop_columns=_tokens(args.drop_columns),
        x_dtype=args.dtype,
        y_dtype=args.label_dtype,
    )


def write_ndf(
    source: Source, output: str, show_progress: bool | None,
    x_dtype: str = "float64", y_dtype: str = "float64",
) -> int:
    """Write every row of ``source`` to ``output`` as ``x_dtype`` features and
    ``y_dtype`` labels, with the source's column names; return the number of rows.

    Raises:
        CliError: bad data in the input, a value the dtypes cannot hold, or no
            rows; ``output`` is then left untouched.
    """
    try:
        writer = NdfWriter(output, source.d, source.l, x_dtype=x_dtype, y_dtype=y_dtype,
                           feature_names=source.feature_names, label_names=source.label_names)
    except OSError as exc:
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from None
    try:
        with (
            writer,
            progress(
                show_progress,
                total=source.progress_total,
                unit=source.progress_unit,
                unit_scale=True,
                desc=f"convert {os.path.basename(source.path)}",
            ) as bar,
        ):
            for x, y, advance in source.chunks():
                writer.append(x, y)
                bar.update(advance)
            if writer.n == 0:
                raise CliError(f"{source.path}: has no data rows")
    except OSError as exc:  # the readers turn their own errors into CliError
        raise CliError(f"cannot write {output}: {exc.strerror or exc}") from None
    except ConversionError as exc:
        raise CliError(_unfit_value(source, exc)) from None
    return writer.n


def _unfit_value(source: Source, exc: ConversionError) -> str:
    """The one-line message for a value that ``--dtype`` / ``--label-dtype`` cannot hold."""
    labels = exc.part == "y_rows"
    names = source.label_names if labels else source.feature_names
    kind, option = ("label", "--label-dtype") if labels else ("feature", "--dtype")
    column = f"{kind} column {exc.column}" + (f" ({names[exc.column]!r})" if names else "")
    return (
        f"{source.path}: data row {exc.row}, {column}: {exc.value!r} cannot be stored as "
        f"{option} {exc.dtype}: {exc.reason}"
    )


def run(args: argparse.Namespace) -> int:
    check_output_path(args.output, [args.input, args.labels], args.force)
    t0 = time.perf_counter()
    source = open_source(args)
    if not args.quiet:
        for note in source.notes:
            print(f"convert: {note}")
    try:
        n = write_ndf(source, args.output, args.progress, args.dtype, args.label_dtype)
    finally:
        source.close()
    elapsed = time.perf_counter() - t0
    if not args.quiet:
        size = os.path.getsize(args.output)
        dtypes = f" ({args.dtype}, {args.label_dtype} labels)" if source.l else f" ({args.dtype})"
        print(
            f"wrote {args.output}: n={n:,} rows, d={source.d} features, l={source.l} labels"
            f"{dtypes}, {format_bytes(size)} in {elapsed:.2f} s ({n / max(elapsed, 1e-9):,.0f} rows/s)"
        )
    return 0
