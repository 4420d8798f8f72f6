"""``python -m dataloader demo --torch``: PyTorch's training loop on the UCI digits, through
``dataloader.torch.DataLoader`` (the same program as docs/usage.md, "PyTorch").

The digits (1,797 images of 8x8 pixels, 10 classes; CC BY 4.0) ship in ``dataloader/data``.
They become a ``torch.utils.data.Dataset`` of tensors (pixels scaled to [0, 1]); torch's
``random_split`` holds out 20%; an ``nn.Sequential`` MLP (64-64-10) trains with
``CrossEntropyLoss`` and SGD on shuffled minibatches from
``DataLoader(..., shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(0))``.
The test accuracy ends above 90% (about 94% with the default --lr 0.01) in a few seconds.  Needs torch; without it the
command says so and exits with status 2.
"""

from __future__ import annotations

import gzip
import time
from importlib import resources
from typing import Any

import numpy as np

from dataloader.cli._common import CliError

__all__ = ["run_torch_demo"]


def _import_torch() -> Any:
    try:
        import torch  # lazy: torch is optional (this command says so when it is missing)
    except ImportError:
        raise CliError(
            "demo --torch needs PyTorch, which is not installed here (pip install torch); "
            "'python -m dataloader demo' trains the NumPy model without it"
        ) from None
    return torch


def _digits(torch: Any) -> Any:
    """The shipped digits as a ``torch.utils.data.Dataset`` of (float32 pixels in [0, 1],
    shape (64,); int64 class) pairs."""
    dataset_base: Any = torch.utils.data.Dataset

    class Digits(dataset_base):
        def __init__(self) -> None:
            path = resources.files("dataloader") / "data" / "digits.csv.gz"
            with gzip.open(str(path), "rt") as f:
                table = np.loadtxt(f, delimiter=",", dtype=np.float32)
            self.x = torch.from_numpy(table[:, :64] / 16.0)
            self.y = torch.from_numpy(table[:, 64].astype(np.int64))

        def __len__(self) -> int:
            return len(self.y)

        def __getitem__(self, i: int) -> tuple[Any, Any]:
            return self.x[i], self.y[i]

    return Digits()


def _train_epoch(model: Any, train: Any, loss_fn: Any, optimizer: Any) -> float:
    """One epoch of SGD steps over ``train``: the summed loss over its rows."""
    model.train()
    total = 0.0
    for x, y in train:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
    return total


def _correct(torch: Any, model: Any, test: Any) -> int:
    """How many of ``test``'s rows the model classifies correctly (no gradients)."""
    model.eval()
    with torch.no_grad():
        return sum(int((model(x).argmax(1) == y).sum()) for x, y in test)


def run_torch_demo(epochs: int, batch_size: int, lr: float, num_workers: int, seed: int) -> int:
    """Train and evaluate; print each epoch's loss and test accuracy.  Returns the exit status."""
    torch = _import_torch()
    # lazy: both import torch, which _import_torch() has just found
    from torch import nn
    from dataloader.torch import DataLoader

    torch.manual_seed(seed)
    train_set, test_set = torch.utils.data.random_split(
        _digits(torch), [0.8, 0.2], generator=torch.Generator().manual_seed(seed)
    )
    train = DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=num_workers,
                       generator=torch.Generator().manual_seed(seed))
    test = DataLoader(test_set, batch_size=256)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    print(f"dataloader demo --torch: torch {torch.__version__}, {len(train_set)} training and "
          f"{len(test_set)} test digits, batch_size={batch_size}, num_workers={num_workers}")
    accuracy = 0.0
    with train:
        for epoch in range(1, epochs + 1):
            t0 = time.perf_counter()
            total = _train_epoch(model, train, loss_fn, optimizer)
            accuracy = _correct(torch, model, test) / len(test_set)
            print(f"epoch {epoch:>3}/{epochs}  loss {total / len(train_set):.4f}  "
                  f"test accuracy {100 * accuracy:.2f}%  ({time.perf_counter() - t0:.3f} s)", flush=True)
    print(f"final test accuracy: {100 * accuracy:.2f}% on {len(test_set)} held-out digits (chance 10%)")
    return 0
