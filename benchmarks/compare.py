"""Side by side: this loader vs a plain NumPy loop vs ``torch.utils.data.DataLoader``.

One process per interpreter runs every workload and prints Markdown tables of
items/s and ratios (docs/benchmarks.md holds the tables from both interpreters).
Command lines, from the repository root after building in place with the same
interpreter (``python setup.py build_ext --inplace -q``)::

    PYTHONPATH=. python benchmarks/compare.py            # torch rows where torch imports
    PYTHONPATH=. python benchmarks/compare.py --no-torch # ours and the plain loops only
    PYTHONPATH=. python benchmarks/compare.py --quick    # ~CI-sized
    PYTHONPATH=. python benchmarks/compare.py --json out.json  # also the figures as JSON

``--json`` writes what the tables show (the machine, the load, every row) for
``benchmarks/report.py``, which renders docs/benchmarks.md's tables from it.

Workloads (``--rows`` / ``--items`` shrink them; ``--quick`` = 100,000 rows, 2,000 items):

* W1, in-memory rows: 1,000,000 x 32 float64, batch 256, shuffled.  Baseline: the
  plain NumPy loop ``x[perm[i:i + 256]]``.  Ours: ``DataLoader(ArrayDataset(x))``.  torch: ``DataLoader`` over our ``ArrayDataset`` (torch calls its
  ``__getitems__``; a ``collate_fn`` wraps the columns with ``torch.from_numpy``) and
  over ``TensorDataset`` (torch's per-row path and ``default_collate``), 0 and 2
  worker processes.
* W2, the same rows (plus one label column: 264-byte rows) from a page-cached
  ``.ndf`` file.  Baseline: ``numpy.memmap`` fancy indexing.  Also a per-row
  ``os.pread`` loop in Python (timed on the first 200 batches only), ours over
  ``NdfDataset``, torch over ``NdfDataset`` with 0 and 2
  worker processes.
* W3, pure-Python items: ``__getitem__`` runs a ~30 µs Python loop (500 steps);
  20,000 items, batch 64.  Baseline: a plain loop ``[ds[i] for i in batch]`` +
  ``numpy.asarray``.  Ours with 0, 1 and 2 workers; torch with 0 and 2 worker
  processes.
* W4, images: 512 JPEGs of 256x256 (``_w4_data.py``, made from tests/data photos);
  decode, ``RandomResizedCrop(224)``, horizontal flip, normalize, NCHW float32, batch
  32.  Baseline: the same pipeline per item in Pillow + NumPy, sequential
  (``_w4_data.reference_item``, as a torchvision user writes it).  Ours:
  ``ImageFiles`` + ``Decode().then(...)`` + ``ImageCollator``.

Ours run with 0, 1, 2 and ``"auto"`` workers (``"auto"`` settles in the warm-up
epoch).  The contenders of one workload are timed round-robin: one warm-up epoch
each (which also starts torch's worker processes: ``persistent_workers=True``,
fork start method), then 3 rounds of one epoch each; every figure is the median,
from ONE run.  The last table gives the worker figures as ratios.  On a shared 2-core machine absolute figures move by +-20% with
other load; compare the ratios within a table.
"""

from __future__ import annotations

import argparse
import json
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
from pathlib import Path

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


Contender = tuple[str, Callable[[], tuple[Callable[[], int], Callable[[], None]]], str]
"""(method, make() -> (epoch, close), note): what ``interleaved`` times.  ``epoch`` may carry
a ``note()`` attribute (``loader_contender``: the count "auto" settled on), read after the
rounds and added to ``note``."""


def interleaved(contenders: list[Contender], epochs: int) -> list[Row]:
    """Time every contender's epochs round-robin (one warm-up each, then ``epochs`` rounds),
    so load that comes and goes hits all of them alike; median seconds per contender."""
    made = []
    try:
        for method, make, note in contenders:
            epoch, close = make()
            made.append((method, epoch, close, note))
        items = [epoch() for _, epoch, _, _ in made]  # warm-up ("auto" settles here)
        times: list[list[float]] = [[] for _ in made]
        for _ in range(epochs):
            for i, (_, epoch, _, _) in enumerate(made):
                t0 = time.perf_counter()
                epoch()
                times[i].append(time.perf_counter() - t0)
        notes = [getattr(epoch, "note", lambda: "")() for _, epoch, _, _ in made]  # before close()
    finally:
        for _, _, close, _ in made:
            close()
    out = []
    for (method, _, _, note), n, ts, extra in zip(made, items, times, notes):
        out.append(Row(method, n / statistics.median(ts), "; ".join(t for t in (note, extra) if t)))
        print(f"  {method}: {out[-1].items_per_s:,.0f} items/s", file=sys.stderr, flush=True)
    return out


