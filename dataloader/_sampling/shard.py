"""``ShardSampler``; public through :mod:`dataloader.shard` (see its docstring)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._rng import EpochRng
from dataloader._sampling.base import ChunkedSampler, arange_chunks
from dataloader._sampling.elastic import ElasticMixin, shard_base
from dataloader._sampling.permute import permutation_chunks, seeded_permutation
from dataloader._validate import check_int, env_int

__all__ = ["ShardSampler"]


class ShardSampler(ElasticMixin, ChunkedSampler, native=True):
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
    independent.  The loader slices its index chunks into batches without
    per-index Python work (like RandomSampler's).

    Elastic resume: a ``load_state_dict`` state with ``"elastic"`` cuts makes the next
    ``__iter__`` of its epoch yield this rank's contiguous part of what the old shards left
    (the old shards' remaining indices in shard order, each in its shard's permuted order;
    ``dataloader._sampling.elastic``): nothing padded or dropped.

    Raises:
        TypeError: non-integer arguments, or len_or_dataset without a length.
        ValueError: n < 0, num_shards < 1, shard_id outside [0, num_shards),
            seed < 0, or a WORLD_SIZE / RANK value that is not such an int.
    """

    _rule = "shard"  # how an elastic remainder is split (dataloader._sampling.remainder)

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
        # Names in messages: the argument, or the environment variable it came from.
        name = "WORLD_SIZE" if num_shards is None else "num_shards"
        if num_shards is None:
            num_shards = env_int(name, 1)
        num_shards = check_int(num_shards, name, minimum=1)
        name = "RANK" if shard_id is None else "shard_id"
        if shard_id is None:
            shard_id = env_int(name, 0)
        shard_id = check_int(shard_id, name)
        if not 0 <= shard_id < num_shards:
            raise ValueError(f"{name}={shard_id} must be in [0, {num_shards}) ({num_shards=})")
        self.n = n
        self.num_shards = num_shards
        self.shard_id = shard_id
        self.shuffle = bool(shuffle)
        self.seed = check_int(seed, "seed", minimum=0)
        self.start = shard_id * n // num_shards
        self.stop = (shard_id + 1) * n // num_shards
        self._rng = EpochRng(self.seed)

    @property
    def epoch(self) -> int:
        """The epoch the next ``__iter__`` will use."""
        return self._rng.epoch

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` (int >= 0) for the next ``__iter__``."""
        self._rng.set_epoch(epoch)

    def __len__(self) -> int:
        share = self._remainder_len()
        return self.stop - self.start if share is None else share

    def elastic_params(self) -> dict[str, Any]:
        """``n``, ``seed``, ``shuffle``, ``drop_last`` (False), ``world_size``, ``rank`` (``ElasticMixin``)."""
        return {"n": self.n, "seed": self.seed, "shuffle": self.shuffle, "drop_last": False,
                "world_size": self.num_shards, "rank": self.shard_id}

    def _base(self, levels: list[tuple[int, list[int]]], epoch: int) -> Any:
        return shard_base(self.n, levels[0][0], self.seed, epoch, self.shuffle)

    def indices(self, epoch: int) -> np.ndarray:
        """This shard's indices for ``epoch`` as one int64 array (pure function; 8 bytes a row).

        Iterating the sampler yields the same indices without building this array.
        """
        if not self.shuffle:
            return np.arange(self.start, self.stop, dtype=np.int64)
        chunks = list(self._chunks(epoch))
        return np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)

    def _chunks(self, epoch: int, first: int = 0) -> Iterator[np.ndarray]:
        n = self.stop - self.start
        if n == 0:
            return iter(())
        return permutation_chunks(seeded_permutation(n, self.seed, epoch), min(first, n), offset=self.start)

    def _index_chunks(self) -> Iterator[np.ndarray]:
        epoch = self._rng.claim()  # now, at iter(): the epoch belongs to this call
        first = self._take_start()
        remainder = self._take_remainder(epoch)
        if remainder is not None:
            return self._remainder_chunks(remainder, first)
        if not self.shuffle:
            return arange_chunks(self.stop, min(self.start + first, self.stop))
        return self._chunks(epoch, first)

    def __repr__(self) -> str:
        return (
            f"ShardSampler(n={self.n}, num_shards={self.num_shards}, shard_id={self.shard_id}, "
            f"range=[{self.start}, {self.stop}), shuffle={self.shuffle}, seed={self.seed})"
        )
