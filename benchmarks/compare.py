"""Side by side: this loader vs a plain NumPy loop vs ``torch.utils.data.DataLoader``.

One process per interpreter runs every workload and prints Markdown tables of
items/s and ratios (docs/benchmarks.md holds the tables from both interpreters).
Command lines, from the repository root after building in place with the same
interpreter (``python setup.py build_ext --inplace -q``)::

    PYTHONPATH=. /work/venvs/torch311/bin/python benchmarks/compare.py   # 3.11 + torch
    PYTHONPATH=. /work/venvs/py313t/bin/python benchmarks/compare.py     # 3.13t, no torch
    PYTHONPATH=. python benchmarks/compare.py --quick                    # ~CI-sized

Workloads (``--rows`` / ``--items`` shrink them; ``--quick`` = 100,000 rows, 2,000 items):

* W1, in-memory rows: 1,000,000 x 32 float64, batch 256, shuffled.  Baseline: the
  plain NumPy loop ``x[perm[i:i + 256]]``.  Ours: ``DataLoader(ArrayDataset(x))`` with
  0 and 2 workers.  torch: ``DataLoader`` over our ``ArrayDataset`` (torch calls its
  ``__getitems__``; a ``collate_fn`` wraps the columns with ``torch.from_numpy``) and
  over ``TensorDataset`` (torch's per-row path and ``default_collate``), 0 and 2
  worker processes.
* W2, the same rows (plus one label column: 264-byte rows) from a page-cached
  ``.ndf`` file.  Baseline: ``numpy.memmap`` fancy indexing.  Also a per-row
  ``os.pread`` loop in Python (timed on the first 200 batches only), ours over
  ``NdfDataset`` with 0 and 2 workers, torch over ``NdfDataset`` with 0 and 2
  worker processes.
* W3, pure-Python items: ``__getitem__`` runs a ~30 µs Python loop (500 steps);
  20,000 items, batch 64.  Baseline: a plain loop ``[ds[i] for i in batch]`` +
  ``numpy.asarray``.  Ours with 0, 1 and 2 workers; torch with 0 and 2 worker
  processes.

Every figure is the median of 3 timed epochs after one warm-up epoch (which also
starts torch's worker processes: ``persistent_workers=True``, fork start method),
from ONE run.  On a shared 2-core machine absolute figures move by +-20% with
other load; compare the ratios within a table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from dataloader import ArrayDataset, DataLoader, Dataset
from dataloader.ndf import NDF_HEADER, NdfDataset, NdfWriter

try:
    import torch
    import torch.utils.data as tud
except ImportError:  # torch is optional: only the 3.11 benchmark venv has it
    torch = None

BATCH_W12 = 256
BATCH_W3 = 64
D = 32
ITEM_LOOP_STEPS = 500  # ~25-35 µs of pure Python per item on this machine
PREAD_BATCHES = 200  # the Python os.pread loop is slow: time this many batches
NDF_HEADER_BYTES = NDF_HEADER.size  # 28: magic + n, d, l as u64


@dataclass
class Row:
    method: str
    items_per_s: float
    note: str = ""


def median_epoch_s(epoch: Callable[[], int], epochs: int) -> tuple[float, int]:
    """Run one warm-up epoch, then ``epochs`` timed ones; (median seconds, items per epoch)."""
    items = epoch()
    times = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        items = epoch()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), items


def measure(method: str, epoch: Callable[[], int], epochs: int, note: str = "") -> Row:
    seconds, items = median_epoch_s(epoch, epochs)
    row = Row(method, items / seconds, note)
    print(f"  {method}: {row.items_per_s:,.0f} items/s", file=sys.stderr, flush=True)
    return row


def drain(loader: object) -> int:
    """One epoch; returns the number of rows (first dimension of the first column)."""
    rows = 0
    for batch in loader:  # type: ignore[attr-defined]
        first = batch[0] if isinstance(batch, (list, tuple)) else batch
        rows += len(first)
    return rows


def torch_columns(batch: object) -> list[object]:
    """torch ``collate_fn`` for a ``BatchedItems`` from ``__getitems__``: columns as tensors."""
    return [torch.from_numpy(c) for c in batch.columns]  # type: ignore[attr-defined]


def run_loader(make: Callable[[], object], epochs: int, method: str, note: str = "") -> Row:
    """Time a loader built by ``make`` and shut it down (our threads / torch's processes)."""
    loader = make()
    try:
        return measure(method, lambda: drain(loader), epochs, note)
    finally:
        close = getattr(loader, "close", None)
        if close is not None:
            close()


def torch_loader(
    dataset: object, batch: int, workers: int, shuffle: bool, collate: object = None
) -> object:
    kwargs = {"persistent_workers": True} if workers else {}
    return tud.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=shuffle,
        num_workers=workers,
        collate_fn=collate,
        **kwargs,
    )


