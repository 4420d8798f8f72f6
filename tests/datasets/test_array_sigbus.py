"""An array over a file mapping truncated while mapped: OSError, not SIGBUS.

Reading a mapped page past a file's new end raises SIGBUS, which ends the process
(``x[idx]`` in NumPy does).  The native row gather behind ``ArrayDataset``
(``_arrayrows.take_rows`` with 0 workers, ``_rowjobs.RowJobs`` with workers) runs a gather
from (or into) any array whose memory NumPy did not allocate under the guard of ``.ndf``
files (``_bus_guard.h``), whatever object exports the mapping (``numpy.memmap``,
``mmap.mmap``, ctypes, ``__array_interface__``, pyarrow), so the batch fails with an
``OSError`` naming the file (from ``/proc/self/maps``), and the epoch goes on.  Each case
runs in a fresh interpreter, so that a crash fails the test, not the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SETUP = """
import mmap, os, sys
import numpy as np
from dataloader import ArrayDataset, DataLoader
from dataloader._native._arrayrows import take_rows

path = sys.argv[1]
real = os.path.realpath(path)  # as /proc/self/maps names it
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
                    assert e.filename == real, (name, e.filename)
                else:
                    raise AssertionError(f"{name}: a gather past the end returned")
        print("take_rows: OSError")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "take_rows: OSError" in proc.stdout


def loader_case(make_column: str, mapped_column: int, num_workers) -> str:
    """A script body: ``make_column`` (code setting ``column`` over the file's mapping) and an
    epoch of ``ArrayDataset`` over it (column ``mapped_column``) and an in-memory one, the file
    cut after the first batch: every batch far past the cut fails with OSError naming the
    file, the epoch goes on to its end, and the process lives to print ``loader: ok``."""
    return textwrap.dedent(make_column) + textwrap.dedent(
        f"""
        labels = np.arange(n * d, dtype=np.float64).reshape(n, d)  # in memory
        columns = (column, labels) if {mapped_column} == 0 else (labels, column)
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
                assert e.filename == real, e
                assert "truncated while mapped" in str(e), e
                outcomes.append("OSError")
        assert len(outcomes) == n // 50 - 2  # every batch, failed or not: the epoch did not end early
        # Batches built before the cut may have rows; every one far past it and built after
        # it fails (with workers, at most the window's batches were built before).
        assert set(outcomes[far // 50 + 16:]) == {{"OSError"}}, outcomes[far // 50:][:5]
        assert next(it, "end") == "end", "the epoch went on past its end"
        loader.close()
        print("loader: ok")
        """
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 1, 2, "auto"])
@pytest.mark.parametrize("mapped_column", [0, 1])
def test_loader_over_a_truncated_memmap_raises_oserror_for_the_cut_batches(tmp_path, num_workers, mapped_column):
    proc = run_script(tmp_path, loader_case("column = mm", mapped_column, num_workers))
    assert proc.returncode == 0, proc.stderr
    assert "loader: ok" in proc.stdout


