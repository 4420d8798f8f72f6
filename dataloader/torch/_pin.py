"""``pin_memory=True``: batches are pinned on the worker that built them, before they are yielded.

With an accelerator (``torch.cuda.is_available()``) the loader wraps its ``collate_fn`` so
that each batch, tensors nested in any mappings / sequences / namedtuples included, is copied
into page-locked memory with torch's own ``pin_memory`` helper right after collation, on the
worker thread (several workers pin in parallel; with ``num_workers=0`` inside ``next()``).
``batch.to("cuda", non_blocking=True)`` can then overlap the copy with compute.

Without an accelerator ``pin_memory=True`` is a no-op: batches stay in ordinary memory and no
warning is given (torch warns that no accelerator is found).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data._utils.pin_memory import pin_memory as _pin_memory

__all__ = ["PinnedCollate", "pinning_available"]


def pinning_available() -> bool:
    """True when pinned memory is useful here (CUDA is available)."""
    return torch.cuda.is_available()


class PinnedCollate:
    """``collate_fn`` followed by pinning the batch (for CUDA hosts).

    Args:
        collate_fn: the loader's collate function.
        device: torch's deprecated ``pin_memory_device`` (``""`` for the current accelerator).
    """

    __slots__ = ("collate_fn", "device")

    def __init__(self, collate_fn: Callable[[Any], Any], device: str) -> None:
        self.collate_fn = collate_fn
        self.device = device or None

    def __call__(self, batch: Any) -> Any:
        return _pin_memory(self.collate_fn(batch), self.device)
