"""Multi-rank training under ``torchrun``: 3 ranks, gloo, exactly-once shards and resume.

Runs ``_multirank_script.py`` twice with ``torchrun --standalone --nproc-per-node 3`` on
127.0.0.1 only: a first run (epochs 0 and 1, then epoch 2 stopped mid-way and each rank's
``state_dict`` saved) and a second run that loads the states and finishes epoch 2.  The
checks (every row once per epoch, ``DistributedSampler``'s padding, the same permutation on
every rank, a reshuffle per epoch, the resumed epoch equal to an uninterrupted one) run on
rank 0; see the script.  Skipped where torch is absent (3.13t).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch.distributed.run")

from dataloader.ndf import save_ndf  # noqa: E402

SCRIPT = Path(__file__).with_name("_multirank_script.py")
REPO = Path(__file__).resolve().parents[2]


def torchrun(tmp_path, phase):
    env = dict(
        os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
    )
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
        "--max-restarts", "0", str(SCRIPT), str(tmp_path / "rows.ndf"), str(tmp_path), phase,
    ]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=150)


@pytest.mark.timeout(330)
def test_three_ranks_see_every_row_once_per_epoch_and_resume_exactly(tmp_path):
    n = 101  # not a multiple of 3: DistributedSampler pads, ShardSampler does not
    save_ndf(tmp_path / "rows.ndf", np.random.default_rng(0).random((n, 2)), np.arange(n, dtype=np.float64))
    for phase in ("run", "resume"):
        done = torchrun(tmp_path, phase)
        assert done.returncode == 0, f"{phase}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        assert (tmp_path / f"{phase}.ok").read_text() == "ok\n"