# -- W1 ------------------------------------------------------------------------------------


def w1(rows: int, epochs: int, use_torch: bool) -> list[Row]:
    x = np.random.default_rng(0).standard_normal((rows, D))
    rng = np.random.default_rng(1)

    def numpy_epoch() -> int:
        perm = rng.permutation(rows)
        n = 0
        for i in range(0, rows, BATCH_W12):
            n += len(x[perm[i : i + BATCH_W12]])
        return n

    out = [measure("NumPy loop x[perm[i:i+256]]", numpy_epoch, epochs, "baseline")]
    ds = ArrayDataset(x)
    for w in (0, 2):
        out.append(
            run_loader(
                lambda w=w: DataLoader(
                    ds, batch_size=BATCH_W12, shuffle=True, num_workers=w, seed=0
                ),
                epochs,
                f"dataloader ArrayDataset, {w} workers",
            )
        )
    if use_torch:
        tds = tud.TensorDataset(torch.from_numpy(x))
        for w in (0, 2):
            out.append(
                run_loader(
                    lambda w=w: torch_loader(ds, BATCH_W12, w, True, torch_columns),
                    epochs,
                    f"torch ArrayDataset (__getitems__), {w} workers",
                )
            )
        for w in (0, 2):
            out.append(
                run_loader(
                    lambda w=w: torch_loader(tds, BATCH_W12, w, True),
                    epochs,
                    f"torch TensorDataset, {w} workers",
                )
            )
    return out


# -- W2 ------------------------------------------------------------------------------------


def write_ndf(folder: str, rows: int) -> str:
    path = os.path.join(folder, "w2.ndf")
    rng = np.random.default_rng(0)
    with NdfWriter(path, D, 1) as w:
        for start in range(0, rows, 100_000):
            k = min(100_000, rows - start)
            w.append(rng.standard_normal((k, D)), rng.standard_normal((k, 1)))
    return path


def w2(rows: int, epochs: int, use_torch: bool) -> list[Row]:
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as folder:
        path = write_ndf(folder, rows)
        mm = np.memmap(path, dtype="<f8", mode="r", offset=NDF_HEADER_BYTES, shape=(rows, D + 1))

        def memmap_epoch() -> int:
            perm = rng.permutation(rows)
            n = 0
            for i in range(0, rows, BATCH_W12):
                n += len(mm[perm[i : i + BATCH_W12]])
            return n

        out = [measure("numpy.memmap fancy indexing", memmap_epoch, epochs, "baseline")]
        fd = os.open(path, os.O_RDONLY)
        row_bytes = (D + 1) * 8

        def pread_epoch() -> int:
            perm = rng.permutation(rows)
            n = 0
            for i in range(0, min(rows, PREAD_BATCHES * BATCH_W12), BATCH_W12):
                idx = perm[i : i + BATCH_W12].tolist()
                raw = b"".join(
                    [os.pread(fd, row_bytes, NDF_HEADER_BYTES + j * row_bytes) for j in idx]
                )
                n += len(np.frombuffer(raw, dtype="<f8").reshape(-1, D + 1))
            return n

        try:
            out.append(
                measure(
                    "os.pread per row (Python loop)",
                    pread_epoch,
                    epochs,
                    f"first {PREAD_BATCHES} batches",
                )
            )
        finally:
            os.close(fd)
        ds = NdfDataset(path)
        for w in (0, 2):
            out.append(
                run_loader(
                    lambda w=w: DataLoader(
                        ds, batch_size=BATCH_W12, shuffle=True, num_workers=w, seed=0
                    ),
                    epochs,
                    f"dataloader NdfDataset, {w} workers",
                )
            )
        if use_torch:
            for w in (0, 2):
                out.append(
                    run_loader(
                        lambda w=w: torch_loader(ds, BATCH_W12, w, True, torch_columns),
                        epochs,
                        f"torch NdfDataset (__getitems__), {w} workers",
                    )
                )
        ds.close()
    return out


# -- W3 ------------------------------------------------------------------------------------


