"""W2: page-cached `.ndf` rows, per batch: NdfFile.read_rows vs numpy.memmap vs os.pread.

Command (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m pytest benchmarks/bench_ndf.py --benchmark-only --benchmark-columns=median,iqr,rounds

or, without pytest-benchmark (same figures, also what benchmarks/compare.py
imports)::

    python -m benchmarks.bench_ndf

Workload: 1,000,000 rows x (32 features + 1 label) float64 (264 MB), written
once to a temporary directory (so it is page-cached), batch 256, one
shuffled epoch (3,907 batches; the Python os.pread loop runs the first
PYTHON_PREAD_BATCHES batches only, it is ~20x slower).  Every method returns
the batch as NumPy arrays:

* ``memmap``: ``numpy.memmap`` (offset 28) fancy indexing, ``mm[idx]``;
* ``memmap_ndarray``: the same on a plain ndarray view of the mapping
  (no memmap subclass overhead): the stronger NumPy baseline;
* ``read_rows_mmap`` / ``read_rows_pread``: NdfFile.read_rows with fresh
  output arrays (x (B, 32) and y (B, 1), both C-contiguous);
* ``read_rows_mmap_out``: the same into reused output arrays;
* ``getitems``: NdfDataset.__getitems__ (needs dataloader.dataset);
* ``python_pread``: one ``os.pread`` per row, joined and split with NumPy;
* ``seq_memmap`` / ``seq_read_rows_pread``: unshuffled batches (consecutive
  rows), numpy.memmap vs the pread path (runs read whole).

Machine caveats: on the 2-core shared reference machine, absolute figures
move +-20% with other load; compare ratios from one run.  The ratio table
is printed at the end of the pytest run (and by run_w2()).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dataloader.ndf import NDF_HEADER, NdfDataset, NdfWriter, open_ndf

N_ROWS, D, L, BATCH = 1_000_000, 32, 1, 256
PYTHON_PREAD_BATCHES = 200
HEADER_BYTES = NDF_HEADER.size  # 28: magic + n, d, l as u64


def write_w2_file(directory: str | Path, n: int = N_ROWS) -> Path:
    """Write the W2 file (seeded normal data) in blocks and return its path."""
    path = Path(directory) / "w2.ndf"
    rng = np.random.default_rng(0)
    with NdfWriter(path, D, L) as w:
        for start in range(0, n, 100_000):
            k = min(100_000, n - start)
            w.append(rng.standard_normal((k, D)), rng.standard_normal((k, L)))
    return path


def make_methods(path: Path, n: int) -> tuple[dict[str, Callable[[], None]], dict[str, int], Callable[[], None]]:
    """Epoch functions per method, the batches each runs, and a closer."""
    splits = range(BATCH, n, BATCH)
    batches = np.array_split(np.random.default_rng(1).permutation(n), splits)
    seq_batches = np.array_split(np.arange(n), splits)
    mm = np.memmap(path, dtype="<f8", mode="r", offset=HEADER_BYTES, shape=(n, D + L))
    plain = np.asarray(mm).view(np.ndarray)
    f_mmap, f_pread = open_ndf(path, access="mmap"), open_ndf(path, access="pread")
    fd = os.open(path, os.O_RDONLY)
    row_bytes = (D + L) * 8
    out_x, out_y = np.empty((BATCH, D)), np.empty((BATCH, L))

    def memmap() -> None:
        for b in batches:
            mm[b]

    def memmap_ndarray() -> None:
        for b in batches:
            plain[b]

    def seq_memmap() -> None:
        for b in seq_batches:
            mm[b]

    def read_rows(f, order):
        def epoch() -> None:
            rr = f.read_rows
            for b in order:
                rr(b)
        return epoch

    def read_rows_mmap_out() -> None:
        rr = f_mmap.read_rows
        for b in batches:
            k = len(b)
            rr(b, out_x[:k], out_y[:k])

    def python_pread() -> None:
        for b in batches[:PYTHON_PREAD_BATCHES]:
            raw = b"".join([os.pread(fd, row_bytes, HEADER_BYTES + i * row_bytes) for i in b.tolist()])
            rows = np.frombuffer(raw, dtype="<f8").reshape(-1, D + L)
            rows[:, :D], rows[:, D:]

    methods = {
        "memmap": memmap,
        "memmap_ndarray": memmap_ndarray,
        "read_rows_mmap": read_rows(f_mmap, batches),
        "read_rows_mmap_out": read_rows_mmap_out,
        "read_rows_pread": read_rows(f_pread, batches),
        "python_pread": python_pread,
        "seq_memmap": seq_memmap,
        "seq_read_rows_pread": read_rows(f_pread, seq_batches),
    }
    try:
        import dataloader.dataset  # noqa: F401

        ds = NdfDataset(f_mmap)

        def getitems() -> None:
            gi = ds.__getitems__
            for b in batches:
                gi(b)

        methods["getitems"] = getitems
    except ImportError:
        pass
    counts = {name: len(batches) for name in methods}
    counts["python_pread"] = min(PYTHON_PREAD_BATCHES, len(batches))

    def close() -> None:
        f_mmap.close()
        f_pread.close()
        os.close(fd)

    return methods, counts, close


def ratio_lines(per_batch_s: dict[str, float]) -> list[str]:
    """The figures as text: µs per batch, M rows/s, ratios to the baselines."""
    lines = [f"W2 ({sys.implementation.name} {sys.version.split()[0]}"
             f"{'t' if not getattr(sys, '_is_gil_enabled', lambda: True)() else ''}),"
             f" batch {BATCH}, per batch:"]
    for name, t in per_batch_s.items():
        line = f"  {name:20s} {t * 1e6:9.1f} us  {BATCH / t / 1e6:6.2f} M rows/s"
        bases = ("seq_memmap",) if name.startswith("seq_") else ("memmap", "memmap_ndarray", "python_pread")
        for base in bases:
            if base in per_batch_s and name != base:
                line += f"  {per_batch_s[base] / t:6.2f}x {base}"
        lines.append(line)
    return lines


def run_w2(path: str | Path | None = None, rounds: int = 3, n: int = N_ROWS) -> dict[str, float]:
    """Time every method (median of ``rounds`` epochs after one warm-up epoch).

    Args:
        path: an existing W2 file, or None to write one to a temporary
            directory (deleted afterwards).
        rounds: timed epochs per method.
        n: rows (when writing the file).

    Returns:
        Seconds per batch for each method name.
    """
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(path) if path is not None else write_w2_file(tmp, n)
        with open_ndf(file) as f:
            n = f.n
        methods, counts, close = make_methods(file, n)
        result = {}
        try:
            for name, epoch in methods.items():
                epoch()  # warm-up: page faults, caches
                times = []
                for _ in range(rounds):
                    t0 = time.perf_counter()
                    epoch()
                    times.append(time.perf_counter() - t0)
                result[name] = float(np.median(times)) / counts[name]
        finally:
            close()
    return result


# ---------------------------------------------------------------- pytest-benchmark

@pytest.fixture(scope="module")
def w2(tmp_path_factory, request):
    path = write_w2_file(tmp_path_factory.mktemp("w2"))
    methods, counts, close = make_methods(path, N_ROWS)
    per_batch: dict[str, float] = {}
    yield methods, counts, per_batch
    close()
    path.unlink()
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if per_batch and capture is not None:
        with capture.global_and_fixture_disabled():  # print even without -s
            print("\n" + "\n".join(ratio_lines(per_batch)))


@pytest.mark.benchmark(group="w2-ndf-rows")
@pytest.mark.parametrize("name", ["memmap", "memmap_ndarray", "read_rows_mmap", "read_rows_mmap_out",
                                  "getitems", "read_rows_pread", "python_pread", "seq_memmap",
                                  "seq_read_rows_pread"])
def test_w2(benchmark, w2, name):
    methods, counts, per_batch = w2
    if name not in methods:
        pytest.skip("dataloader.dataset (BatchedItems) is not available yet")
    benchmark.extra_info["batches_per_round"] = counts[name]
    benchmark.pedantic(methods[name], rounds=3, iterations=1, warmup_rounds=1)
    per_batch[name] = benchmark.stats.stats.median / counts[name]


if __name__ == "__main__":
    for text in ratio_lines(run_w2()):
        print(text)
