"""``DataLoader.seek(epoch, batch)``: the state of a loader positioned at any batch of any epoch.

``seek`` builds the state that ``DataLoader.state_dict()`` would have returned at batch
``batch`` of epoch ``epoch`` (``dataloader._engine.resume``) and loads it, so the position it
gives is exactly a resumed one: the batches from there equal an uninterrupted run's.

What each (batch) sampler costs and what "epoch ``e``" means for it:

- the built-in samplers (``SequentialSampler``, ``RandomSampler``, ``SubsetRandomSampler``,
  ``DistributedSampler``, ``ShardSampler``; under our ``BatchSampler``): O(1), whatever
  ``epoch`` and ``batch``: the sampler's ``set_epoch(epoch)`` is called (the loader's own
  ``RandomSampler`` gets it from the loader anyway; a ``DistributedSampler`` then has the
  epoch a training loop's ``sampler.set_epoch(epoch)`` gives it), and its next iteration
  starts ``batch * batch_size`` positions in (the Feistel permutation is evaluated from
  there; ``RandomSampler(replacement=True)`` and ``WeightedRandomSampler`` draw and drop
  those numbers, vectorised);
- a sampler that draws from a ``numpy.random.Generator`` (its state has ``"bit_generator"``)
  or a ``torch.Generator``: its order for an epoch depends on every draw before it, so only
  the next epoch (``epoch`` equal to the one the next ``iter(loader)`` would start) can be
  sought; another raises ``ValueError``;
- a sampler of the user's: ``set_epoch(epoch)`` when it has one, its ``state_dict()`` loaded
  when it has one, then its first ``batch`` index batches are drawn and dropped by the next
  ``iter(loader)`` (no item is fetched; the cost of drawing them);
- a sampler without a seed (``generator=None``): refused as ``state_dict()`` refuses it
  (``ValueError``).

An ``IterableDataset`` has no sampler: its position is its own stream.  ``seek(epoch, 0)``
sets the epoch number (worker seeds, ``item_rng``); ``seek(epoch, batch > 0)`` is done by
building and dropping ``batch`` batches at the next ``iter(loader)`` (items read again, as a
resume does) for a dataset without ``state_dict`` and ``num_workers=0``; otherwise it raises
``TypeError`` (save ``state_dict()`` at that position and load it instead).

Thread-safety: called by the engine under its lock.
"""

from __future__ import annotations

import copy
from typing import Any

from dataloader._engine.resume import STATE_VERSION, Resumer, stateful
from dataloader._sampling.batch import BatchSampler, starts_late
from dataloader._validate import check_int

__all__ = ["SeekTarget", "seek_state"]


class SeekTarget:
    """A checked ``seek(epoch, batch)`` (checked before anything of the loader changes).

    Args:
        epoch: the epoch (int >= 0).
        batch: batches of that epoch already consumed (int >= 0, at most the epoch's length).
        length: batches per epoch, or None when unknown (no ``__len__``).

    Raises:
        TypeError: ``epoch`` or ``batch`` is not an int (naming it).
        ValueError: a negative value, or ``batch`` beyond the epoch's length (naming both).
    """

    __slots__ = ("epoch", "batch")

    def __init__(self, epoch: object, batch: object, length: int | None) -> None:
        self.epoch = check_int(epoch, "epoch", minimum=0)
        self.batch = check_int(batch, "batch", minimum=0)
        if length is not None and self.batch > length:
            raise ValueError(
                f"seek: batch={self.batch} is beyond the epoch's length ({length} batches); "
                f"batch must be in [0, {length}]"
            )


def seek_state(
    resumer: Resumer, target: SeekTarget, *, seed: int, next_epoch: int, dataset: Any, iterable: bool, workers: int
) -> dict[str, Any]:
    """The loader state at batch ``target.batch`` of epoch ``target.epoch`` (module docstring).

    Args:
        resumer: the loader's resume bookkeeping (its sampler and layout).
        seed: the loader's base seed (kept).
        next_epoch: the epoch the next ``iter(loader)`` would start.

    Raises:
        TypeError: an ``IterableDataset`` that cannot be sought mid-epoch (module docstring).
        ValueError: a sampler whose order cannot be reproduced, or another epoch than the next
            for one that draws from a generator.
    """
    if iterable:
        if target.batch and (workers > 0 or stateful(dataset)):
            raise TypeError(
                f"seek(epoch={target.epoch}, batch={target.batch}): an IterableDataset's position is its "
                "own stream; only a dataset without state_dict and num_workers=0 can be sought mid-epoch "
                "(its first batches are built and dropped); save state_dict() there and load it instead"
            )
        return _state(resumer, seed, target, None)
    root = resumer.sampler
    state = _sampler_state(root)
    if target.epoch != next_epoch and _draws_ahead(state):
        raise ValueError(
            f"seek(epoch={target.epoch}, ...): the sampler draws from a random generator whose state "
            f"moves with every epoch, so only the next epoch ({next_epoch}) can be sought; seed the "
            "sampler with an int (the order is then a function of the seed and the epoch)"
        )
    index: Any = root.sampler if isinstance(root, BatchSampler) else root
    if hasattr(index, "set_epoch"):
        index.set_epoch(target.epoch)
        state = _sampler_state(root)
    return _state(resumer, seed, target, _rewound(state, root))


def _state(resumer: Resumer, seed: int, target: SeekTarget, sampler: Any) -> dict[str, Any]:
    layout = resumer.layout
    return {
        "version": STATE_VERSION, "seed": seed, "epoch": target.epoch, "yielded": target.batch,
        "sampler": sampler, "dataset": None, "loader": layout.describe() if layout is not None else None,
    }


def _sampler_state(root: Any) -> Any:
    """A copy of ``root.state_dict()`` (None without one; raises what it raises)."""
    return copy.deepcopy(root.state_dict()) if hasattr(root, "state_dict") else None


def _draws_ahead(state: Any) -> bool:
    """``state`` holds a generator's state (NumPy's ``bit_generator``, torch's generators)."""
    if not isinstance(state, dict):
        return False
    if "bit_generator" in state or state.get("torch_generators"):
        return True
    return _draws_ahead(state.get("sampler")) or any(_draws_ahead(s) for s in state.get("samplers") or ())


def _rewound(state: Any, root: Any) -> Any:
    """``state`` with the built-in samplers' ``start`` at 0 (a start loaded earlier and not
    used yet is replaced by the sought one, which ``Resumer.load`` sets)."""
    if not isinstance(state, dict) or not starts_late(root):
        return state
    state = {**state, "start": 0}
    inner = getattr(root, "sampler", None) if isinstance(root, BatchSampler) else None
    if inner is not None and starts_late(inner) and isinstance(state.get("sampler"), dict):
        state["sampler"] = {**state["sampler"], "start": 0}
    return state
