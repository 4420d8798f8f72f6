"""``DistributedSampler``; public through :mod:`dataloader.distributed` (see its docstring)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized
from typing import Any

import numpy as np

from dataloader._constants import INDEX_CHUNK_ROWS
from dataloader._native._permute import Permutation
from dataloader._rng import check_seed
from dataloader._sampling.base import ChunkedSampler
from dataloader._sampling.elastic import ElasticMixin, distributed_base
from dataloader._sampling.permute import seeded_permutation
from dataloader._validate import check_int, env_int

__all__ = ["DistributedSampler"]


class DistributedSampler(ElasticMixin, ChunkedSampler, native=True):
    """Restricts loading to this rank's share of the dataset (PyTorch's ``DistributedSampler``).

    Args:
        dataset: anything with ``__len__`` (read at construction and every ``__iter__``; a
            size change raises ``ValueError``, PyTorch fails on it too).
        num_replicas: number of ranks; ``None`` reads the ``WORLD_SIZE`` environment
            variable (1 when unset).
        rank: this rank in ``[0, num_replicas)``; ``None`` reads ``RANK`` (0 when unset).
        shuffle: shuffle the order each epoch (same permutation on every rank).
        seed: shuffle seed, an int >= 0, identical on every rank.
        drop_last: ``False`` pads by repeating indices from the start so every rank gets
            ``ceil(n / num_replicas)``; ``True`` drops the tail so every rank gets
            ``ceil((n - num_replicas) / num_replicas)`` when ``n`` is not divisible (PyTorch's
            formulas; ``n // num_replicas`` for ``n >= num_replicas``).

    Raises:
        ValueError: ``num_replicas < 1``, ``rank`` outside ``[0, num_replicas)``, negative
            ``seed``, or a non-integer ``WORLD_SIZE`` / ``RANK``.
        TypeError: non-int ``num_replicas``, ``rank`` or ``seed``.

    Call :meth:`set_epoch` before each epoch, or every epoch repeats the same order.
    Memory: constant in ``len(dataset)``: the shuffle is a keyed Feistel permutation of
    ``[0, len(dataset))`` keyed by ``(seed, epoch)`` (:mod:`dataloader._sampling.permute`),
    evaluated for this rank's positions one chunk at a time.

    Elastic resume: a ``load_state_dict`` state with ``"elastic"`` cuts makes the next
    ``__iter__`` of its epoch yield this rank's share of what the old ranks left of that epoch,
    split by the rule above (padding or ``drop_last``) applied to the remainder
    (``dataloader._sampling.elastic``).
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None:
            num_replicas = env_int("WORLD_SIZE", 1)
        if rank is None:
            rank = env_int("RANK", 0)
        num_replicas = check_int(num_replicas, "num_replicas")
        rank = check_int(rank, "rank")
        check_int(num_replicas, "num_replicas", minimum=1)  # after both type checks, as before
        if rank >= num_replicas or rank < 0:
            raise ValueError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = bool(drop_last)
        self.shuffle = bool(shuffle)
        self.seed = check_seed(seed)
        n = self._dataset_len = len(dataset)
        if self.drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch that seeds the next shuffles (an int >= 0; not auto-incremented)."""
        self.epoch = check_seed(epoch, "epoch")

    def _index_chunks(self) -> Iterator[np.ndarray]:
        n = len(self.dataset)
        if n != self._dataset_len:
            raise ValueError(
                f"len(dataset) changed from {self._dataset_len} to {n} since this "
                "DistributedSampler was created; create a new one"
            )
        order = None
        first = self._take_start()
        remainder = self._take_remainder(self.epoch)
        if remainder is not None:
            return self._remainder_chunks(remainder, first)
        if self.shuffle and n:
            order = seeded_permutation(n, self.seed, self.epoch)
        return self._chunks(n, order, first)

    def _chunks(self, n: int, order: Permutation | None, first: int) -> Iterator[np.ndarray]:
        step = self.num_replicas
        for start in range(first, self.num_samples, INDEX_CHUNK_ROWS):
            stop = min(start + INDEX_CHUNK_ROWS, self.num_samples)
            positions = np.arange(start, stop, dtype=np.int64) * step + self.rank
            if self.total_size > n:
                positions %= n
            yield positions if order is None else order.take(positions, positions)

    def __len__(self) -> int:
        share = self._remainder_len()
        return self.num_samples if share is None else share

    def elastic_params(self) -> dict[str, Any]:
        """``n``, ``seed``, ``shuffle``, ``drop_last``, ``world_size``, ``rank`` (``ElasticMixin``)."""
        return {"n": self._dataset_len, "seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last,
                "world_size": self.num_replicas, "rank": self.rank}

    def _base(self, levels: list[tuple[int, list[int]]], epoch: int) -> Any:
        return distributed_base(self._dataset_len, self.seed, epoch, self.shuffle)
