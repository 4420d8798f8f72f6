"""Worker threads get one intra-op thread each; the process's other threads keep theirs.

Each check runs in a fresh interpreter: torch applies its process-wide default to a thread at
that thread's first torch op, so the main thread must not have run one before the loader.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

_SCRIPT = textwrap.dedent(
    """
    import threading, torch
    from dataloader.torch import DataLoader

    def in_new_thread(fn):
        out = []
        t = threading.Thread(target=lambda: out.append(fn()))
        t.start(); t.join()
        return out[0]

    before = in_new_thread(torch.get_num_threads)  # the main thread runs no torch op yet
    seen = []

    class Items(torch.utils.data.Dataset):
        def __len__(self):
            return 8

        def __getitem__(self, i):
            seen.append(torch.get_num_threads())
            return i

    loader = DataLoader(Items(), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    main_after = torch.get_num_threads()  # the main thread's first torch op
    later = in_new_thread(torch.get_num_threads)
    list(it)
    loader.close()
    print(before, main_after, later, min(seen), max(seen))
    """
)


@pytest.mark.timeout(60)
def test_worker_threads_leave_the_main_threads_intra_op_pool_unchanged():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr
    before, main_after, later, lo, hi = map(int, out.stdout.split())
    if before == 1:
        pytest.skip("torch runs 1 intra-op thread here: a worker's 1 could not be told apart")
    assert (main_after, later) == (before, before)  # torch's process-wide default is untouched
    assert lo == hi == 1  # every worker thread runs its items with one intra-op thread
