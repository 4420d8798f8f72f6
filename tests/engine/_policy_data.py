"""Datasets of every builder kind (``BuilderKind``) for the error-policy tests: item ``i`` is
``10 * i`` for ``0 <= i < N``, and any other index fails with ``IndexError`` on every path
(``__getitem__``, ``__getitems__``, a native gather, a coroutine), so one batch sampler with
out-of-range indices gives every kind the same failing places."""

from __future__ import annotations

import asyncio

import numpy as np

from dataloader import ArrayDataset, AsyncDataset, Dataset

N = 30


def value(index):
    if not 0 <= index < N:
        raise IndexError(f"index {index} is out of range for {N} items")
    return np.int64(10 * index)


class Items(Dataset):
    def __len__(self):
        return N

    def __getitem__(self, index):
        return value(index)

    def location(self, index):
        return f"/data/{index}.bin"


class Getitems(Items):
    def __getitems__(self, indices):
        return [value(i) for i in indices]  # the first bad index fails the whole batch


class AsyncItems(AsyncDataset):
    def __len__(self):
        return N

    async def __getitem__(self, index):
        await asyncio.sleep(0)
        return value(index)


class AsyncGetitems(AsyncItems):
    async def __getitems__(self, indices):
        return [value(i) for i in indices]


def arrays():
    return ArrayDataset(np.arange(N, dtype=np.int64) * 10)


def as_list(batch):
    """A batch as a flat list of ints (an ``ArrayDataset``'s one column, or an array)."""
    if isinstance(batch, (tuple, list)):
        (batch,) = batch
    return np.asarray(batch).reshape(-1).tolist()
