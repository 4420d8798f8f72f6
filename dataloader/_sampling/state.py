"""Sampler ``state_dict`` / ``load_state_dict``: where the next ``__iter__`` starts.

A built-in sampler's state describes its *next* ``__iter__``, in O(1) space and time:

- ``"epoch"``: the epoch that iteration uses (seeded samplers, ``DistributedSampler``);
- ``"start"``: the position it starts at, in what the sampler yields (indices, or batches for
  ``BatchSampler``); ``0`` unless a loaded state set it.  The next ``__iter__`` consumes it
  (later ones start at 0 again);
- ``"bit_generator"``: the ``numpy.random.Generator``'s ``bit_generator.state`` when the
  sampler draws from one (its state at the time of ``state_dict()``).

``load_state_dict(sd)`` makes the next ``__iter__`` yield what the saved sampler's next
``__iter__`` would have yielded from position ``start`` on.  Starting at ``start`` is O(1) for
``SequentialSampler``, ``RandomSampler(replacement=False)``, ``SubsetRandomSampler``,
``DistributedSampler`` and ``ShardSampler`` (the permutation is evaluated from that position);
``RandomSampler(replacement=True)`` and ``WeightedRandomSampler`` draw and drop ``start``
numbers (vectorised, about a nanosecond each).  The loader uses this for exact mid-epoch resume
(``DataLoader.state_dict``); the state is JSON-serialisable (ints, strings, dicts).

Thread-safety: like iteration, call these on the thread that iterates the sampler.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, cast

import numpy as np

from dataloader._rng import EpochRng
from dataloader._validate import check_int

__all__ = ["ResumableMixin", "check_state", "skip_chunks"]


def check_state(sd: object, owner: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """``sd`` as a dict with exactly the ``required`` keys (plus any of ``optional``).

    Raises:
        TypeError: ``sd`` is not a dict.
        ValueError: a key is missing or unknown, naming it and ``owner``.
    """
    if not isinstance(sd, dict):
        raise TypeError(f"{owner} state must be a dict, got {type(sd).__name__}")
    missing = [k for k in required if k not in sd]
    if missing:
        raise ValueError(f"{owner} state is missing key {missing[0]!r} (has {sorted(map(str, sd))})")
    unknown = [k for k in sd if k not in required and k not in optional]
    if unknown:
        raise ValueError(f"{owner} state has unknown key {unknown[0]!r}")
    return sd


def skip_chunks(chunks: Iterator[np.ndarray], skip: int) -> Iterator[np.ndarray]:
    """``chunks`` without their first ``skip`` indices (the skipped ones are still computed)."""
    for chunk in chunks:
        if skip >= len(chunk):
            skip -= len(chunk)
            continue
        yield chunk[skip:] if skip else chunk
        skip = 0


class _OwnEpoch(Protocol):
    """A sampler that counts epochs itself, without an ``EpochRng``: ``epoch`` and ``set_epoch``."""

    epoch: int

    def set_epoch(self, epoch: int) -> None: ...


class ResumableMixin:
    """``state_dict`` / ``load_state_dict`` for the built-in samplers (see the module docstring).

    A subclass calls :meth:`_take_start` once per ``__iter__`` (when the iteration is set
    up) and starts at that position.
    """

    _start = 0

    def _take_start(self) -> int:
        start, self._start = self._start, 0
        return start

    def state_dict(self) -> dict[str, Any]:
        """The state the next ``__iter__`` starts from: ``{"start": p, ...}`` (see above).

        Raises:
            ValueError: the sampler draws from fresh OS entropy (``generator=None``): its
                order cannot be reproduced, so there is no state to save.
        """
        sd: dict[str, Any] = {"start": self._start}
        rng: EpochRng | None = getattr(self, "_rng", None)
        if rng is not None:
            if rng.generator is None:
                raise ValueError(
                    f"{type(self).__name__}(generator=None) draws fresh OS entropy every epoch: "
                    "its order cannot be saved or resumed; pass an int seed"
                )
            sd["epoch"] = rng.epoch
            if isinstance(rng.generator, np.random.Generator):
                sd["bit_generator"] = rng.generator.bit_generator.state
        elif hasattr(self, "epoch"):
            sd["epoch"] = self.epoch
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Make the next ``__iter__`` start where ``state_dict`` says.

        Raises:
            TypeError: ``state_dict`` is not a dict, or a value is not an int (naming it).
            ValueError: a missing or unknown key, a negative value, or a state saved from a
                sampler of another kind (``bit_generator`` for one without a Generator).
        """
        name = type(self).__name__
        rng: EpochRng | None = getattr(self, "_rng", None)
        seeded = rng is not None or hasattr(self, "epoch")
        has_gen = rng is not None and isinstance(rng.generator, np.random.Generator)
        sd = check_state(
            state_dict, name, ("start", "epoch") if seeded else ("start",), ("bit_generator",) if has_gen else ()
        )
        start = check_int(sd["start"], f"{name} state 'start'", minimum=0)
        if seeded:
            epoch = check_int(sd["epoch"], f"{name} state 'epoch'", minimum=0)
            if rng is not None:
                rng.set_epoch(epoch)
            else:  # no EpochRng: the sampler keeps its own ``epoch`` (DistributedSampler)
                cast(_OwnEpoch, self).set_epoch(epoch)
        if has_gen and "bit_generator" in sd:
            assert rng is not None and isinstance(rng.generator, np.random.Generator)
            try:
                rng.generator.bit_generator.state = sd["bit_generator"]
            except (TypeError, ValueError, KeyError) as exc:
                raise ValueError(f"{name} state 'bit_generator' is not a valid generator state: {exc}") from None
        self._start = start
