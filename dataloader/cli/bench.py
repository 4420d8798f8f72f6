"""``python -m dataloader bench FILE.ndf``: loader throughput against a plain NumPy loop.

Every epoch runs twice over the same batches of row indices: once through
``DataLoader(NdfDataset(FILE))`` (worker threads, native gathering), once
through a plain NumPy loop, ``numpy.memmap(FILE)[batch]``.  Both yield every
row of the file in its dtypes (float64 unless it was written with others); both
include drawing the indices.  Printed per
epoch: rows/s and MB/s (10**6 bytes of rows delivered) of each, and the
loader's ratio to the NumPy loop (> 1: the loader is faster); the median row's ratio
is the median of the epochs' ratios (each epoch beside its own NumPy run), not the
ratio of the two medians.  The first epoch may read the file from disk; later ones
usually come from the page cache.  Epochs shorter than ``SHORT_EPOCH_S`` are
mostly scheduling noise: a note says so.  With ``--num-workers auto`` (the default)
the loader picks its worker count during the first epoch.
After the epochs, the loader's statistics of its last epoch (``DataLoader.stats``)
as a small table; ``--plot FILE.png`` also draws that epoch's timeline of the
consumer's waits and the threads building batches (needs matplotlib: the ``plot``
extra), written at exactly FILE.png; the suffix picks the format (.png, .svg,
.pdf, ...; PNG without one), and the folder and the suffix are checked before
the epochs run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dataloader._sampling.batch import iter_index_arrays
from dataloader._engine.stats import format_duration, workers_text
from dataloader.cli._common import (
    CliError,
    add_command,
    add_progress_flag,
    format_bytes,
    make_loader,
    open_ndf_or_fail,
    progress,
)
from dataloader.cli._plot import check_plot_path, plot_timeline
from dataloader.cli._runtime import describe_runtime
from dataloader.loader import DataLoader
from dataloader.ndf import NDF_HEADER, NdfDataset, NdfFile

FLOAT64 = np.dtype(np.float64)
from dataloader.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["SHORT_EPOCH_S", "add_parser", "numpy_batches", "run"]

# A median epoch shorter than this (seconds) is timed mostly to scheduling noise: the
# shipped digits (1,797 rows) take 0.3-3 ms an epoch, and their ratios swung 0.25-4.9x.
SHORT_EPOCH_S = 0.05


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    summary = "time epochs of DataLoader(NdfDataset) against a plain NumPy loop"
    p = add_command(subparsers, "bench", summary, __doc__)
    p.add_argument("file", metavar="FILE.ndf")
    p.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    p.add_argument(
        "--num-workers", type=_workers, default="auto",
        help="worker threads, or 'auto' (default: the loader picks while it runs; 0 = none, "
        "next() builds the batches)",
    )
    p.add_argument(
        "--prefetch-depth", type=int, default=2, help="batches beyond one per worker (default 2)"
    )
    p.add_argument(
        "--shuffle",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="shuffle the rows every epoch (default: in file order)",
    )
    p.add_argument("--epochs", type=int, default=3, help="epochs (default 3)")
    p.add_argument("--seed", type=int, default=0, help="shuffling seed (default 0)")
    p.add_argument(
        "--baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the plain NumPy loop (default: yes)",
    )
    p.add_argument(
        "--plot",
        metavar="FILE.png",
        default=None,
        help="draw the last epoch's timeline: the consumer's waits and the threads building "
        "batches (needs matplotlib)",
    )
    add_progress_flag(p)
    p.set_defaults(run=run)


def _workers(text: str) -> int | str:
    """``--num-workers``: an int, or ``auto`` (``DataLoader(num_workers="auto")``)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: an int >= 0 or 'auto'") from None


def _check(args: argparse.Namespace) -> None:
    if args.num_workers != "auto" and args.num_workers < 0:
        raise CliError(f"--num-workers must be >= 0 or 'auto', got {args.num_workers}")
    for name, low in (
        ("batch_size", 1),
        ("prefetch_depth", 0),
        ("epochs", 1),
        ("seed", 0),
    ):
        value = getattr(args, name)
        if value < low:
            raise CliError(f"--{name.replace('_', '-')} must be >= {low}, got {value}")
    if args.plot is not None:  # before the epochs run, not after
        args.plot_format = check_plot_path(args.plot)


