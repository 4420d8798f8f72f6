"""Two ranks under ``torchrun`` (gloo) with failing items under ``on_error="replace"`` take the
same number of equally sized steps (``_error_policy_multirank_script.py``); a collective per
step would hang if one did not.  Skipped where torch is absent (3.13t)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed.run")

SCRIPT = Path(__file__).with_name("_error_policy_multirank_script.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(180)
def test_two_ranks_with_failing_items_under_replace_take_equal_steps(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo",
               TP_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "--max-restarts", "0", str(SCRIPT), str(tmp_path)]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert (tmp_path / "ok").read_text() == "ok\n"
