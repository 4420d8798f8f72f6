"""Elastic resume: a loader on rank ``r`` of ``M`` continues an epoch saved by ``N`` ranks.

What a state records (``"elastic"``, beside ``"loader"``; None when the loader's sampler is not
one that can be resumed elastically): for a loader whose index sampler is a
``DistributedSampler`` or a ``ShardSampler`` (not a subclass), batched by the loader (or by a
``BatchSampler`` given to it; torch's ``BatchSampler`` in ``dataloader.torch``, whose sampler
state keeps our sampler's under ``"samplers"``) or not batched at all:

- ``"sampler"``: ``"DistributedSampler"`` or ``"ShardSampler"``;
- ``"world_size"``, ``"rank"``: the sampler's number of ranks and its rank;
- ``"n"``, ``"seed"``, ``"shuffle"``, ``"drop_last"``: the sampler's dataset length, seed,
  ``shuffle`` and ``drop_last`` (False for ``ShardSampler``), which the new samplers must share;
- ``"samples"``: this rank's share of the epoch, in samples;
- ``"consumed"``: the samples of that share the rank consumed: ``min(yielded * batch_size,
  samples)``, or all of them once the rank yielded its last batch (a tail that the batch
  sampler's ``drop_last`` dropped counts as consumed: an uninterrupted run would never show it);
- ``"position"``: the samples of the epoch's global order consumed by all ranks together if
  every rank is at this rank's ``yielded`` (the synchronous case): for ``DistributedSampler``
  ``consumed * world_size``, a prefix of its padded global order.

The epoch being resumed is the sampler state's epoch; an epoch that was itself resumed
elastically carries its earlier cuts in the sampler state (``dataloader._sampling.elastic``).

``load_state_dict(state)`` with a state whose ``"loader"`` world size differs from this
loader's, or with a list of states, resolves them here into one state of this loader:

- one state (``dict``): every old rank stopped after the same number of batches (synchronous
  training), so each old rank's consumed count follows from ``yielded``, the old
  ``batch_size`` and ``drop_last`` and its share;
- a list of the ``N`` old ranks' states, one per rank (any order): each rank's count from its
  own ``yielded`` (the states must agree on the old ``batch_size`` and ``drop_last``).  The
  counts always come from ``"yielded"``, not from the record, so an edited ``yielded`` is a
  seek there too.  With
  ``N`` equal to this world size it is today's resume of this rank's own state; otherwise
  the loader's own seed (worker seeds, ``item_rng``; not the sampler's) is taken from the old
  rank of number ``rank % N``;
- otherwise the old ranks' cut (``world_size``, the counts) is added to the epoch's cuts
  (none when nothing was consumed), and this rank starts that epoch's remainder at its first
  sample (``"yielded"`` 0, a length of its share): the remainder is every sample of the
  epoch's order no old rank consumed, in order, split among the new ranks by the sampler's
  rule (``DistributedSampler``: padding from the remainder's head, or its tail cut with
  ``drop_last``; ``ShardSampler``: contiguous parts).  The seed and the epoch counter are
  the saved ones, so the following epochs are those of a fresh run with this world size.
  ``batch_size`` may differ from the old one (the remainder counts samples).

Refused at load (``ValueError`` saying why): a state without an ``"elastic"`` record (a sampler
of another kind, a subclass, a user batch sampler, an ``IterableDataset``), this loader's
sampler not one of the two, ``in_order=False``, a state of another sampler kind, ``n``,
``seed``, ``shuffle`` or ``drop_last``, and a list that is inconsistent (states of different
versions, loader epochs, sampler epochs, sampler seeds, world sizes or cuts, a rank missing
or twice).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

from dataloader._engine.failures import spread_counts
from dataloader._sampling.batch import BatchSampler
from dataloader._sampling.distributed import DistributedSampler
from dataloader._sampling.elastic import ElasticMixin, check_levels
from dataloader._sampling.remainder import share
from dataloader._sampling.shard import ShardSampler
from dataloader._sampling.state import check_state
from dataloader._validate import check_int

__all__ = ["ElasticSampler", "RECORD_KEYS"]

RECORD_KEYS = ("sampler", "world_size", "rank", "n", "seed", "shuffle", "drop_last", "samples", "consumed", "position")
_STATE_KEYS = ("version", "seed", "epoch", "yielded", "sampler", "dataset")
_SHARED = ("sampler", "world_size", "n", "seed", "shuffle", "drop_last")  # equal on every rank
_MINE = ("sampler", "n", "seed", "shuffle", "drop_last")  # equal to this loader's


def _inner_state(sampler_state: Any) -> Any:
    """The index sampler's part of a loader's ``"sampler"`` state (a ``BatchSampler``'s, the
    sampler's own with ``batch_size=None``, or ``dataloader.torch``'s ``"samplers"`` list of
    the samplers of ours inside torch's ``BatchSampler``)."""
    if isinstance(sampler_state, dict) and isinstance(sampler_state.get("sampler"), dict):
        return sampler_state["sampler"]
    if isinstance(sampler_state, dict) and isinstance(sampler_state.get("samplers"), list):
        ours = sampler_state["samplers"]
        return ours[0] if len(ours) == 1 else None
    return sampler_state


def _torch_batches(root: object) -> bool:
    """``root`` is torch's ``BatchSampler`` (``dataloader.torch``; torch is not imported here)."""
    kind = type(root)
    return kind.__name__ == "BatchSampler" and kind.__module__.startswith("torch.utils.data")


def _builtin(sampler: object) -> bool:
    """``sampler`` is a ``DistributedSampler`` or ``ShardSampler``, not a subclass (whose order
    may be its own)."""
    return type(sampler) in (DistributedSampler, ShardSampler)


def consumed_at(yielded: int, samples: int, batch_size: int, drop_last: bool) -> int:
    """Samples of a share of ``samples`` consumed after ``yielded`` batches (module docstring)."""
    batches = samples // batch_size if drop_last else -(-samples // batch_size)
    return samples if yielded >= batches else min(yielded * batch_size, samples)


class ElasticSampler:
    """A loader's elastic part, or the reason it has none (``of``).

    Args:
        root: the loader's work-item source (``BatchSampler`` or the index sampler).
        sampler: its ``DistributedSampler`` / ``ShardSampler``, or None.
        batch_size, drop_last: how ``root`` batches it (1 and False: not batched).
        refusal: why the loader cannot resume elastically (None: it can).

    Thread-safety: called under the loader's lock.
    """

    def __init__(self, root: Any, sampler: ElasticMixin | None, batch_size: int, drop_last: bool,
                 refusal: str | None) -> None:
        self.root = root
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.refusal = refusal

    @classmethod
    def of(cls, root: Any, in_order: bool) -> ElasticSampler:
        """The elastic part of a loader iterating ``root``."""
        if type(root) is BatchSampler or _torch_batches(root):
            sampler, size, drop = root.sampler, root.batch_size, root.drop_last
        else:
            sampler, size, drop = root, 1, False
        if not _builtin(sampler):
            kind = type(sampler)
            what = "no index sampler (an IterableDataset)" if root is None else f"{kind.__module__}.{kind.__qualname__}"
            return cls(root, None, 1, False, f"its sampler is {what}, not a DistributedSampler or ShardSampler "
                       "(with the loader's own or a BatchSampler)")
        refusal = None if in_order else (
            "in_order=False: its batches come in completion order, so the resumed epoch's position "
            "could not be saved again")
        return cls(root, cast(ElasticMixin, sampler), size, drop, refusal)

    def record(self, sampler_state: Any, yielded: int) -> dict[str, Any] | None:
        """The ``"elastic"`` record of a state at ``yielded`` batches of the epoch whose start
        state is ``sampler_state`` (module docstring), or None."""
        sampler = self.sampler
        if sampler is None:
            return None
        p = sampler.elastic_params()
        inner = _inner_state(sampler_state)
        s = p["n"]  # the epoch's sequence: the sampler's, or what earlier cuts left of it
        if isinstance(inner, dict) and inner.get("elastic"):
            levels = check_levels(inner["elastic"], type(sampler).__name__)
            s = sampler.elastic_order(levels, inner.get("epoch", 0)).length
        world, rule = p["world_size"], sampler.elastic_rule
        mine = share(rule, s, world, p["rank"], p["drop_last"])
        return {"sampler": type(sampler).__name__, "world_size": world, "rank": p["rank"], "n": p["n"],
                "seed": p["seed"], "shuffle": p["shuffle"], "drop_last": p["drop_last"], "samples": mine,
                "consumed": consumed_at(yielded, mine, self.batch_size, self.drop_last),
                "position": self._position(rule, s, world, yielded, p["drop_last"])}

    def _position(self, rule: str, s: int, world: int, yielded: int, drop_last: bool) -> int:
        """Samples consumed by all ``world`` ranks at ``yielded`` batches each, in O(1): the
        ``"shard"`` shares are ``s // world`` or one more (``s % world`` of them), the
        ``"distributed"`` ones all equal."""
        size, drop = self.batch_size, self.drop_last
        if rule == "shard":
            q, m = divmod(s, world)
            return (world - m) * consumed_at(yielded, q, size, drop) + m * consumed_at(yielded, q + 1, size, drop)
        return world * consumed_at(yielded, share(rule, s, world, 0, drop_last), size, drop)

    # -- loading ---------------------------------------------------------------------------

    def resolve(self, state: object, mine: dict[str, Any]) -> object:
        """The state this loader loads for ``state``: one state, or a list of the old ranks'
        (module docstring); ``mine`` is this loader's ``"loader"`` record.

        Raises:
            TypeError: a list item that is not a dict, or a malformed record (naming it).
            ValueError: a state that cannot be resumed elastically here (saying why).
        """
        if isinstance(state, (list, tuple)):
            return self._from_list(list(state), mine)
        saved = state.get("loader") if isinstance(state, dict) else None
        old = saved.get("world_size") if isinstance(saved, dict) else None
        world = mine["world_size"]
        if type(old) is not int or world is None or old == world:
            return state  # today's resume (and its checks)
        assert isinstance(state, dict)
        why = self.refusal
        if why is None and state.get("elastic") is None:
            why = ("the state has no 'elastic' record: the saving loader's sampler was not a "
                   "DistributedSampler or ShardSampler (with a BatchSampler)")
        if why is not None:
            raise ValueError(
                f"DataLoader state was saved with world_size={old}; this loader has world_size={world}, "
                f"and it cannot be resumed elastically: {why}"
            )
        rec = _check_record(state["elastic"], "")
        if rec["world_size"] != old:
            raise ValueError(
                f"DataLoader state 'elastic' has world_size={rec['world_size']} but 'loader' has "
                f"world_size={old}: the state was edited; restore the saved one"
            )
        merged = self._merge(state, rec, [state.get("yielded")] * rec["world_size"], mine)
        counts = spread_counts([state], mine["rank"], mine["world_size"])  # one rank's: to new rank 0
        if counts is not None:
            merged["failures"] = counts
        return merged

    def _from_list(self, states: list[Any], mine: dict[str, Any]) -> dict[str, Any]:
        if not states:
            raise ValueError("load_state_dict got an empty list of states (give every old rank's state)")
        for i, sd in enumerate(states):
            if not isinstance(sd, dict):
                raise TypeError(f"load_state_dict: state [{i}] of the list must be a dict, got {type(sd).__name__}")
        if self.refusal is not None:
            raise ValueError(f"a list of per-rank states is resumed elastically, and this loader cannot be: {self.refusal}")
        records = []
        for i, sd in enumerate(states):
            if sd.get("elastic") is None:
                raise ValueError(
                    f"state [{i}] of the list has no 'elastic' record: its loader's sampler was not a "
                    "DistributedSampler or ShardSampler (with a BatchSampler)"
                )
            records.append(_check_record(sd["elastic"], f" [{i}]"))
        _check_consistent(states, records)
        by_rank = sorted(range(len(states)), key=lambda i: records[i]["rank"])
        states, records = [states[i] for i in by_rank], [records[i] for i in by_rank]
        if records[0]["world_size"] == mine["world_size"]:
            return states[mine["rank"]]  # the same world: this rank's own state, resumed as today
        # The loader's own seed (worker seeds, item_rng) is the old rank's of this rank number.
        first = states[mine["rank"] % len(states)]
        merged = self._merge(first, records[0], [sd["yielded"] for sd in states], mine)
        counts = spread_counts(states, mine["rank"], mine["world_size"])
        if counts is not None:
            merged["failures"] = counts
        return merged

    def _merge(self, first: dict[str, Any], rec: dict[str, Any], steps: list[Any],
               mine: dict[str, Any]) -> dict[str, Any]:
        """One state of this loader: the saved epoch's remainder after the old ranks' cut
        (old rank ``r`` at ``steps[r]`` batches, ``"yielded"``: an edited one counts, as for
        a seek); ``first`` gives the loader's seed, epoch and dataset state, ``rec`` the old
        sampler's record."""
        sampler = self.sampler
        assert sampler is not None
        check_state(first, "DataLoader", _STATE_KEYS, ("loader", "elastic", "failures"))
        p = {"sampler": type(sampler).__name__, **sampler.elastic_params()}
        for key in _MINE:
            if rec[key] != p[key]:
                raise ValueError(
                    f"DataLoader state was saved with a sampler of {key}={rec[key]!r}; this loader's has "
                    f"{key}={p[key]!r}: the remainder of the saved epoch would be other rows here"
                )
        inner = _inner_state(first["sampler"])
        if not isinstance(inner, dict) or "epoch" not in inner:
            raise ValueError("DataLoader state 'sampler' holds no sampler epoch: it cannot be resumed elastically")
        name = rec["sampler"]
        epoch = check_int(inner["epoch"], f"{name} state 'epoch'", minimum=0)
        levels = check_levels(inner.get("elastic", []), name)
        world = rec["world_size"]
        s = sampler.elastic_order(levels, epoch).length if levels else p["n"]  # the sequence cut
        saved = first["loader"] if isinstance(first.get("loader"), dict) else {}
        size, drop = saved.get("batch_size") or 1, bool(saved.get("drop_last"))  # the old batches
        counts = [_consumed(k, share(sampler.elastic_rule, s, world, r, p["drop_last"]), size, drop, r)
                  for r, k in enumerate(steps)]
        if any(counts):
            levels = [*levels, (world, list(counts))]
        if levels:
            sampler.elastic_order(levels, epoch)  # counts past a share fail here
        state = {**sampler.state_dict(), "start": 0, "epoch": epoch}
        state.pop("elastic", None)
        if levels:
            state["elastic"] = [{"world_size": w, "consumed": c} for w, c in levels]
        return {"version": first["version"], "seed": first["seed"], "epoch": first["epoch"], "yielded": 0,
                "sampler": self._wrapped(state, first["sampler"]), "dataset": first["dataset"], "loader": mine}

    def _wrapped(self, state: dict[str, Any], saved: Any) -> Any:
        """The loader's ``"sampler"`` state around the index sampler's ``state`` (the saved
        one's other parts kept: ``dataloader.torch``'s generators and draws)."""
        if self.root is self.sampler:
            return state
        if _torch_batches(self.root):
            return {**saved, "samplers": [state]}
        return {"sampler": state, "start": 0}


def _consumed(yielded: object, samples: int, batch_size: int, drop_last: bool, rank: int) -> int:
    """Samples old rank ``rank`` consumed after ``yielded`` batches of its share of ``samples``.

    Raises:
        TypeError, ValueError: ``yielded`` is not an int >= 0, or is more than the rank's
            batches (as a resume at the same world size refuses it: other rows were meant).
    """
    k = check_int(yielded, "DataLoader state 'yielded'", minimum=0)
    batches = samples // batch_size if drop_last else -(-samples // batch_size)
    if k > batches:
        raise ValueError(
            f"DataLoader state 'yielded'={k} of old rank {rank} is more than the {batches} batches of "
            f"its share of the epoch ({samples} samples, batch_size={batch_size}): it was saved by a "
            "loader with another dataset, sampler or batch_size"
        )
    return consumed_at(k, samples, batch_size, drop_last)


def _check_record(record: object, where: str) -> dict[str, Any]:
    """``record`` checked as an ``"elastic"`` record: its keys, their types, and a world size
    >= 1 with a rank in it (an edited one is refused, not resumed as another epoch)."""
    rec = check_state(record, f"DataLoader{where} 'elastic'", RECORD_KEYS)
    for key in RECORD_KEYS:
        kind = str if key == "sampler" else bool if key in ("shuffle", "drop_last") else int
        if type(rec[key]) is not kind:
            raise TypeError(f"DataLoader{where} state 'elastic' '{key}' must be {kind.__name__}, got {type(rec[key]).__name__}")
    world, rank = rec["world_size"], rec["rank"]
    if world < 1 or not 0 <= rank < world:
        raise ValueError(
            f"DataLoader{where} state 'elastic' has world_size={world}, rank={rank}: "
            "a world size >= 1 and a rank in [0, world_size) are needed"
        )
    return rec


def _check_consistent(states: list[dict[str, Any]], records: list[dict[str, Any]]) -> None:
    """The old ranks' states describe one epoch of one world (module docstring)."""
    first, rec = states[0], records[0]
    for i, (sd, r) in enumerate(zip(states, records)):
        inner, inner0 = _inner_state(sd.get("sampler")), _inner_state(first.get("sampler"))
        pairs = [(f"'{k}'", sd.get(k), first.get(k)) for k in ("version", "epoch")]
        pairs += [(f"'elastic' '{k}'", r[k], rec[k]) for k in _SHARED]
        pairs += [(f"sampler '{k}'", _get(inner, k), _get(inner0, k)) for k in ("epoch", "elastic")]
        pairs += [(f"'loader' '{k}'", _get(sd.get("loader"), k), _get(first.get("loader"), k))
                  for k in ("batch_size", "drop_last")]
        for what, value, value0 in pairs:
            if value != value0:
                raise ValueError(
                    f"the states do not describe one epoch of one world: state [{i}] has {what}={value!r}, "
                    f"state [0] has {value0!r}"
                )
    ranks = sorted(r["rank"] for r in records)
    world = rec["world_size"]
    if ranks != list(range(world)):
        missing = sorted(set(range(world)) - set(ranks))
        twice = sorted(r for r, k in Counter(ranks).items() if k > 1)
        raise ValueError(
            f"a list of states needs one state per old rank 0..{world - 1}: ranks {missing} missing, "
            f"{twice} given twice (give every old rank's state, or one state when all stopped at the same step)"
        )


def _get(state: Any, key: str) -> Any:
    return state.get(key) if isinstance(state, dict) else None
