"""torch's random draws at each epoch start, and exact resume with torch's own samplers.

torch's ``DataLoader`` draws, at every ``iter(loader)``, one int64 from its ``generator`` (or,
with ``generator=None``, from torch's default generator) as the epoch's base seed; a
``RandomSampler(generator=None)`` then draws its own seed from the default generator when
iterated and shuffles with ``torch.randperm`` on a ``torch.Generator`` seeded with it.
:class:`TorchDraws` makes the same draws in the same order at each epoch start, so for one
``torch.manual_seed`` (or one ``torch.Generator`` state) the loader's sample order is torch's.

The loader's own ``RandomSampler`` (``shuffle=True``) gets, with ``generator=None``, a
generator of the loader's (``own_generator``), seeded at each epoch start with the int torch's
sampler would have drawn: the same permutation, and a seed the resume state can hold.

Resume (:class:`TorchSamplerState`, given to ``dataloader._engine.resume.Resumer`` in place of a
(batch) sampler without ``state_dict``): its ``state_dict()``, taken at each epoch start, holds
the state of every ``torch.Generator`` the epoch draws from (the loader's and its samplers'),
the ``epoch`` of torch's ``DistributedSampler`` s, the ``state_dict()`` of samplers of ours
inside torch's ``BatchSampler``, and the epoch's two draws (``"draws"``, with
``generator=None``).  Loading restores them, so the resumed epoch repeats the saved one's order
and its first ``yielded`` batches are drawn and dropped.  A torch sampler that draws from
torch's global generator (``RandomSampler(generator=None)`` passed by the user, ...) cannot be
resumed: ``state_dict()`` raises ``ValueError`` naming it.

Thread-safety: called by the loader under its lock (``__iter__``, ``state_dict``,
``load_state_dict``).
"""

from __future__ import annotations

import base64
from typing import Any

import torch
import torch.utils.data as tud

from dataloader._sampling.state import check_state

__all__ = ["TorchDraws", "TorchSamplerState", "draw_seed"]

_DRAWING = (tud.RandomSampler, tud.SubsetRandomSampler, tud.WeightedRandomSampler)


