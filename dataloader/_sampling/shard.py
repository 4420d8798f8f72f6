"""``ShardSampler``; public through :mod:`dataloader.shard` (see its docstring)."""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._sampling.base import flatten_chunks
from dataloader._sampling.permute import permutation_chunks, seeded_permutation

__all__ = ["ShardSampler"]


class ShardSampler:
    """Yield this rank's share of ``range(n)``, shuffled per epoch.

    Args:
        len_or_dataset: n, or any object with ``__len__`` (a dataset).
        num_shards: number of shards N (>= 1).  None: the ``WORLD_SIZE``
            environment variable set by torchrun, or 1 when unset.
        shard_id: this shard s, 0 <= s < N.  None: the ``RANK`` environment
            variable, or 0 when unset.
        shuffle: False yields the shard's range in order.
        seed: int >= 0.  Epoch e's order is the shard's range permuted by
            the keyed Feistel permutation whose round keys are drawn from
            ``numpy.random.Generator(PCG64(SeedSequence([seed, e])))``
            (``dataloader._sampling.permute``), so every rank using the same
            seed agrees, and the same (seed, epoch) always gives the same order
            regardless of history.

    Memory is constant in the shard's length: indices are computed one chunk
    of ``INDEX_CHUNK_ROWS`` at a time as the iterator advances.

    Epochs follow RandomSampler: each ``__iter__`` uses the current epoch
    (0 at first, or the value given to ``set_epoch``) and then advances it by
    one.  Call ``set_epoch(e)`` before each epoch for torch-style control.

    Thread-safety: the epoch counter is guarded by a lock; iterators are
    independent.

    Raises:
        TypeError: non-integer arguments, or len_or_dataset without a length.
        ValueError: n < 0, num_shards < 1, shard_id outside [0, num_shards),
            seed < 0, or a WORLD_SIZE / RANK value that is not such an int.
    """

    def __init__(self, len_or_dataset: Any, num_shards: int | None = None,
                 shard_id: int | None = None, shuffle: bool = True, seed: int = 0) -> None:
        if isinstance(len_or_dataset, (int, np.integer)) and not isinstance(len_or_dataset, bool):
            n = int(len_or_dataset)
        elif hasattr(len_or_dataset, "__len__"):
            n = len(len_or_dataset)
        else:
            raise TypeError(
                f"len_or_dataset must be an int or have __len__, got {type(len_or_dataset).__name__}"
            )
        if n < 0:
            raise ValueError(f"dataset length {n=} must be >= 0")
        if num_shards is None:
            num_shards = _env_int("WORLD_SIZE", 1)
            if num_shards < 1:
                raise ValueError(f"WORLD_SIZE={num_shards} must be >= 1")
        else:
            num_shards = _int_arg(num_shards, "num_shards")
            if num_shards < 1:
                raise ValueError(f"{num_shards=} must be >= 1")
        if shard_id is None:
            shard_id = _env_int("RANK", 0)
            if not 0 <= shard_id < num_shards:
                raise ValueError(f"RANK={shard_id} must be in [0, {num_shards}) ({num_shards=})")
        else:
            shard_id = _int_arg(shard_id, "shard_id")
            if not 0 <= shard_id < num_shards:
                raise ValueError(f"{shard_id=} must be in [0, {num_shards}) ({num_shards=})")
        seed = _int_arg(seed, "seed")
        if seed < 0:
            raise ValueError(f"{seed=} must be >= 0")
        self.n = n
        self.num_shards = num_shards
        self.shard_id = shard_id
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.start = shard_id * n // num_shards
        self.stop = (shard_id + 1) * n // num_shards
        self._epoch = 0
        self._lock = threading.Lock()

    @property
    def epoch(self) -> int:
        """The epoch the next ``__iter__`` will use."""
        with self._lock:
            return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` (int >= 0) for the next ``__iter__``."""
        epoch = _int_arg(epoch, "epoch")
        if epoch < 0:
            raise ValueError(f"{epoch=} must be >= 0")
        with self._lock:
            self._epoch = epoch

    def __len__(self) -> int:
        return self.stop - self.start

    def indices(self, epoch: int) -> np.ndarray:
        """This shard's indices for ``epoch`` as one int64 array (pure function; 8 bytes a row).

        Iterating the sampler yields the same indices without building this array.
        """
        if not self.shuffle:
            return np.arange(self.start, self.stop, dtype=np.int64)
        chunks = list(self._chunks(epoch))
        return np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)

    def _chunks(self, epoch: int) -> Iterator[np.ndarray]:
        n = self.stop - self.start
        if n == 0:
            return iter(())
        return permutation_chunks(seeded_permutation(n, self.seed, epoch), offset=self.start)

    def __iter__(self) -> Iterator[int]:
        with self._lock:
            epoch = self._epoch
            self._epoch += 1
        if not self.shuffle:
            return iter(range(self.start, self.stop))
        return flatten_chunks(self._chunks(epoch))

    def __repr__(self) -> str:
        return (
            f"ShardSampler(n={self.n}, num_shards={self.num_shards}, shard_id={self.shard_id}, "
            f"range=[{self.start}, {self.stop}), shuffle={self.shuffle}, seed={self.seed})"
        )


def _int_arg(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None


def _env_int(var: str, default: int) -> int:
    raw = os.environ.get(var)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"environment variable {var}={raw!r} is not an integer") from None
