"""``examples/fault_tolerant_training.py`` (docs/usage.md, "Fault-tolerant training") under ``torchrun``.

4 ranks train 3 steps and save; 3 ranks resume from the list of the 4 states and finish the
epoch.  Over both runs every good row is trained on, the corrupt rows never are, each corrupt
row's place is taken by one substitute (so the epoch keeps its 600 rows and every rank its step
count: a short rank would hang DDP's all_reduce), and the failures name exactly the corrupt
rows.  Skipped without torch (3.13t).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed.run")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "fault_tolerant_training.py"
ROWS = 600


def torchrun(ckpt: Path, ranks: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(
        os.environ, PYTHONPATH=str(REPO), MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo",
        TP_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1",
    )
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
        "--max-restarts", "0", str(SCRIPT), str(ckpt), *args,
    ]
    return subprocess.run(cmd, env=env, cwd=ckpt.parent, capture_output=True, text=True, timeout=150)


def read(ckpt: Path, kind: str) -> list[int]:
    """The ints of every ``<kind>-*.json`` (a list or an int each), in file-name order."""
    out: list[int] = []
    for p in sorted(ckpt.glob(f"{kind}-*.json")):
        got = json.loads(p.read_text())
        out += got if isinstance(got, list) else [got]
    return out


@pytest.mark.timeout(360)
def test_the_example_resumes_4_ranks_on_3_with_corrupt_rows_replaced_and_every_row_once(tmp_path):
    ckpt = tmp_path / "ckpt"
    for ranks, args in ((4, ("--steps", "3")), (3, ())):
        done = torchrun(ckpt, ranks, *args)
        assert done.returncode == 0, f"{ranks} ranks:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    assert sorted(p.name for p in ckpt.glob("data-*.json")) == ["data-0.json", "data-1.json", "data-2.json"]
    seen = Counter(read(ckpt, "rows"))
    assert len(read(ckpt, "rows-4")) == 4 * 3 * 16  # 3 steps of 16 on each of 4 ranks
    corrupt = {i for i in range(ROWS) if i % 97 == 13}
    assert not corrupt & set(seen)
    assert all(seen[i] >= 1 for i in range(ROWS) if i not in corrupt)
    assert sum(seen.values()) == ROWS  # each corrupt row replaced by one substitute
    assert set(read(ckpt, "failed")) == corrupt
    assert read(ckpt, "validation-3") == [3, 3, 3]  # the shortest stream's 10 rows in batches of 4