def plain(epoch: Callable[[], int]) -> Callable[[], tuple[Callable[[], int], Callable[[], None]]]:
    return lambda: (epoch, lambda: None)


def loader_contender(make: Callable[[], object]) -> Callable[[], tuple[Callable[[], int], Callable[[], None]]]:
    def start() -> tuple[Callable[[], int], Callable[[], None]]:
        loader = make()

        class Epoch:
            def __call__(self) -> int:
                return drain(loader)

            def note(self) -> str:
                stats = getattr(loader, "stats", None)
                if getattr(loader, "num_workers", None) != "auto" or stats is None:
                    return ""
                n = stats.active_workers
                return "settled inline (0 workers)" if n == 0 else f"settled on {workers(n)}"

        return Epoch(), getattr(loader, "close", lambda: None)

    return start


WORKERS = (0, 1, 2, "auto")


def workers(w: int | str) -> str:
    """A row's worker setting: "1 worker", "2 workers", "auto workers"."""
    return "1 worker" if w == 1 else f"{w} workers"


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

    ds = ArrayDataset(x)
    cs: list[Contender] = [("NumPy loop x[perm[i:i+256]]", plain(numpy_epoch), "baseline")]
    for w in WORKERS:
        make = lambda w=w: DataLoader(ds, batch_size=BATCH_W12, shuffle=True, num_workers=w, seed=0)  # noqa: E731
        cs.append((f"dataloader ArrayDataset, {workers(w)}", loader_contender(make), ""))
    if use_torch:
        tds = tud.TensorDataset(torch.from_numpy(x))
        for w in (0, 2):
            make = lambda w=w: torch_loader(ds, BATCH_W12, w, True, torch_columns)  # noqa: E731
            cs.append((f"torch ArrayDataset (__getitems__), {workers(w)}", loader_contender(make), ""))
        for w in (0, 2):
            make = lambda w=w: torch_loader(tds, BATCH_W12, w, True)  # noqa: E731
            cs.append((f"torch TensorDataset, {workers(w)}", loader_contender(make), ""))
    return interleaved(cs, epochs)


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

        cs: list[Contender] = [("numpy.memmap fancy indexing", plain(memmap_epoch), "baseline")]
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

        cs.append(("os.pread per row (Python loop)", plain(pread_epoch), f"first {PREAD_BATCHES} batches"))
        ds = NdfDataset(path)
        for w in WORKERS:
            make = lambda w=w: DataLoader(ds, batch_size=BATCH_W12, shuffle=True, num_workers=w, seed=0)  # noqa: E731
            cs.append((f"dataloader NdfDataset, {workers(w)}", loader_contender(make), ""))
        if use_torch:
            for w in (0, 2):
                make = lambda w=w: torch_loader(ds, BATCH_W12, w, True, torch_columns)  # noqa: E731
                cs.append((f"torch NdfDataset (__getitems__), {workers(w)}", loader_contender(make), ""))
        try:
            out = interleaved(cs, epochs)
        finally:
            os.close(fd)
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

    cs: list[Contender] = [("plain loop [ds[i] for i in batch]", plain(plain_epoch), "baseline")]
    for w in WORKERS:
        make = lambda w=w: DataLoader(ds, batch_size=BATCH_W3, num_workers=w)  # noqa: E731
        cs.append((f"dataloader, {workers(w)}", loader_contender(make), ""))
    if use_torch:
        for w in (0, 2):
            make = lambda w=w: torch_loader(ds, BATCH_W3, w, False)  # noqa: E731
            cs.append((f"torch, {workers(w)}", loader_contender(make), ""))
    return interleaved(cs, epochs)


# -- W4 ------------------------------------------------------------------------------------

W4_SEED = 1234


def w4(epochs: int) -> list[Row]:
    """512 JPEGs of 256x256 (``_w4_data``): decode, RandomResizedCrop(224), flip, normalize, CHW."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _w4_data import BATCH, CROP_PX, MEAN, STD, make_jpegs, reference_item

    from dataloader.image import Decode, ImageCollator, ImageFiles, RandomHorizontalFlip, RandomResizedCrop

    with tempfile.TemporaryDirectory() as tmp:
        paths = make_jpegs(Path(tmp))

        def reference_epoch() -> int:
            n = 0
            for s in range(0, len(paths), BATCH):
                rows = range(s, min(s + BATCH, len(paths)))
                n += len(np.stack([reference_item(paths[i], np.random.default_rng((W4_SEED, i))) for i in rows]))
            return n

        cs: list[Contender] = [("Pillow + NumPy per item, sequential", plain(reference_epoch), "baseline")]
        dataset = ImageFiles(paths)

        def make(w: int | str) -> DataLoader:
            transform = Decode().then(RandomResizedCrop(CROP_PX)).then(RandomHorizontalFlip())
            return DataLoader(
                dataset, batch_size=BATCH, num_workers=w, seed=W4_SEED, transform=transform,
                collate_fn=ImageCollator("NCHW", np.float32, MEAN, STD), persistent_workers=w != 0,
            )

        for w in WORKERS:
            cs.append((f"dataloader ImageFiles + transform + ImageCollator, {workers(w)}",
                       loader_contender(lambda w=w: make(w)), ""))
        return interleaved(cs, epochs)


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
    yield f"- CPU: {cpu_model()} ({platform.machine()}), {platform.platform()}"


def cpu_model() -> str:
    """``lscpu``'s "Model name", or "" where it is missing."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "")


