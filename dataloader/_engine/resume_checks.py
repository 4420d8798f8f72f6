"""What a loader's state records of the loader that saved it, and what loading checks.

A position (``"yielded"`` batches of epoch ``"epoch"``) means rows only for a loader that
cuts the epoch the same way.  A state (``STATE_VERSION`` 2) therefore records, under
``"loader"``, a JSON-serialisable dict (``Layout.describe``):

- ``"dataset_len"``: ``len(dataset)`` of a map-style dataset (None: an ``IterableDataset``,
  whose ``len`` is advisory, or no ``__len__``);
- ``"batch_size"``: items per batch (the loader's ``batch_size``, or the ``batch_size`` of a
  ``batch_sampler`` given to it; None: ``batch_size=None``, or a batch sampler without one);
- ``"drop_last"``: the same, as a bool (None: a batch sampler without one);
- ``"sampler"``: the index sampler's class name (``__qualname__``: ``"RandomSampler"``,
  ``"DistributedSampler"``, a user class's name; None: an ``IterableDataset``, or a batch
  sampler without a ``sampler`` attribute);
- ``"batch_sampler"``: the batch sampler's class name (None: ``batch_size=None``, or an
  ``IterableDataset``);
- ``"world_size"``, ``"rank"``: the ranks and this rank of a distributed index sampler
  (``DistributedSampler``'s ``num_replicas`` / ``rank``, ``ShardSampler``'s ``num_shards`` /
  ``shard_id``, or any sampler with int ``num_replicas`` and ``rank`` attributes, as
  torch's); None for any other sampler.

``Layout.check`` (``DataLoader.load_state_dict``, before anything is applied) compares the
saved record with this loader's.  A version-1 state (saved before these were recorded) has
no record and is not checked; a record is written whole, so one missing a key is refused
(``ValueError`` naming it), as is a version-2 state without the record (``ValueError``) or
with None for it (``TypeError``; ``Resumer.load``).  ``dataset_len`` is not compared when it is None on either side
(a length not known).  Otherwise (None being a value: no batching, no distributed
sampler):

- ``dataset_len``, ``batch_size``, ``sampler``, ``batch_sampler`` or ``world_size`` differ:
  ``ValueError`` naming both values (the saved position would mean other rows here); a
  ``world_size`` that differs between two built-in distributed samplers never gets here: the
  state is resumed elastically first (``dataloader._engine.elastic``: the remainder of the
  epoch, as a state of this loader), or refused there saying why;
- ``drop_last`` differs: accepted; only the epoch's last, short batch depends on it, and it
  follows this loader's ``drop_last``;
- ``rank`` differs: accepted (same ``world_size``): the position counts batches of this
  rank's own share, and ranks that train in lockstep are at the same count, so a state that
  rank 0 saved resumes every rank exactly (the usual "save on rank 0" checkpoint);
- whatever the version: ``yielded`` more than the batches of this loader's epoch (when its
  (batch) sampler has a length; map-style only) raises ``ValueError``; ``yielded`` equal to
  it is an epoch fully yielded, whose ``StopIteration`` was not seen yet.
"""

from __future__ import annotations

from typing import Any

from dataloader._engine.errors import reported_length
from dataloader._sampling.state import check_state

__all__ = ["LAYOUT_KEYS", "Layout"]

LAYOUT_KEYS = ("dataset_len", "batch_size", "drop_last", "sampler", "batch_sampler", "world_size", "rank")
_TYPES: dict[str, type] = {
    "dataset_len": int, "batch_size": int, "drop_last": bool, "sampler": str, "batch_sampler": str,
    "world_size": int, "rank": int,
}
_REFUSED = {
    "dataset_len": "len(dataset)",
    "batch_size": "batch_size",
    "sampler": "sampler",
    "batch_sampler": "batch_sampler",
    "world_size": "world_size",
}


def _kind(obj: object) -> str | None:
    return None if obj is None else type(obj).__qualname__


