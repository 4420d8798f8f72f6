"""The loader's dataset-kind rule: an ``AsyncDataset`` (coroutine items) or a plain dataset.

``DataLoader(...)`` applies it once, when it is built, so a dataset that mixes the two kinds
(``async def`` methods on a plain dataset, plain ones on an ``AsyncDataset``, both bases) is
refused there, before any epoch starts.
"""

from __future__ import annotations

import inspect
from typing import Any

from dataloader._datasets.asyncds import AsyncDataset
from dataloader._datasets.base import Dataset

__all__ = ["check_dataset_kind"]


def check_dataset_kind(dataset: Any) -> bool:
    """True for an ``AsyncDataset``; False for a plain dataset.

    Raises:
        TypeError: ``async def`` methods on a plain dataset, plain methods on an
            ``AsyncDataset``, a class with both bases, or an ``AsyncDataset``
            without ``__len__``.
    """
    cls = type(dataset)
    methods = [(name, getattr(cls, name)) for name in ("__getitem__", "__getitems__") if hasattr(cls, name)]
    if not isinstance(dataset, AsyncDataset):
        for name, fn in methods:
            if inspect.iscoroutinefunction(fn):
                raise TypeError(
                    f"{cls.__name__}.{name} is async def, but {cls.__name__} is not an AsyncDataset: "
                    "subclass dataloader.AsyncDataset for coroutine items"
                )
        return False
    if isinstance(dataset, Dataset):
        raise TypeError(f"{cls.__name__} derives from both Dataset and AsyncDataset; choose one")
    for name, fn in methods:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"{cls.__name__}.{name} must be async def in an AsyncDataset")
    if cls.__len__ is AsyncDataset.__len__:
        raise TypeError(f"{cls.__name__} must define __len__ (the loader's samplers need it)")
    return True