def git_commit() -> str:
    """The checkout's short commit, "+dirty" when tracked files differ from it; "" outside git."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    if head.returncode != 0:
        return ""
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


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


def worker_ratios(results: dict[str, list[Row]]) -> Iterator[str]:
    """This run's worker figures as ratios: per workload, each worker setting to the
    baseline and to 0 workers, and "auto" to the best fixed count measured here (0, 1, 2)."""
    yield "\n### Workers: ratios from this run (auto / best fixed: \"auto\" against the best of 0, 1, 2)\n"
    yield "| workload | vs baseline: 0 / 1 / 2 / auto workers | vs 0 workers: 1 / 2 / auto | auto / best fixed |"
    yield "|---|---|---|---:|"
    for key, rows in results.items():
        ours = {r.method.rsplit(", ", 1)[-1].split()[0]: r.items_per_s for r in rows if r.method.startswith("dataloader")}
        base = rows[0].items_per_s
        if "0" not in ours:
            continue
        fixed = [ours[w] for w in ("0", "1", "2") if w in ours]
        to_base = " / ".join(f"{ours[w] / base:.2f}x" for w in ("0", "1", "2", "auto") if w in ours)
        to_zero = " / ".join(f"{ours[w] / ours['0']:.2f}x" for w in ("1", "2", "auto") if w in ours)
        auto = f"{ours['auto'] / max(fixed):.2f}x" if "auto" in ours else "-"
        yield f"| {key} | {to_base} | {to_zero} | {auto} |"


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
        "--only", default="W1,W2,W3,W4", help="comma-separated workloads (default W1,W2,W3,W4)"
    )
    p.add_argument("--no-torch", action="store_true", help="skip torch even when it is importable")
    p.add_argument("--json", metavar="PATH", help="also write the run's figures as JSON (benchmarks/report.py)")
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
    commit = git_commit()  # the tree as it was at the start: what the run measures
    probe = parallelism_probe()
    load = os.getloadavg()
    lines.append(
        f"- available parallelism at start: 2 processes ran {probe:.2f}x one "
        f"(2.00x = two idle cores); load average {load[0]:.2f}"
        + ("; under 1.5x: other load holds a core, so the worker figures show it more than the loader"
           if probe < 1.5 else "")
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
        (
            "W4",
            "W4: 512 JPEGs of 256x256, decode + RandomResizedCrop(224) + flip + normalize, batch 32",
            lambda: w4(args.epochs),
        ),
    ]
    results: dict[str, list[Row]] = {}
    titles: dict[str, str] = {}
    started = time.time()
    for key, title, run in workloads:
        if key in only:
            print(f"{title} ...", file=sys.stderr, flush=True)
            results[key], titles[key] = run(), title
            lines += table(title, results[key])
    lines += worker_ratios(results)
    print("\n".join(lines))
    if args.json:
        record = {
            "interpreter": {
                "implementation": platform.python_implementation(),
                "version": platform.python_version(),
                "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
                "gil_enabled": bool(getattr(sys, "_is_gil_enabled", lambda: True)()),
            },
            "numpy": np.__version__,
            "torch": torch.__version__ if use_torch else None,
            "machine": {"cpu": cpu_model(), "arch": platform.machine(), "cpus": os.cpu_count(),
                        "platform": platform.platform()},
            "load_average": [round(x, 2) for x in load],
            "load_average_end": [round(x, 2) for x in os.getloadavg()],
            "parallelism": round(probe, 2),
            "commit": commit,
            "command": " ".join(["python", "benchmarks/compare.py", *(argv if argv is not None else sys.argv[1:])]),
            "epochs": args.epochs,
            "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
            "seconds": round(time.time() - started, 1),
            "workloads": {
                key: {"title": titles[key],
                      "rows": [{"method": r.method, "items_per_s": r.items_per_s, "note": r.note} for r in rows]}
                for key, rows in results.items()
            },
        }
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