def _int_attr(obj: object, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if type(value) is int else None


def _ranks(sampler: object) -> tuple[int | None, int | None]:
    """``(world_size, rank)`` of a distributed sampler, else ``(None, None)``."""
    for size, rank in (("num_replicas", "rank"), ("num_shards", "shard_id")):
        world, me = _int_attr(sampler, size), _int_attr(sampler, rank)
        if world is not None and me is not None:
            return world, me
    return None, None


class Layout:
    """How a loader cuts its epochs into batches (the module docstring's ``"loader"``).

    Args:
        dataset: the loader's dataset.
        iterable: it is an ``IterableDataset``.
        sampler: the loader's index sampler (None for an ``IterableDataset``).
        batch_sampler: the loader's batch sampler (None: ``batch_size=None``, or iterable).
        batch_size, drop_last: the loader's arguments.

    Thread-safety: reads attributes only; any thread.
    """

    def __init__(
        self, dataset: Any, iterable: bool, sampler: Any, batch_sampler: Any, batch_size: int | None, drop_last: bool
    ) -> None:
        self._dataset = dataset
        self._iterable = iterable
        self._batch_sampler = batch_sampler
        self._work = batch_sampler if batch_sampler is not None else sampler  # yields the epoch's work items
        self._sampler = sampler if batch_sampler is None else getattr(batch_sampler, "sampler", None)
        self._batch_size = batch_size
        self._drop_last: bool | None = drop_last
        if batch_size is None and batch_sampler is not None:  # a batch_sampler given to the loader
            self._batch_size = _int_attr(batch_sampler, "batch_size")
            flag = getattr(batch_sampler, "drop_last", None)
            self._drop_last = flag if type(flag) is bool else None

    def describe(self) -> dict[str, Any]:
        """This loader's record (read now: ``len(dataset)`` as it is at the call)."""
        world, rank = _ranks(self._sampler)
        return {
            "dataset_len": None if self._iterable else reported_length(self._dataset),
            "batch_size": self._batch_size,
            "drop_last": self._drop_last,
            "sampler": _kind(self._sampler),
            "batch_sampler": _kind(self._batch_sampler),
            "world_size": world,
            "rank": rank,
        }

    def batches(self) -> int | None:
        """Batches in this loader's epoch (map-style, with a length), else None."""
        return None if self._iterable or self._work is None else reported_length(self._work)

    def check(self, state: dict[str, Any], yielded: int) -> None:
        """Refuse a state whose position this loader cannot have (module docstring).

        ``state``: the loader's state (its ``"version"`` checked); a version-1 state has no
        ``"loader"`` record, every later one has it whole.

        Raises:
            TypeError: the record is not a dict, or a value has the wrong type (naming it).
            ValueError: a version-2 state without its record; a missing or unknown key; a
                recorded value that differs from this loader's (naming both); ``yielded`` past
                the end of this loader's epoch.
        """
        saved = state.get("loader")
        if state["version"] >= 2 and not isinstance(saved, dict):
            # Without it nothing would be checked (a batch_size=8 state resumed a
            # batch_size=16 loader 24 rows late).
            if "loader" not in state:
                raise ValueError(
                    f"DataLoader state (version {state['version']}) has no 'loader' record (how the "
                    "saving loader cut its epochs, which loading checks)"
                )
            raise TypeError(f"DataLoader state 'loader' must be a dict, got {type(saved).__name__}")
        if saved is not None:
            record = check_state(saved, "DataLoader 'loader'", LAYOUT_KEYS)  # written whole
            mine = self.describe()
            for key, value in record.items():
                if value is not None and type(value) is not _TYPES[key]:
                    raise TypeError(
                        f"DataLoader state 'loader' '{key}' must be {_TYPES[key].__name__} or None, "
                        f"got {type(value).__name__}"
                    )
                unknown = key == "dataset_len" and (value is None or mine[key] is None)
                if key in _REFUSED and not unknown and value != mine[key]:
                    name = _REFUSED[key]
                    raise ValueError(
                        f"DataLoader state was saved with {name}={value!r}; this loader has "
                        f"{name}={mine[key]!r}: the saved position ({yielded} batch{'es' if yielded != 1 else ''} "
                        f"into its epoch) would mean other rows here"
                    )
        batches = self.batches()
        if batches is not None and yielded > batches:
            raise ValueError(
                f"DataLoader state 'yielded'={yielded} is more than the {batches} batches of this "
                f"loader's epoch: it was saved by a loader with another dataset, sampler or batch_size"
            )
