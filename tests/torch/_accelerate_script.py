"""Accelerate ``prepare()`` on ``dataloader.torch.DataLoader``; run by test_clients.py.

Usage: ``python _accelerate_script.py OUT_DIR MODE`` (alone, or under ``accelerate launch``).
MODE ``prepare``: the loader goes through ``accelerator.prepare()`` (which rebuilds it as its
own torch ``DataLoader`` from our attributes, as it does any loader); ``ours``: only the model
and optimizer are prepared, our loader shards with a ``DistributedSampler`` of the
accelerator's rank and stays ours.  Each process writes the row ids it trained on, per epoch,
to ``OUT_DIR/rank{r}.json``.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from accelerate import Accelerator
from torch.utils.data import TensorDataset

from dataloader.torch import DataLoader, DistributedSampler

ROWS = 48


def main() -> None:
    out, mode = sys.argv[1], sys.argv[2]
    accelerator = Accelerator(cpu=True)
    ds = TensorDataset(torch.arange(ROWS, dtype=torch.float32).reshape(-1, 1), torch.arange(ROWS))
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
    if mode == "prepare":
        loader = DataLoader(ds, batch_size=4, shuffle=True, num_workers=2)
        model, optimizer, prepared = accelerator.prepare(model, optimizer, loader)
    else:
        sampler = DistributedSampler(ds, num_replicas=accelerator.num_processes, rank=accelerator.process_index)
        prepared = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2)
        model, optimizer = accelerator.prepare(model, optimizer)
    seen: dict[str, list[int]] = {}
    for epoch in range(2):
        prepared.set_epoch(epoch) if mode == "prepare" else sampler.set_epoch(epoch)
        for x, ids in prepared:
            x, ids = x.to(accelerator.device), ids.to(accelerator.device)
            seen.setdefault(str(epoch), []).extend(ids.tolist())
            loss = model(x).pow(2).mean()
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
    with open(os.path.join(out, f"rank{accelerator.process_index}.json"), "w") as f:
        json.dump(seen, f)


if __name__ == "__main__":
    main()
