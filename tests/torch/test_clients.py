"""Real training clients drive ``dataloader.torch.DataLoader``: Lightning, Accelerate, HF Trainer.

Each runs in a subprocess (Lightning's and Accelerate's launchers start their ranks as
processes; a fresh interpreter also keeps their global state out of this one), offline
(``HF_HUB_OFFLINE=1``), on CPU, gloo on 127.0.0.1.  Skipped where the client is not installed
(the ``clients`` extra of pyproject.toml; 3.11 only).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def needs(module: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not installed")


def client_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return dict(
        os.environ, PYTHONPATH=path, MASTER_ADDR="127.0.0.1", GLOO_SOCKET_IFNAME="lo", TP_SOCKET_IFNAME="lo",
        OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1", PL_DISABLE_FORK="1", TOKENIZERS_PARALLELISM="false",
    )


def run_script(args: list[str], cwd: Path, timeout: int) -> None:
    done = subprocess.run([sys.executable, *args], env=client_env(), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def epochs_by_rank(out: Path, ranks: int) -> list[dict[str, list[int]]]:
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(ranks)]


@needs("pytorch_lightning")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("devices", [1, 2])
def test_lightning_trains_each_row_exactly_once_per_epoch_across_ranks(tmp_path, devices):
    run_script([str(HERE / "_lightning_script.py"), str(tmp_path), str(devices), "inject"], tmp_path, 240)
    ranks = epochs_by_rank(tmp_path, devices)
    for epoch in ("0", "1"):
        ids = [i for r in ranks for i in r[epoch]]
        assert sorted(ids) == list(range(48)), f"epoch {epoch}: {sorted(ids)}"
        if devices == 2:
            assert len(ranks[0][epoch]) == len(ranks[1][epoch]) == 24
    assert ranks[0]["0"] != ranks[0]["1"]  # reshuffled per epoch (Lightning calls set_epoch)
    val = [i for r in range(devices) for i in json.loads((tmp_path / f"val{r}.json").read_text())]
    assert sorted(val) == list(range(48))


@needs("pytorch_lightning")
@pytest.mark.timeout(300)
def test_lightning_with_our_distributed_sampler_and_no_injection(tmp_path):
    run_script([str(HERE / "_lightning_script.py"), str(tmp_path), "2", "own"], tmp_path, 240)
    ranks = epochs_by_rank(tmp_path, 2)
    for epoch in ("0", "1"):
        assert sorted(ranks[0][epoch] + ranks[1][epoch]) == list(range(48))


@needs("accelerate")
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("processes", "mode"), [(1, "prepare"), (2, "prepare"), (2, "ours")])
def test_accelerate_trains_each_row_exactly_once_per_epoch(tmp_path, processes, mode):
    script = [str(HERE / "_accelerate_script.py"), str(tmp_path), mode]
    if processes == 1:
        run_script(script, tmp_path, 200)
    else:  # --multi_gpu starts the ranks with torchrun; Accelerator(cpu=True) then runs gloo on CPU
        launch = ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                  "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_ip", "127.0.0.1",
                  "--main_process_port", "0"]
        run_script(launch + script, tmp_path, 240)
    ranks = epochs_by_rank(tmp_path, processes)
    for epoch in ("0", "1"):
        assert sorted(i for r in ranks for i in r[epoch]) == list(range(48)), epoch
    assert ranks[0]["0"] != ranks[0]["1"]


@needs("transformers")
@needs("datasets")
@pytest.mark.timeout(300)
def test_hf_trainer_trains_one_epoch_through_our_loader(tmp_path):
    run_script([str(HERE / "_hf_trainer_script.py"), str(tmp_path)], tmp_path, 240)
    got = json.loads((tmp_path / "ids.json").read_text())
    assert got["steps"] == 6  # 24 rows, batches of 4, 1 epoch
    assert sorted(got["ids"]) == sorted(i % 32 for i in range(24))
