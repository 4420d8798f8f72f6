"""``python -m dataloader info FILE.ndf``: what is in an ``.ndf`` file.

Prints the format version and dtypes, n, d, l, the column names the file
keeps (``convert`` keeps a CSV header's), the size on disk, the first rows,
and per-column min / mean / max (and NaN counts) computed by streaming the
file in blocks, so a file larger than memory is summarised in bounded memory.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from dataloader.cli._common import (
    CliError,
    add_command,
    add_progress_flag,
    format_bytes,
    open_ndf_or_fail,
    progress,
)
from dataloader.cli._constants import INFO_HEAD_ROWS, INFO_MAX_COLUMNS
from dataloader.cli._stats import ColumnStats, block_rows, column_stats
from dataloader.ndf import NdfFile

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    summary = "show the shape, size, first rows and column statistics of an .ndf file"
    p = add_command(subparsers, "info", summary, __doc__)
    p.add_argument("file", metavar="FILE.ndf")
    p.add_argument(
        "--head",
        type=int,
        default=INFO_HEAD_ROWS,
        metavar="ROWS",
        help=f"rows to print (default {INFO_HEAD_ROWS})",
    )
    p.add_argument(
        "--max-columns",
        type=int,
        default=INFO_MAX_COLUMNS,
        metavar="N",
        help=f"feature columns listed in the statistics (default {INFO_MAX_COLUMNS}; 0 = all)",
    )
    p.add_argument(
        "--no-stats", action="store_true", help="skip the statistics (no pass over the file)"
    )
    add_progress_flag(p)
    p.set_defaults(run=run)


def _fmt(v: float) -> str:
    return "nan" if np.isnan(v) else f"{v:.6g}"


def run(args: argparse.Namespace) -> int:
    if args.head < 0:
        raise CliError(f"--head must be >= 0, got {args.head}")
    if args.max_columns < 0:
        raise CliError(f"--max-columns must be >= 0, got {args.max_columns}")
    with open_ndf_or_fail(args.file, advice="sequential") as f:
        n, d, l = f.n, f.d, f.l  # noqa: E741
        size = os.path.getsize(args.file)
        print(f"file           {args.file}")
        print(f"format         .ndf version {f.version}: {_dtypes_text(f)}")
        print(f"rows (n)       {n:,}")
        print(f"features (d)   {d:,}")
        print(f"labels (l)     {l:,}")
        for title, kept in (("feature names", f.feature_names), ("label names", f.label_names)):
            if kept is not None:
                print(f"{title:<14} {_names_text(kept, args.max_columns)}")
        row = d * f.x_dtype.itemsize + l * f.y_dtype.itemsize
        parts = f"{d + l} float64" if f.x_dtype == f.y_dtype == np.float64 else (
            f"{d} {f.x_dtype}" + (f" + {l} {f.y_dtype}" if l else ""))
        print(f"row            {row:,} bytes ({parts})")
        print(f"size on disk   {size:,} bytes ({format_bytes(size)}); access={f.access}")
        head = min(args.head, n)
        if head:
            print(f"first {head} rows:")
            x, y = f.read_rows(np.arange(head))
            for i in range(head):
                line = f"  [{i}] x = {_row_text(x[i])}"
                if l:
                    line += f"  y = {_row_text(y[i])}"
                print(line)
        if args.no_stats or n == 0:
            return 0
        with progress(
            args.progress, total=n, unit="rows", unit_scale=True, desc="statistics"
        ) as bar:
            stats = column_stats(f, bar.update)
    names: list[str | None] = [*(f.feature_names or [None] * d), *(f.label_names or [None] * l)]
    _print_stats(stats, d, l, args.max_columns, block_rows(d, l), names)
    return 0


def _dtypes_text(f: NdfFile) -> str:
    """``features float32, labels int64`` (or ``float64`` for both alike)."""
    x, y, l = f.x_dtype, f.y_dtype, f.l  # noqa: E741
    if x == y or not l:
        return f"{x}"
    return f"features {x}, labels {y}"


def _names_text(names: tuple[str, ...], max_columns: int) -> str:
    """The names, quoted; the first ``max_columns`` (0: all) and how many there are."""
    shown = names if max_columns == 0 or len(names) <= max_columns else names[:max_columns]
    text = ", ".join(repr(v) for v in shown)
    return text if len(shown) == len(names) else f"{text}, ... ({len(names):,} names)"


def _row_text(row: np.ndarray) -> str:
    return np.array2string(
        row, precision=4, threshold=16, edgeitems=4, max_line_width=10**6, suppress_small=True
    )


def _print_stats(  # noqa: E741 - l is the format's name for the label count
    stats: ColumnStats, d: int, l: int, max_columns: int, block: int, col_names: list[str | None]
) -> None:
    shown = list(range(d)) if max_columns == 0 or d <= max_columns else list(range(max_columns))
    print(
        f"column statistics ({stats.rows:,} rows, "
        f"streamed in blocks of {min(block, stats.rows):,} rows):"
    )
    names = [f"x[{j}]" for j in shown] + [f"y[{j}]" for j in range(l)]
    idx = shown + [d + j for j in range(l)]
    width = max(len(s) for s in names + ["column"])
    print(f"  {'column':<{width}} {'min':>12} {'mean':>12} {'max':>12} {'nan':>8}")
    for name, j in zip(names, idx, strict=True):
        if name.startswith("y") and len(shown) < d and j == d:
            print(f"  ... {d - len(shown)} more feature columns (--max-columns 0 lists them all)")
        print(
            f"  {name:<{width}} {_fmt(stats.minimum[j]):>12} {_fmt(stats.mean[j]):>12} "
            f"{_fmt(stats.maximum[j]):>12} {int(stats.nan_count[j]):>8}"
            + (f"  {col_names[j]!r}" if col_names[j] is not None else "")
        )
    if len(shown) < d and l == 0:
        print(f"  ... {d - len(shown)} more feature columns (--max-columns 0 lists them all)")
    if stats.distinct is not None:
        v = stats.distinct
        kind = "integers" if np.all(v == np.round(v)) else "values"
        print(f"labels: y[0] takes {len(v):,} distinct {kind} from {_fmt(v[0])} to {_fmt(v[-1])}")