# Memory that maps the file, exported by objects the guard knows nothing about: each sets
# `column` (n x d float64 over the mapping).  The guard goes by the memory (not NumPy's own),
# not by the exporter's type.
EXPORTERS = {
    "ctypes from_buffer": """
        import ctypes
        with open(path, "r+b") as fh:
            mapping = mmap.mmap(fh.fileno(), 0)
        column = np.ctypeslib.as_array((ctypes.c_double * (n * d)).from_buffer(mapping)).reshape(n, d)
        """,
    "__array_interface__": """
        import ctypes
        with open(path, "r+b") as fh:
            mapping = mmap.mmap(fh.fileno(), 0)

        class Exported:  # only an address and a layout: no buffer protocol, no base to follow
            def __init__(self):
                self.pin = (ctypes.c_char * len(mapping)).from_buffer(mapping)
                self.__array_interface__ = {"shape": (n, d), "typestr": np.dtype(np.float64).str,
                                            "data": (ctypes.addressof(self.pin), True), "version": 3}

        column = np.asarray(Exported())
        assert not isinstance(column.base, (mmap.mmap, memoryview, np.ndarray)), type(column.base)
        """,
    "np.frombuffer": """
        with open(path, "rb") as fh:
            mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        column = np.frombuffer(mapping, np.float64).reshape(n, d)
        """,
    "memoryview": """
        with open(path, "rb") as fh:
            mapping = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        column = np.asarray(memoryview(mapping).cast("d")).reshape(n, d)
        """,
    "pyarrow memory_map": """
        import pyarrow as pa
        column = np.frombuffer(pa.memory_map(path).read_buffer(), np.float64).reshape(n, d)
        """,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("exporter", list(EXPORTERS))
def test_loader_over_any_exporter_of_a_truncated_mapping_raises_oserror_naming_the_file(
    tmp_path, exporter, num_workers
):
    if exporter.startswith("pyarrow"):
        pytest.importorskip("pyarrow", reason="pyarrow is not a dependency (not installed here)")
    proc = run_script(tmp_path, loader_case(EXPORTERS[exporter], 0, num_workers))
    assert proc.returncode == 0, proc.stderr
    assert "loader: ok" in proc.stdout


@pytest.mark.timeout(120)
def test_gather_into_an_out_array_over_a_truncated_file_raises_oserror_naming_it(tmp_path):
    proc = run_script(
        tmp_path,
        """
        ds = ArrayDataset(data)  # in memory: only the destination maps a file
        rows = 5_000
        out_path = path + ".out"
        np.zeros((rows, d)).tofile(out_path)
        out = np.memmap(out_path, dtype=np.float64, mode="r+", shape=(rows, d))
        (got,) = ds.__getitems__(np.arange(rows), out=(out,)).columns
        assert got is out and (out[rows - 1] == data[rows - 1]).all()
        os.truncate(out_path, keep * d * 8)
        try:
            ds.__getitems__(np.arange(rows), out=(out,))  # rows from `far` on lie past its end
        except OSError as e:
            assert e.filename == os.path.realpath(out_path), e
            assert "output array's memory-mapped file" in str(e), e
        else:
            raise AssertionError("a gather into an out past its file's end returned")
        print("out: OSError")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "out: OSError" in proc.stdout


@pytest.mark.timeout(120)
def test_a_fault_re_raised_by_faulthandler_still_names_the_file(tmp_path):
    # faulthandler, enabled after the guard, takes the fault first and re-raises it without
    # its address: the file is then found over the gather's source (else its out=).
    proc = run_script(
        tmp_path,
        """
        import ctypes, faulthandler
        with open(path, "r+b") as fh:
            mapping = mmap.mmap(fh.fileno(), 0)
        column = np.ctypeslib.as_array((ctypes.c_double * (n * d)).from_buffer(mapping)).reshape(n, d)
        out_path = path + ".out"
        np.zeros((n, d)).tofile(out_path)
        out = np.memmap(out_path, dtype=np.float64, mode="r+", shape=(n, d))
        take_rows(column, np.arange(5))  # installs the guard
        os.truncate(path, keep * d * 8)
        os.truncate(out_path, keep * d * 8)
        for source, dest, named in ((column, None, real), (data, out, os.path.realpath(out_path))):
            faulthandler.disable()  # it stands down after a fault it printed: enable it anew
            faulthandler.enable()
            try:
                take_rows(source, np.arange(n), dest)
            except OSError as e:
                assert e.filename == named, (named, e)
            else:
                raise AssertionError("a gather past the end returned")
        print("re-raised: OSError")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "re-raised: OSError" in proc.stdout
    assert proc.stderr.count("Bus error") == 2, proc.stderr  # faulthandler saw both faults


@pytest.mark.timeout(120)
def test_only_a_gather_from_memory_numpy_did_not_allocate_installs_the_guard(tmp_path):
    # Views of NumPy's own arrays never map a file: no process-wide handler for them.
    proc = run_script(
        tmp_path,
        """
        import ctypes, signal
        libc = ctypes.CDLL(None)
        act = ctypes.create_string_buffer(256)  # a struct sigaction; sa_handler comes first

        def handler():
            assert libc.sigaction(signal.SIGBUS, None, act) == 0
            return int.from_bytes(act.raw[:8], sys.byteorder)

        assert handler() == 0, "SIGBUS had a handler at start"
        x = np.arange(1000.0).reshape(100, 10)
        for own in (x, x[10:], x.reshape(10, 100)[2:].reshape(-1, 10), np.asarray(memoryview(x))):
            take_rows(own, np.arange(5))
        assert handler() == 0, "a gather from NumPy's own memory installed the guard"
        take_rows(np.frombuffer(bytes(800), np.float64).reshape(10, 10), np.arange(3))
        assert handler() != 0, "a gather from memory NumPy did not allocate ran unguarded"
        print("guard: as decided")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "guard: as decided" in proc.stdout


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
