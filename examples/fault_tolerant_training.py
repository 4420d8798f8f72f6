"""Fault-tolerant training under ``torchrun``: error policy, elastic resume, early start, even batches.

Train 3 steps on 4 ranks and stop (as a preempted job does), then go on on 3 ranks::

    torchrun --standalone --nproc-per-node 4 examples/fault_tolerant_training.py ckpt --steps 3
    torchrun --standalone --nproc-per-node 3 examples/fault_tolerant_training.py ckpt

What each part does (docs/usage.md, "Fault-tolerant training"):

- ``on_error="replace"``: 1 row in 97 raises (a corrupt file); it is replaced by another row
  drawn from the seed, so every rank keeps its step count and no collective waits on a rank that
  skipped; ``loader.failures`` names the files;
- each rank saves ``loader.state_dict()`` beside the model (``ckpt/data-<rank>.json``); the next
  run, on any number of ranks, loads the list of those states: the epoch goes on with the rows
  no old rank trained on, each exactly once, split over the new ranks by ``DistributedSampler``'s
  rule (its padding included); later epochs are a fresh 3-rank run's;
- ``loader.start()`` before the model checkpoint is read: the first batches are built meanwhile;
- a validation stream whose shards differ in length per rank, with ``even_batches="drop"``:
  every rank takes the same number of validation steps, so the ``all_reduce`` of the loss never
  waits on a rank whose stream ended.

Each rank writes the row ids it trained on to ``ckpt/rows-<world size>-<rank>.json``, the
indices that failed to ``ckpt/failed-<world size>-<rank>.json`` and its validation steps to
``ckpt/validation-<world size>-<rank>.json``
(``tests/torch/test_fault_tolerant_example.py`` checks them).  CPU only, gloo.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from dataloader import Dataset, DistributedSampler, IterableDataset
from dataloader.torch import DataLoader

ROWS, FEATURES, BATCH = 600, 8, 16


class Rows(Dataset):
    """Row ``i``: ``(i, x)``, x float32 of shape (FEATURES,); 1 row in 97 is a corrupt file."""

    def __len__(self) -> int:
        return ROWS

    def __getitem__(self, i: int) -> tuple[int, np.ndarray]:
        if i % 97 == 13:
            raise OSError(f"corrupt record in {self.location(i)}")
        return i, np.full(FEATURES, i / ROWS, dtype=np.float32)

    def location(self, i: int) -> str:
        return f"/data/train/{i:06d}.npy"


class Validation(IterableDataset):
    """This rank's shard of a validation stream: 10 rows on rank 0, 40 on the others."""

    def __iter__(self):
        rank = dist.get_rank()
        for i in range(10 if rank == 0 else 40):
            yield np.full(FEATURES, (rank * 100 + i) / ROWS, dtype=np.float32)


def train_loader() -> DataLoader:
    rows = Rows()
    sampler = DistributedSampler(rows, shuffle=True, seed=0)  # world size and rank from torchrun
    return DataLoader(rows, batch_size=BATCH, sampler=sampler, num_workers=2, on_error="replace", max_failures=0.05)


def resume(loader: DataLoader, model: torch.nn.Module, ckpt: Path) -> None:
    """Load the data position of every old rank, start building, then read the model."""
    states = sorted(ckpt.glob("data-*.json"))
    if states:
        loader.load_state_dict([json.loads(p.read_text()) for p in states])
    dist.barrier()  # every rank has read the old states before any rank writes its own
    loader.start()  # the first batches are built while the checkpoint below is read
    if (ckpt / "model.pt").exists():
        model.load_state_dict(torch.load(ckpt / "model.pt"))


def validate(model: torch.nn.Module) -> int:
    """Validation steps taken: the same on every rank (``even_batches="drop"``)."""
    loader = DataLoader(Validation(), batch_size=4, even_batches="drop")
    steps = 0
    with torch.no_grad():
        for x in loader:
            loss = model(x).square().mean()
            dist.all_reduce(loss)  # would wait forever on a rank whose stream had ended
            steps += 1
    loader.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("ckpt", type=Path)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps (None: the epoch)")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    args.ckpt.mkdir(exist_ok=True)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = train_loader()
    resume(loader, model.module, args.ckpt)
    seen = []
    for step, (ids, x) in enumerate(loader):
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seen += ids.tolist()
        if args.steps is not None and step + 1 == args.steps:
            break
    save(args.ckpt, loader, model.module, rank, world, seen)
    loader.close()  # its worker threads end before the process group does
    steps = validate(model.module)
    (args.ckpt / f"validation-{world}-{rank}.json").write_text(json.dumps(steps))
    print(f"rank {rank}/{world}: {len(seen)} rows, {len(loader.failures)} failed, {steps} validation steps")
    dist.barrier()  # no rank tears gloo down while another still talks to it (torch aborts then)
    dist.destroy_process_group()


def save(ckpt: Path, loader: DataLoader, model: torch.nn.Module, rank: int, world: int, seen: list[int]) -> None:
    """Every rank's data position, rank 0's model, and what this rank trained on."""
    (ckpt / f"data-{rank}.json").write_text(json.dumps(loader.state_dict()))
    (ckpt / f"rows-{world}-{rank}.json").write_text(json.dumps(seen))
    (ckpt / f"failed-{world}-{rank}.json").write_text(json.dumps([r.index for r in loader.failures]))
    if rank == 0:
        torch.save(model.state_dict(), ckpt / "model.pt")
    dist.barrier()  # every state written before any rank may go on (or a new run read them)
    if world > 1 and rank != 0:
        return
    stale = [p for p in ckpt.glob("data-*.json") if int(p.stem.split("-")[1]) >= world]
    for p in stale:  # states of ranks a former, larger world had
        os.remove(p)


if __name__ == "__main__":
    main()
