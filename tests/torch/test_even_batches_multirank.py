"""``even_batches`` under ``torchrun`` (gloo): skewed streams take equal steps on 2 and 4 ranks.

One launch per world size runs ``_even_batches_script.py`` (rank shards of 10/1000 rows on 2
ranks, 10/100/1000/100 on 4): ``"drop"`` and ``"pad"`` with 0 and 2 workers, the torch face,
an early ``close()`` on one rank, and the epoch repeated 20 times (no hang: the process
group's 60 s timeout, and this test's, turn one into a failure).  Skipped where torch is
absent (3.13t).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed.run")

SCRIPT = Path(__file__).with_name("_even_batches_script.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("world", [2, 4])
def test_skewed_streams_take_equal_steps_on_every_rank(tmp_path, world):
    env = dict(
        os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
    )
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world),
        "--max-restarts", "0", str(SCRIPT), str(tmp_path),
    ]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert (tmp_path / "ok").read_text() == f"ok {world}\n"


def test_the_torch_face_takes_even_batches_and_checks_it():
    from dataloader import IterableDataset
    from dataloader.torch import DataLoader

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(6))

    loader = DataLoader(Stream(), batch_size=2, even_batches="drop")
    assert loader.even_batches == "drop" and loader.process_group is None
    with pytest.raises(ValueError, match="applies to an IterableDataset"):
        DataLoader(list(range(6)), batch_size=2, even_batches="pad")
