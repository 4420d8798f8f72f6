"""An array over a file mapping (``numpy.memmap``) truncated while mapped: OSError, not SIGBUS.

Reading a mapped page past a file's new end raises SIGBUS, which ends the process
(``x[idx]`` in NumPy does).  The native row gather behind ``ArrayDataset``
(``_arrayrows.take_rows`` with 0 workers, ``_rowjobs.RowJobs`` with workers) runs a gather
from a file-mapped array under the guard of ``.ndf`` files (``_bus_guard.h``), so the
batch fails with an ``OSError`` naming the file, and the epoch goes on.  Each case runs in
a fresh interpreter, so that a crash fails the test, not the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SETUP = """
import mmap, os, sys
import numpy as np
from dataloader import ArrayDataset, DataLoader
from dataloader._native._arrayrows import take_rows

path = sys.argv[1]
n, d = 20_000, 7  # 1.1 MB: many pages past the cut
data = np.arange(n * d, dtype=np.float64).reshape(n, d)
data.tofile(path)
mm = np.memmap(path, dtype=np.float64, mode="r", shape=(n, d))
keep = 100  # rows left after the cut
# Rows past the cut but on its last page read as zeros (the kernel zero-fills a mapped page
# past the end of file): only rows from the next page on fault.  Rows from `far` on lie more
# than 128 KiB past the cut, beyond its last page for any page size up to 64 KiB.
far = keep + 128 * 1024 // (d * 8) + 1
"""


def run_script(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(SETUP) + textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "rows.f64")],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO,
    )


@pytest.mark.timeout(120)
def test_take_rows_past_a_truncated_end_raises_oserror_naming_the_file(tmp_path):
    proc = run_script(
        tmp_path,
        """
        with open(path, "rb") as fh:
            raw = np.frombuffer(mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ), np.float64).reshape(n, d)
        view = np.asarray(mm[10:])  # an ndarray whose base is the memmap
        through_memoryview = np.asarray(memoryview(mm))  # base: a memoryview of the memmap
        os.truncate(path, keep * d * 8)
        cases = (("memmap", mm, 0), ("over mmap.mmap", raw, 0), ("view", view, 10),
                 ("memoryview", through_memoryview, 0))
        for name, a, offset in cases:
            rows = take_rows(a, np.arange(keep - offset))  # rows still in the file read normally
            assert (rows == data[offset:keep]).all(), name
            for idx in ([n - 1 - offset], [5, 10_000], list(range(50, 5_000))):
                try:
                    take_rows(a, np.asarray(idx, dtype=np.int64))
                except OSError as e:
                    assert "truncated while mapped" in str(e), e
                    assert e.filename == (path if name != "over mmap.mmap" else None), (name, e.filename)
                else:
                    raise AssertionError(f"{name}: a gather past the end returned")
        print("take_rows: OSError")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "take_rows: OSError" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 1, 2, "auto"])
@pytest.mark.parametrize("mapped_column", [0, 1])
def test_loader_over_a_truncated_memmap_raises_oserror_for_the_cut_batches(tmp_path, num_workers, mapped_column):
    proc = run_script(
        tmp_path,
        f"""
        labels = np.arange(n * d, dtype=np.float64).reshape(n, d)  # in memory
        columns = (mm, labels) if {mapped_column} == 0 else (labels, mm)
        loader = DataLoader(ArrayDataset(*columns), batch_size=50, num_workers={num_workers!r})
        it = iter(loader)
        first = next(it)  # rows 0..49: still in the file
        assert (first[{mapped_column}] == data[:50]).all()
        os.truncate(path, keep * d * 8)
        next(it)  # rows 50..99: still in the file (or built before the cut)
        outcomes = []
        for b in range(2, n // 50):
            try:
                batch = next(it)
                outcomes.append("rows")
            except OSError as e:
                assert e.filename == path, e
                assert "truncated while mapped" in str(e), e
                outcomes.append("OSError")
        assert len(outcomes) == n // 50 - 2  # every batch, failed or not: the epoch did not end early
        # Batches built before the cut may have rows; every one far past it and built after
        # it fails (with workers, at most the window's batches were built before).
        assert set(outcomes[far // 50 + 16:]) == {{"OSError"}}, outcomes[far // 50:][:5]
        assert next(it, "end") == "end", "the epoch went on past its end"
        loader.close()
        print("loader: ok")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "loader: ok" in proc.stdout


@pytest.mark.timeout(120)
def test_a_sigbus_sent_with_kill_during_a_gather_still_ends_the_process(tmp_path):
    # Only a fault in the gather's mapping (or faulthandler's re-raise of it, a tgkill of the
    # faulting thread) is the gather's; a SIGBUS sent with kill() was turned into a false
    # "truncated" OSError when it reached a thread inside a guarded gather (found by a breaker).
    proc = run_script(
        tmp_path,
        """
        import signal, threading, time
        big = np.memmap(path, dtype=np.float64, mode="r", shape=(n, d))  # not truncated
        idx = np.random.default_rng(0).integers(0, n, 200_000)
        out = np.empty((len(idx), d))
        take_rows(big, idx, out)  # installs the guard; pages everything in

        def kill():
            time.sleep(0.2)
            print("about to signal", flush=True)
            os.kill(os.getpid(), signal.SIGBUS)  # to the process: the main thread takes it

        threading.Thread(target=kill, daemon=True).start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3:  # nearly all of this thread's time is inside guarded gathers
            try:
                take_rows(big, idx, out)
            except OSError as e:
                print("swallowed:", e, flush=True)
        print("survived", flush=True)
        """,
    )
    assert "about to signal" in proc.stdout
    assert "swallowed" not in proc.stdout and "survived" not in proc.stdout, proc.stdout
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stderr)


@pytest.mark.timeout(120)
def test_a_fault_outside_a_gather_ends_the_process_when_sigbus_was_ignored(tmp_path):
    # With SIGBUS set to SIG_IGN before the guard came, a fault elsewhere made the handler
    # return, and the faulting read ran again forever (the kernel ends the process for a fault
    # it cannot deliver; found by a breaker).
    proc = run_script(
        tmp_path,
        """
        import signal
        signal.signal(signal.SIGBUS, signal.SIG_IGN)
        take_rows(mm, np.arange(10))  # installs the guard over SIG_IGN
        os.truncate(path, keep * d * 8)
        try:
            take_rows(mm, np.asarray([n - 1]))
        except OSError:
            print("guarded: OSError", flush=True)
        print("NumPy's own read", flush=True)
        print(float(mm[n - 1, 0]))  # outside any guard: the process ends
        print("survived", flush=True)
        """,
    )
    assert "guarded: OSError" in proc.stdout and "NumPy's own read" in proc.stdout, proc.stdout
    assert "survived" not in proc.stdout
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stderr)
