"""HF ``Trainer.train()`` for one epoch through ``dataloader.torch.DataLoader``; run by test_clients.py.

A tiny model built from a config and a ``datasets.Dataset`` built from a dict (torch format):
nothing is downloaded.
The ``Trainer`` subclass overrides ``get_train_dataloader`` (the documented hook) to return our
loader; ``OUT_DIR/ids.json`` gets the ids of the rows the model was fed.
"""

from __future__ import annotations

import json
import os
import sys

import datasets
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from dataloader.torch import DataLoader

ROWS = 24


class OurLoaderTrainer(Trainer):
    def get_train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size, shuffle=True,
                          num_workers=2, collate_fn=self.data_collator)


def main() -> None:
    out = sys.argv[1]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=32, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16, num_labels=2)
    model = BertForSequenceClassification(config)
    seen: list[int] = []
    forward = model.forward

    def recording_forward(*args, **kwargs):
        seen.extend(kwargs["input_ids"][:, 0].tolist())
        return forward(*args, **kwargs)

    model.forward = recording_forward
    rows = {"input_ids": [[i % 32] + [1] * 7 for i in range(ROWS)], "labels": [i % 2 for i in range(ROWS)]}
    ds = datasets.Dataset.from_dict(rows).with_format("torch")
    args = TrainingArguments(output_dir=out, num_train_epochs=1, per_device_train_batch_size=4, report_to=[],
                             save_strategy="no", logging_strategy="no", use_cpu=True, disable_tqdm=True)
    result = OurLoaderTrainer(model=model, args=args, train_dataset=ds).train()
    with open(os.path.join(out, "ids.json"), "w") as f:
        json.dump({"ids": seen, "steps": result.global_step}, f)


if __name__ == "__main__":
    main()