class PythonItems(Dataset):
    """Items that cost ~30 µs of pure Python each (no NumPy, no I/O)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> float:
        s = 0
        for k in range(ITEM_LOOP_STEPS):
            s += (k ^ i) & 7
        return float(s)


def w3(items: int, epochs: int, use_torch: bool) -> list[Row]:
    ds = PythonItems(items)

    def plain_epoch() -> int:
        n = 0
        for i in range(0, items, BATCH_W3):
            n += len(np.asarray([ds[j] for j in range(i, min(items, i + BATCH_W3))]))
        return n

    out = [measure("plain loop [ds[i] for i in batch]", plain_epoch, epochs, "baseline")]
    for w in (0, 1, 2):
        out.append(
            run_loader(
                lambda w=w: DataLoader(ds, batch_size=BATCH_W3, num_workers=w),
                epochs,
                f"dataloader, {w} workers",
            )
        )
    if use_torch:
        for w in (0, 2):
            out.append(
                run_loader(
                    lambda w=w: torch_loader(ds, BATCH_W3, w, False), epochs, f"torch, {w} workers"
                )
            )
    return out


# -- report --------------------------------------------------------------------------------


def machine() -> Iterator[str]:
    gil = (
        "no GIL (free-threaded)"
        if sysconfig.get_config_var("Py_GIL_DISABLED") and not sys._is_gil_enabled()
        else "GIL"
    )
    name = f"{platform.python_implementation()} {platform.python_version()}"
    yield f"- interpreter: {name}, {gil}; {sys.executable}"
    versions = f"numpy {np.__version__}" + (
        f", torch {torch.__version__}" if torch is not None else ", torch absent"
    )
    yield f"- {versions}; {os.cpu_count()} CPUs"
    try:
        model = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        name = next(
            (
                line.split(":", 1)[1].strip()
                for line in model.splitlines()
                if line.startswith("Model name")
            ),
            "",
        )
        yield f"- CPU: {name} ({platform.machine()}), {platform.platform()}"
    except (OSError, subprocess.SubprocessError):
        pass


def parallelism_probe() -> float:
    """How many CPUs this run really gets: the speedup of 2 processes over 1 on a pure loop.

    ~2.0 on an idle 2-core machine; ~1.0 when other work holds a core (then no
    2-worker figure below can show scaling).
    """
    code = "s = 0\nfor k in range(5_000_000): s += k & 7"

    def wall(count: int) -> float:
        t0 = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(count)]
        for proc in procs:
            proc.wait()
        return time.perf_counter() - t0

    one = min(wall(1) for _ in range(2))
    two = min(wall(2) for _ in range(2))
    return 2 * one / two


def table(title: str, rows: list[Row]) -> Iterator[str]:
    base = rows[0].items_per_s
    yield f"\n### {title}\n"
    yield "| method | items/s | ratio to baseline | note |"
    yield "|---|---:|---:|---|"
    for r in rows:
        yield f"| {r.method} | {r.items_per_s:,.0f} | {r.items_per_s / base:.2f}x | {r.note} |"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--rows", type=int, default=1_000_000, help="rows of W1 and W2 (default 1,000,000)"
    )
    p.add_argument("--items", type=int, default=20_000, help="items of W3 (default 20,000)")
    p.add_argument(
        "--epochs", type=int, default=3, help="timed epochs per method (median; default 3)"
    )
    p.add_argument("--quick", action="store_true", help="--rows 100000 --items 2000")
    p.add_argument(
        "--only", default="W1,W2,W3", help="comma-separated workloads (default W1,W2,W3)"
    )
    p.add_argument("--no-torch", action="store_true", help="skip torch even when it is importable")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.items = 100_000, 2_000
    use_torch = torch is not None and not args.no_torch
    only = {w.strip().upper() for w in args.only.split(",")}
    lines = [
        "## "
        + ("3.13t" if sysconfig.get_config_var("Py_GIL_DISABLED") else platform.python_version()),
        "",
    ]
    lines += list(machine())
    lines.append(
        f"- available parallelism at start: 2 processes ran {parallelism_probe():.2f}x one "
        f"(2.00x = two idle cores); load average {os.getloadavg()[0]:.2f}"
    )
    lines.append(
        f"- command: `{' '.join(['python', *sys.argv])}`; "
        f"median of {args.epochs} epochs after a warm-up, one run"
    )
    workloads = [
        (
            "W1",
            f"W1: in-memory rows, {args.rows:,} x {D} float64, batch {BATCH_W12}, shuffled",
            lambda: w1(args.rows, args.epochs, use_torch),
        ),
        (
            "W2",
            f"W2: page-cached .ndf, {args.rows:,} rows x {D}+1 float64, "
            f"batch {BATCH_W12}, shuffled",
            lambda: w2(args.rows, args.epochs, use_torch),
        ),
        (
            "W3",
            f"W3: pure-Python items (~30 µs), {args.items:,} items, batch {BATCH_W3}",
            lambda: w3(args.items, args.epochs, use_torch),
        ),
    ]
    for key, title, run in workloads:
        if key in only:
            print(f"{title} ...", file=sys.stderr, flush=True)
            lines += table(title, run())
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
