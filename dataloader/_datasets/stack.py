"""``StackDataset``: several datasets of one length side by side (PyTorch's rules and messages).

Item ``i`` is ``tuple(d[i] for d in datasets)`` (positional form) or ``{name: d[i]}`` (keyword
form).  ``__getitems__`` fetches each member's part of the batch with one call (the member's own
``__getitems__`` where it has one, so an ``ArrayDataset`` or ``.ndf`` member gathers its rows at
once) and zips the parts into per-item tuples / dicts, as torch does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.fetch import fetch_items

__all__ = ["StackDataset"]


class StackDataset(Dataset[Any]):
    """Datasets stacked item by item: ``StackDataset(a, b)[i] == (a[i], b[i])``,
    ``StackDataset(x=a, y=b)[i] == {"x": a[i], "y": b[i]}``.

    Args:
        *args: map-style datasets with ``__len__``, all of one length (tuple items), or
        **kwargs: the same by name (dict items); not both.

    Thread-safety: read-only; as thread-safe as its members.

    Raises:
        ValueError: no dataset, both ``args`` and ``kwargs``, or lengths that differ
            (PyTorch's messages).  ``__getitems__`` raises ``ValueError`` when a member's
            ``__getitems__`` answers with a different number of items.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                "input/output, but both types are given."
            )
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        members = list(args) if args else list(kwargs.values())
        lengths = [len(d) for d in members]
        if any(n != lengths[0] for n in lengths):
            names = [f"args[{k}]" for k in range(len(args))] if args else list(kwargs)
            raise ValueError(
                "Size mismatch between datasets: "
                + ", ".join(f"{name} has {n}" for name, n in zip(names, lengths, strict=True))
            )
        self._length = lengths[0]
        self.datasets: tuple[Any, ...] | dict[str, Any] = tuple(args) if args else dict(kwargs)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> list[Any]:
        keys = indices.tolist() if isinstance(indices, np.ndarray) else list(indices)
        members = self.datasets.items() if isinstance(self.datasets, dict) else enumerate(self.datasets)
        parts = {}
        for name, d in members:
            items = fetch_items(d, keys) if callable(getattr(d, "__getitems__", None)) else [d[i] for i in keys]
            if len(items) != len(keys):
                raise ValueError(f"Nested dataset's output size mismatch. Expected {len(keys)}, got {len(items)}")
            parts[name] = items
        if isinstance(self.datasets, dict):
            return [dict(zip(parts, row, strict=True)) for row in zip(*parts.values(), strict=True)]
        return [tuple(row) for row in zip(*parts.values(), strict=True)]
