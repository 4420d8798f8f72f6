"""Elastic resume under ``torchrun`` (gloo): 4 ranks -> 2 and -> 3 ranks, and 2 -> 4.

Runs ``_elastic_script.py`` three times on 127.0.0.1 only: 4 ranks (a 2-rank run's states
resumed by 4 ranks, then 4-rank states saved after a few batches), then 2 ranks and 3 ranks
resuming the 4-rank states.  The row ids are ``all_gather``ed; every row of the epoch is seen
exactly once across old and new ranks (plus ``DistributedSampler``'s padding of the
remainder), and the next epoch is a fresh run's: see the script.  Skipped without torch (3.13t).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed.run")

SCRIPT = Path(__file__).with_name("_elastic_script.py")
REPO = Path(__file__).resolve().parents[2]


def torchrun(tmp_path, ranks, phase):
    env = dict(
        os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
    )
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
        "--max-restarts", "0", str(SCRIPT), str(tmp_path), phase,
    ]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150)


@pytest.mark.timeout(420)
def test_an_epoch_saved_by_4_ranks_resumes_on_2_and_3_ranks_and_2_on_4_every_row_once(tmp_path):
    for ranks, phase in ((4, "four"), (2, "two"), (3, "three")):
        done = torchrun(tmp_path, ranks, phase)
        assert done.returncode == 0, f"{phase}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        assert (tmp_path / f"{phase}.ok").read_text() == "ok\n"
