"""A `.ndf` file truncated while it is mapped: reads raise OSError, the process lives.

Reading a mapped page past a file's new end raises SIGBUS; the gather's guard
(dataloader/_native/_rowcopy.pyx, _bus_guard.h) turns it into an ``OSError`` naming the file.
Each case runs in a fresh interpreter, so that a crash fails the test, not the
suite; faulthandler (which also handles SIGBUS) is on before, after or never.
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
import faulthandler, os, signal, sys, threading
import numpy as np
from dataloader import DataLoader, NdfDataset, open_ndf, save_ndf

path = sys.argv[1]
n, d = 20_000, 7  # 1.1 MB: many pages past the cut
save_ndf(path, np.arange(n * d, dtype=np.float64).reshape(n, d), np.arange(n) % 3)
f = open_ndf(path, access="mmap")
ds = NdfDataset(path, access="mmap")  # opened before the cut too (its header still says n)
fp = open_ndf(path, access="pread")
assert f.access == "mmap" and ds.file.access == "mmap" and fp.access == "pread"
if sys.argv[2] == "faulthandler-after-open":
    faulthandler.enable()
if sys.argv[2] == "faulthandler-disabled-after-open":  # restores the default action
    faulthandler.disable()
    f = open_ndf(path, access="mmap")  # a new mapped reader puts the guard's handler back
keep = 100  # rows left after the cut
# Rows past the cut but on the cut's last page read as zeros (the kernel zero-fills a
# mapped page past the end of file): only rows from the next page on fault.  Rows from
# `far` on lie past 128 KiB of the cut, beyond the last page for any page size up to 64 KiB.
far = keep + 128 * 1024 // ((d + 1) * 8) + 1
os.truncate(path, 28 + keep * (d + 1) * 8)
"""


def run_script(tmp_path, body: str, faulthandler: str = "off") -> subprocess.CompletedProcess:
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(SETUP) + textwrap.dedent(body))
    at_start = faulthandler in ("on-at-start", "faulthandler-disabled-after-open")
    flags = ["-X", "faulthandler"] if at_start else []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    return subprocess.run(
        [sys.executable, *flags, str(script), str(tmp_path / "t.ndf"), faulthandler],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO,
        env=env,
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "faulthandler",
    ["off", "on-at-start", "faulthandler-after-open", "faulthandler-disabled-after-open"],
)
def test_mmap_read_past_a_truncated_end_raises_oserror_naming_the_file(tmp_path, faulthandler):
    proc = run_script(
        tmp_path,
        """
        x, y = f.read_rows(np.arange(keep))  # rows still in the file read normally
        assert x[keep - 1, 0] == (keep - 1) * d and y[keep - 1, 0] == (keep - 1) % 3
        for read in (
            lambda: f.read_rows([n - 1]),
            lambda: f.read_rows([5, 10_000]),
            lambda: f.read_rows(list(range(50, 5_000))),
            lambda: ds[n - 1],  # one row (gather_one)
            lambda: ds.__getitems__([3, n - 2]),
        ):
            try:
                read()
            except OSError as e:
                assert e.filename == path, e
                assert "truncated while open" in str(e), e
            else:
                raise AssertionError("a read past the end returned")
        print("reads: OSError")
        """,
        faulthandler,
    )
    assert proc.returncode == 0, proc.stderr
    assert "reads: OSError" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("faulthandler", ["off", "faulthandler-after-open"])
def test_read_rows_into_an_out_array_over_a_truncated_file_raises_oserror_naming_it(
    tmp_path, faulthandler
):
    # out_x a memmap whose file was cut: the copy's writes fault (mapped reads: SIGBUS,
    # guarded; pread: EFAULT).  The rows read all lie before the .ndf file's own cut.
    proc = run_script(
        tmp_path,
        """
        rows = 5_000
        out_path = path + ".out"
        np.zeros((rows, d)).tofile(out_path)
        out_x = np.memmap(out_path, dtype=np.float64, mode="r+", shape=(rows, d))
        out_y = np.empty((rows, 1))
        idx = np.arange(rows) % keep
        x, _ = f.read_rows(idx, out_x=out_x, out_y=out_y)
        assert x is out_x and out_x[keep + 1, 0] == d
        os.truncate(out_path, keep * d * 8)
        for reader in (f, fp):
            if sys.argv[2] == "faulthandler-after-open":
                faulthandler.disable()  # it stands down after a fault it printed: anew
                faulthandler.enable()
            try:
                reader.read_rows(idx, out_x=out_x, out_y=out_y)
            except OSError as e:
                assert e.filename == os.path.realpath(out_path), (reader.access, e)
                assert "output array's memory-mapped file" in str(e), (reader.access, e)
            else:
                raise AssertionError(f"{reader.access}: a read into a cut out_x returned")
        print("out_x: OSError")
        """,
        faulthandler,
    )
    assert proc.returncode == 0, proc.stderr
    assert "out_x: OSError" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader_over_a_truncated_mapping_raises_oserror_for_the_cut_batches(tmp_path, num_workers):
    proc = run_script(
        tmp_path,
        f"""
        loader = DataLoader(ds, batch_size=50, num_workers={num_workers})
        it = iter(loader)
        x, y = next(it)  # rows 0..49: still in the file
        assert x.shape == (50, d) and x[49, 0] == 49 * d
        next(it)
        outcomes = []
        for b in range(2, n // 50):
            try:
                next(it)
                outcomes.append("rows")
            except OSError as e:
                assert e.filename == path, e
                outcomes.append("OSError")
        assert set(outcomes[far // 50:]) == {{"OSError"}}, outcomes[far // 50:][:5]
        try:
            next(it)
        except StopIteration:
            pass
        loader.close()
        print("loader: ok")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "loader: ok" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("faulthandler", ["off", "on-at-start"])
def test_eight_threads_reading_a_truncated_mapping_each_get_oserror(tmp_path, faulthandler):
    proc = run_script(
        tmp_path,
        """
        outcomes, lock = [], threading.Lock()
        start = threading.Barrier(8)

        def work(tid):
            start.wait()
            got = []
            for k in range(200):
                if (k + tid) % 2:
                    x, _ = f.read_rows([k % keep])
                    assert x[0, 0] == (k % keep) * d  # good rows stay exact
                    got.append("rows")
                else:
                    try:
                        f.read_rows([far + (k * 97) % (n - far)])
                    except OSError as e:
                        assert e.filename == path
                        got.append("OSError")
            with lock:
                outcomes.extend(got)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert outcomes.count("rows") == 800 and outcomes.count("OSError") == 800, outcomes[:5]
        print("threads: ok")
        """,
        faulthandler,
    )
    assert proc.returncode == 0, proc.stderr
    assert "threads: ok" in proc.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("faulthandler", ["off", "on-at-start"])
def test_a_sigbus_outside_a_read_still_ends_the_process(tmp_path, faulthandler):
    proc = run_script(
        tmp_path,
        """
        print("about to signal", flush=True)
        os.kill(os.getpid(), signal.SIGBUS)  # not in a gather: the handler before ours acts
        print("survived")
        """,
        faulthandler,
    )
    assert "about to signal" in proc.stdout
    assert "survived" not in proc.stdout
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stderr)
    if faulthandler == "on-at-start":
        assert "Bus error" in proc.stderr  # faulthandler still reports it
