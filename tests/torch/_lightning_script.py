"""One Lightning fit (+ validate) through ``dataloader.torch.DataLoader``; run by test_clients.py.

Usage: ``python _lightning_script.py OUT_DIR DEVICES MODE`` with MODE ``inject`` (Lightning
injects its ``DistributedSampler`` into our loader) or ``own`` (``use_distributed_sampler=False``
and the library's ``DistributedSampler``).  Each rank writes the row ids its training steps
saw, per epoch, to ``OUT_DIR/rank{r}.json``, and its validation ids to ``OUT_DIR/val{r}.json``.
"""

from __future__ import annotations

import json
import os
import sys
import warnings

import torch
import pytorch_lightning as pl
from torch.utils.data import TensorDataset

from dataloader.distributed import DistributedSampler
from dataloader.torch import DataLoader

ROWS = 48
warnings.filterwarnings("ignore")


class Model(pl.LightningModule):
    def __init__(self, out: str, mode: str) -> None:
        super().__init__()
        self.out, self.mode = out, mode
        self.layer = torch.nn.Linear(1, 1)
        self.seen: dict[int, list[int]] = {}
        self.val_seen: list[int] = []
        self.ds = TensorDataset(torch.arange(ROWS, dtype=torch.float32).reshape(-1, 1), torch.arange(ROWS))

    def train_dataloader(self) -> DataLoader:
        if self.mode == "own":
            sampler = DistributedSampler(self.ds, num_replicas=self.trainer.world_size,
                                         rank=self.trainer.global_rank, seed=0)
            return DataLoader(self.ds, batch_size=4, sampler=sampler, num_workers=2)
        return DataLoader(self.ds, batch_size=4, shuffle=True, num_workers=2)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.ds, batch_size=8)

    def on_train_epoch_start(self) -> None:
        loader = self.trainer.train_dataloader
        assert isinstance(loader, DataLoader), type(loader)  # ours, re-created with Lightning's sampler
        sampler = loader.sampler
        if self.mode == "own" and hasattr(sampler, "set_epoch"):
            sampler.set_epoch(self.current_epoch)

    def training_step(self, batch, batch_idx):
        x, ids = batch
        self.seen.setdefault(self.current_epoch, []).extend(ids.tolist())
        return self.layer(x).pow(2).mean()

    def validation_step(self, batch, batch_idx):
        self.val_seen.extend(batch[1].tolist())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.001)

    def on_train_end(self) -> None:
        with open(os.path.join(self.out, f"rank{self.global_rank}.json"), "w") as f:
            json.dump({str(e): ids for e, ids in self.seen.items()}, f)


def main() -> None:
    out, devices, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    strategy = "ddp" if devices > 1 else "auto"
    trainer = pl.Trainer(
        accelerator="cpu", devices=devices, strategy=strategy, max_epochs=2, logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, use_distributed_sampler=(mode != "own"),
    )
    model = Model(out, mode)
    trainer.fit(model)
    model.val_seen.clear()
    trainer.validate(model, verbose=False)
    with open(os.path.join(out, f"val{trainer.global_rank}.json"), "w") as f:
        json.dump(model.val_seen, f)


if __name__ == "__main__":
    main()