def draw_seed(generator: Any) -> int:
    """One int64 from ``generator`` (torch's default one when None), as torch draws a seed."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


class TorchDraws:
    """The per-epoch draws of a loader with torch's randomness.

    Args:
        generator: the loader's ``torch.Generator``, or None for torch's default generator.
        own_generator: the generator of the loader's own ``RandomSampler`` when the loader has
            no generator (seeded each epoch from the default one), else None.
    """

    def __init__(self, generator: Any, own_generator: Any) -> None:
        self.generator = generator
        self.own_generator = own_generator
        self.pending: dict[str, Any] | None = None  # loaded draws for the next epoch
        self.current: dict[str, Any] | None = None  # the resume state of the epoch started last

    def epoch_start(self) -> int:
        """Draw the epoch's base seed (and seed the own sampler), as torch does; returns the seed.

        After a load with ``generator=None``, the saved epoch's draws are used instead.
        """
        loaded, self.pending = self.pending, None
        if loaded is not None and self.generator is None:
            seed, sampler_seed = loaded["base_seed"], loaded["sampler_seed"]
        else:
            seed = draw_seed(self.generator)
            sampler_seed = draw_seed(None) if self.own_generator is not None else None
        if self.own_generator is not None and sampler_seed is not None:
            self.own_generator.manual_seed(sampler_seed)
        if self.current is not None:
            self.current["draws"] = {"base_seed": seed, "sampler_seed": sampler_seed}
        return seed


class TorchSamplerState:
    """``state_dict`` / ``load_state_dict`` for a loader's torch (batch) sampler (see above).

    Args:
        root: the (batch) sampler the loader iterates.
        draws: the loader's :class:`TorchDraws`, or None (``seed=`` / NumPy generator / Feistel).
    """

    def __init__(self, root: Any, draws: TorchDraws | None) -> None:
        self.root = root
        self.draws = draws

    def _parts(self) -> tuple[list[Any], list[Any], list[Any]]:
        """The generators, torch ``DistributedSampler`` s and samplers of ours the epoch uses."""
        gens: list[Any] = []
        dists: list[Any] = []
        ours: list[Any] = []
        if self.draws is not None and self.draws.generator is not None:
            gens.append(self.draws.generator)
        own = self.draws.own_generator if self.draws is not None else None
        obj, seen = self.root, 0
        while obj is not None and seen < 8:
            seen += 1
            if isinstance(obj, tud.DistributedSampler):
                dists.append(obj)
            elif hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict") and obj is not self.root:
                ours.append(obj)
                break
            gen = getattr(obj, "generator", None)
            if isinstance(gen, torch.Generator):
                if gen is not own and all(gen is not g for g in gens):
                    gens.append(gen)
            elif isinstance(obj, _DRAWING):
                raise ValueError(
                    f"{type(obj).__name__}(generator=None) draws from torch's global generator: its "
                    "order cannot be saved or resumed; give it generator=torch.Generator()"
                )
            obj = getattr(obj, "sampler", None) if isinstance(obj, tud.BatchSampler) or obj is self.root else None
        return gens, dists, ours

    def state_dict(self) -> dict[str, Any]:
        """The state the next epoch starts from (module docstring).

        Raises:
            ValueError: a sampler draws from torch's global generator (naming it).
        """
        if self.draws is not None:
            self.draws.current = None
        gens, dists, ours = self._parts()
        sd: dict[str, Any] = {
            "torch_generators": [base64.b64encode(g.get_state().numpy().tobytes()).decode("ascii") for g in gens],
            "distributed_epochs": [int(d.epoch) for d in dists],
            "samplers": [s.state_dict() for s in ours],
            "draws": None,
        }
        if self.draws is not None:
            self.draws.current = sd
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved: the next epoch repeats the saved one.

        Raises:
            TypeError, ValueError: a malformed state, or one of another loader (naming the key).
        """
        if isinstance(state_dict, dict) and "torch_generators" not in state_dict and "start" in state_dict:
            raise ValueError(
                "this sampler state was saved by dataloader.DataLoader (the NumPy face), not by "
                "dataloader.torch.DataLoader: a state loads into a loader of the face that saved it"
            )
        sd = check_state(state_dict, "torch sampler", ("torch_generators", "distributed_epochs", "samplers", "draws"))
        gens, dists, ours = self._parts()
        for key, have in (("torch_generators", gens), ("distributed_epochs", dists), ("samplers", ours)):
            if not isinstance(sd[key], list) or len(sd[key]) != len(have):
                raise ValueError(
                    f"torch sampler state {key!r}={sd[key]!r} does not match this loader's samplers "
                    f"({len(have)} expected): resume with the loader's arguments of the saved run"
                )
        states = []
        for i, text in enumerate(sd["torch_generators"]):
            try:
                states.append(torch.frombuffer(bytearray(base64.b64decode(text, validate=True)), dtype=torch.uint8))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"torch sampler state 'torch_generators'[{i}] is not a generator state: {exc}") from None
        for g, state in zip(gens, states):
            g.set_state(state)
        for d, epoch in zip(dists, sd["distributed_epochs"]):
            d.set_epoch(epoch)
        for s, state in zip(ours, sd["samplers"]):
            s.load_state_dict(state)
        if self.draws is not None:
            self.draws.pending = _check_draws(sd["draws"])
            self.draws.current = None


def _check_draws(draws: object) -> dict[str, Any] | None:
    if draws is None:
        return None
    sd = check_state(draws, "torch sampler 'draws'", ("base_seed", "sampler_seed"))
    for key in ("base_seed", "sampler_seed"):
        value = sd[key]
        if value is not None and (type(value) is not int or not -(2**63) <= value < 2**63):
            raise ValueError(f"torch sampler state 'draws' {key!r}={value!r} is not an int64")
    if sd["base_seed"] is None:
        raise ValueError("torch sampler state 'draws' 'base_seed' is None")
    return sd