def _index_batches(
    n: int, batch_size: int, shuffle: bool, seed: int, epoch: int
) -> Iterator[np.ndarray]:
    """Epoch ``epoch``'s batches of indices, exactly as ``DataLoader(shuffle, seed)`` draws them."""
    sampler: Sampler[int] = SequentialSampler(range(n))
    if shuffle:
        sampler = shuffled = RandomSampler(range(n), generator=seed)
        shuffled.set_epoch(epoch)
    return iter_index_arrays(BatchSampler(sampler, batch_size, False))


def numpy_batches(
    path: str,
    n: int,
    d: int,
    l: int,
    batch_size: int,
    shuffle: bool,
    seed: int,
    epoch: int,  # noqa: E741
    *,
    offset: int = NDF_HEADER.size,
    x_dtype: np.dtype = FLOAT64,
    y_dtype: np.dtype = FLOAT64,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The plain NumPy loop: ``(x, y)`` views of ``numpy.memmap(path)[batch]`` per batch.

    ``offset``: the rows' byte offset in the file; ``x_dtype``, ``y_dtype``: the
    file's dtypes (a float64 file is one (n, d + l) array, others a record per row).
    """
    if x_dtype == y_dtype == FLOAT64:
        mm = np.memmap(path, dtype="<f8", mode="r", offset=offset, shape=(n, d + l))
        for idx in _index_batches(n, batch_size, shuffle, seed, epoch):
            rows = mm[idx]
            yield rows[:, :d], rows[:, d:]
        return
    record = np.dtype([("x", x_dtype.newbyteorder("<"), (d,)), ("y", y_dtype.newbyteorder("<"), (l,))])
    records = np.memmap(path, dtype=record, mode="r", offset=offset, shape=(n,))
    for idx in _index_batches(n, batch_size, shuffle, seed, epoch):
        rows = records[idx]
        yield rows["x"], rows["y"]


@dataclass
class _Timings:
    """Per epoch: the loader's and the NumPy loop's (rows/s, MB/s), and the loader's seconds."""

    ours: list[tuple[float, float]] = field(default_factory=list)
    base: list[tuple[float, float]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def _rate(rows: int, nbytes: int, seconds: float) -> tuple[float, float]:
    s = max(seconds, 1e-9)
    return rows / s, nbytes / s / 1e6


def _open_loader(args: argparse.Namespace) -> tuple[NdfFile, DataLoader]:
    """The file and a loader over it; the file is closed if the loader cannot be made.

    Raises:
        CliError: the file cannot be opened, has no rows, or the loader options are invalid.
    """
    file = open_ndf_or_fail(args.file)
    if file.n == 0:
        file.close()
        raise CliError(f"{args.file}: has no rows")
    try:
        loader = make_loader(
            NdfDataset(file),
            batch_size=args.batch_size,
            shuffle=args.shuffle,
            num_workers=args.num_workers,
            prefetch_depth=args.prefetch_depth,
            seed=args.seed,
        )
    except CliError:
        file.close()
        raise
    return file, loader


def _print_setup(args: argparse.Namespace, file: NdfFile) -> None:
    """The file's shape and size, the options and the runtime, and the table's header."""
    n, d, l = file.n, file.d, file.l  # noqa: E741
    row_bytes = d * file.x_dtype.itemsize + l * file.y_dtype.itemsize
    parts = f"{d + l} float64" if file.x_dtype == file.y_dtype == FLOAT64 else (
        f"({d} {file.x_dtype}" + (f" + {l} {file.y_dtype})" if l else ")"))
    print(
        f"bench {args.file}: {n:,} rows x {parts} ({format_bytes(n * row_bytes)} of rows), "
        f"access={file.access}"
    )
    print(
        f"batch_size={args.batch_size} num_workers={args.num_workers} "
        f"prefetch_depth={args.prefetch_depth} shuffle={args.shuffle} epochs={args.epochs}; "
        f"{describe_runtime()}"
    )
    header = f"{'epoch':>6}  {'loader rows/s':>14} {'MB/s':>8}"
    if args.baseline:
        header += f"  {'numpy rows/s':>14} {'MB/s':>8}  {'ratio':>6}"
    print(header)


def _loader_epoch(args: argparse.Namespace, loader: Any, epoch: int) -> tuple[int, int, float]:
    """One epoch through the loader (a ``DataLoader``; ``Any`` because its epoch iterator's
    type declares no ``__next__``): (rows, bytes of rows, seconds)."""
    rows = nbytes = 0
    with progress(args.progress, total=len(loader), unit="batch", desc=f"epoch {epoch + 1}") as bar:
        t0 = time.perf_counter()
        for x, y in loader:
            rows += x.shape[0]
            nbytes += x.nbytes + y.nbytes
            bar.update()
        seconds = time.perf_counter() - t0
    return rows, nbytes, seconds


def _numpy_epoch(args: argparse.Namespace, file: NdfFile, epoch: int) -> tuple[float, float]:
    """One epoch of the plain NumPy loop over the same batches: (rows/s, MB/s)."""
    t0 = time.perf_counter()
    rows = nbytes = 0
    for x, y in numpy_batches(
        args.file, file.n, file.d, file.l, args.batch_size, args.shuffle, args.seed, epoch,
        offset=file.data_offset, x_dtype=file.x_dtype, y_dtype=file.y_dtype,
    ):
        rows += x.shape[0]
        nbytes += x.nbytes + y.nbytes
    return _rate(rows, nbytes, time.perf_counter() - t0)


def _run_epochs(args: argparse.Namespace, file: NdfFile, loader: DataLoader) -> _Timings:
    """Every epoch, the loader then (with ``--baseline``) the NumPy loop; a line each.

    Raises:
        RuntimeError: the loader delivered another number of rows than the file holds.
    """
    timings = _Timings()
    for epoch in range(args.epochs):
        rows, nbytes, seconds = _loader_epoch(args, loader, epoch)
        timings.seconds.append(seconds)
        if rows != file.n:
            raise RuntimeError(f"the loader delivered {rows} rows of {file.n}")
        ours = _rate(rows, nbytes, seconds)
        timings.ours.append(ours)
        line = f"{epoch + 1:>6}  {ours[0]:>14,.0f} {ours[1]:>8,.0f}"
        if args.baseline:
            base = _numpy_epoch(args, file, epoch)
            timings.base.append(base)
            line += f"  {base[0]:>14,.0f} {base[1]:>8,.0f}  {ours[0] / base[0]:>5.2f}x"
        print(line, flush=True)
    return timings


def _print_medians(args: argparse.Namespace, timings: _Timings) -> None:
    """The median row, and a note when the epochs were too short to time."""
    ours, base = timings.ours, timings.base
    med = statistics.median(r for r, _ in ours)
    line = f"{'median':>6}  {med:>14,.0f} {statistics.median(m for _, m in ours):>8,.0f}"
    if args.baseline:
        bmed = statistics.median(r for r, _ in base)
        # the median of the per-epoch ratios (each epoch ran beside its own baseline run)
        ratio = statistics.median(o[0] / b[0] for o, b in zip(ours, base))
        line += f"  {bmed:>14,.0f} {statistics.median(m for _, m in base):>8,.0f}  {ratio:>5.2f}x"
    print(line)
    epoch_s = statistics.median(timings.seconds)
    if epoch_s < SHORT_EPOCH_S:
        print(f"note: an epoch took {format_duration(epoch_s)}: too short to time reliably (scheduling "
              "noise moves each figure several-fold); use a larger file or more --epochs")


def _print_last_epoch(args: argparse.Namespace, loader: DataLoader) -> None:
    """The loader's statistics of its last epoch, and with ``--plot`` its timeline."""
    stats = loader.stats
    assert stats is not None
    print(f"last epoch (DataLoader.stats, num_workers={loader.num_workers!r}):")
    print(stats.table())
    if args.plot is not None:
        title = f"{args.file}: epoch {stats.epoch + 1}, num_workers={loader.num_workers!r}"
        if loader.num_workers == "auto":
            title += f" ({workers_text(stats)})"
        plot_timeline(stats, args.plot, title, fmt=args.plot_format)
        print(f"timeline written to {args.plot}")


def run(args: argparse.Namespace) -> int:
    _check(args)
    file, loader = _open_loader(args)
    _print_setup(args, file)
    try:
        timings = _run_epochs(args, file, loader)
    finally:
        loader.close()
        file.close()
    _print_medians(args, timings)
    _print_last_epoch(args, loader)
    return 0
