"""A sampler state that continues an epoch on another number of ranks (elastic resume).

``DistributedSampler`` and ``ShardSampler`` accept, in their ``load_state_dict`` state, an
optional ``"elastic"`` key: the list of cuts made to the epoch so far, oldest first, each
``{"world_size": W, "consumed": [c_0, ..., c_{W-1}]}`` (rank ``r`` of ``W`` consumed the first
``c_r`` samples of its share).  The next ``__iter__`` of the state's ``"epoch"`` then yields this
rank's share of what remains of that epoch (``dataloader._sampling.remainder``), from its
sample ``"start"`` on, and ``len(sampler)`` is that share until it starts; an ``__iter__`` of
another epoch drops it.  ``state_dict()`` gives the key back while it is pending, so an epoch
resumed elastically can be saved and resumed again (same or another world size).

``DataLoader.load_state_dict`` writes this key (``dataloader._engine.elastic``); users do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._sampling.permute import seeded_permutation
from dataloader._sampling.remainder import RemainderOrder, shard_bounds
from dataloader._sampling.state import ResumableMixin, check_state
from dataloader._validate import check_int

__all__ = ["ElasticMixin", "check_levels"]


def check_levels(levels: object, owner: str) -> list[tuple[int, list[int]]]:
    """``levels`` (the ``"elastic"`` list) as ``(world_size, consumed)`` pairs.

    Raises:
        TypeError: not a list of dicts, or a count that is not an int (naming it).
        ValueError: a missing or unknown key, a world size < 1, a negative count.
    """
    if not isinstance(levels, list):
        raise TypeError(f"{owner} state 'elastic' must be a list, got {type(levels).__name__}")
    out = []
    for i, level in enumerate(levels):
        sd = check_state(level, f"{owner} 'elastic'[{i}]", ("world_size", "consumed"))
        world = check_int(sd["world_size"], f"{owner} 'elastic'[{i}] 'world_size'", minimum=1)
        consumed = sd["consumed"]
        if not isinstance(consumed, list):
            raise TypeError(f"{owner} 'elastic'[{i}] 'consumed' must be a list, got {type(consumed).__name__}")
        out.append((world, [check_int(c, f"{owner} 'elastic'[{i}] 'consumed' item", minimum=0) for c in consumed]))
    return out


class ElasticMixin(ResumableMixin):
    """``DistributedSampler`` / ``ShardSampler``'s elastic part (module docstring).

    The subclass gives ``_rule`` (``"distributed"`` / ``"shard"``), ``elastic_params()`` and
    ``_base(levels, epoch)``; its ``_index_chunks`` asks ``_take_remainder(epoch)`` after
    ``_take_start()`` and iterates the order it returns (None: a normal epoch).
    """

    _rule = "distributed"
    _remainder: tuple[int, list[tuple[int, list[int]]]] | None = None  # (epoch, levels), pending

    @property
    def elastic_rule(self) -> str:
        """How this sampler splits an epoch's sequence: ``"distributed"`` or ``"shard"``."""
        return self._rule

    def elastic_params(self) -> dict[str, Any]:
        """What the remainder's order depends on: ``n``, ``seed``, ``shuffle``, ``drop_last``,
        ``world_size``, ``rank`` (the values an elastic state records and checks)."""
        raise NotImplementedError

    def _base(self, levels: list[tuple[int, list[int]]], epoch: int) -> Any:
        raise NotImplementedError

    def _pending_epoch(self) -> int:
        return int(getattr(self, "epoch"))

    def elastic_order(self, levels: list[tuple[int, list[int]]], epoch: int) -> RemainderOrder:
        """The remainder of epoch ``epoch`` after ``levels``.

        Raises:
            ValueError: a level's counts do not fit (a count past its rank's share).
        """
        p = self.elastic_params()
        return RemainderOrder(self._base(levels, epoch), p["n"], self._rule, p["drop_last"], levels)

    def _take_remainder(self, epoch: int) -> RemainderOrder | None:
        pending, self._remainder = self._remainder, None
        if pending is None or pending[0] != epoch:
            return None
        return self.elastic_order(pending[1], epoch)

    def _remainder_chunks(self, order: RemainderOrder, first: int) -> Iterator[np.ndarray]:
        p = self.elastic_params()
        return order.chunks(p["world_size"], p["rank"], first)

    def _remainder_len(self) -> int | None:
        """This rank's share of the pending remainder (its epoch is the next one), else None."""
        pending = self._remainder
        if pending is None or pending[0] != self._pending_epoch():
            return None
        p = self.elastic_params()
        return self.elastic_order(pending[1], pending[0]).share(p["world_size"], p["rank"])

    def state_dict(self) -> dict[str, Any]:
        """``ResumableMixin.state_dict`` plus ``"elastic"`` while a remainder is pending."""
        sd = super().state_dict()
        pending = self._remainder
        if pending is not None and pending[0] == sd.get("epoch"):
            sd["elastic"] = [{"world_size": w, "consumed": list(c)} for w, c in pending[1]]
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """``ResumableMixin.load_state_dict``; an ``"elastic"`` list makes the next ``__iter__``
        of the state's epoch iterate what remains of it (module docstring).

        Raises:
            TypeError, ValueError: a malformed state (naming the key), or cuts that do not fit
                this sampler's epoch.
        """
        name = type(self).__name__
        levels = None
        if isinstance(state_dict, dict) and "elastic" in state_dict:
            levels = check_levels(state_dict["elastic"], name)
            state_dict = {k: v for k, v in state_dict.items() if k != "elastic"}
        super().load_state_dict(state_dict)
        self._remainder = None
        if levels:
            epoch = self._pending_epoch()
            self.elastic_order(levels, epoch)  # a cut that does not fit fails now
            self._remainder = (epoch, levels)


def shard_base(n: int, world: int, seed: int, epoch: int, shuffle: bool) -> Any:
    """Positions of ``ShardSampler``'s fresh sequence (its ``world`` shards' permuted ranges,
    concatenated) to dataset indices; the identity without ``shuffle``."""
    if not shuffle:
        return lambda x: x
    bounds = shard_bounds(n, world)
    perms: dict[int, Any] = {}  # built on first use; the consumer thread's own

    def take(s: int, x: np.ndarray) -> np.ndarray:
        lo = int(bounds[s])
        if s not in perms:
            perms[s] = seeded_permutation(int(bounds[s + 1]) - lo, seed, epoch)
        out: np.ndarray = perms[s].take(np.ascontiguousarray(x - lo))
        out += lo
        return out

    def indices(x: np.ndarray) -> np.ndarray:
        if not len(x):
            return x
        first, last = (np.searchsorted(bounds, [x.min(), x.max()], side="right") - 1).tolist()
        if first == last:  # the usual chunk: inside one shard
            return take(first, x)
        out = np.empty_like(x)
        shard = np.searchsorted(bounds, x, side="right") - 1
        for s in range(first, last + 1):
            mask = shard == s
            if mask.any():
                out[mask] = take(s, x[mask])
        return out

    return indices


def distributed_base(n: int, seed: int, epoch: int, shuffle: bool) -> Any:
    """Positions of ``DistributedSampler``'s epoch order to dataset indices."""
    if not shuffle or not n:
        return lambda x: x
    perms: list[Any] = []  # built on first use (a length needs no permutation)

    def indices(x: np.ndarray) -> np.ndarray:
        if not perms:
            perms.append(seeded_permutation(n, seed, epoch))
        out: np.ndarray = perms[0].take(np.ascontiguousarray(x))
        return out

    return indices
