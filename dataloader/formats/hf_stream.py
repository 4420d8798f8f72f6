"""``HFIterableDataset``: a Hugging Face ``datasets.IterableDataset`` on the loader's iterable
path, split across ranks and worker threads the way ``datasets`` splits it, resumable through
its own ``state_dict()``.

Splitting, as HF does it:

- **worker threads** (``num_workers > 1``): by shards, as HF's torch-worker path does: worker
  ``w`` of ``W`` iterates shards ``w, w + W, w + 2W, ...`` (``dataset.shard(W, w,
  contiguous=False)``); with fewer shards than workers, workers ``>= num_shards`` yield nothing
  (HF warns the same; ``dataset.reshard()`` or more files give more shards).  Under
  ``dataloader.torch``, ``torch.utils.data.get_worker_info()`` answers in worker threads and
  HF's ``__iter__`` would split again (and, in datasets 5.2, resume its worker path at a
  wrong offset): the worker info is hidden from it while its iteration starts (the first
  example), so both faces split here, the same way;
- **ranks** (only when ``rank`` and ``world_size`` are given; otherwise the dataset is used as
  given, as torch's ``DataLoader`` uses it, e.g. after your own ``split_dataset_by_node``):
  ``datasets.distributed.split_dataset_by_node(dataset, rank, world_size)``: whole shards per
  rank when the shard count divides by ``world_size``, else every ``world_size``-th example
  (each rank then reads every shard).  HF applies this split when a stream starts, to the
  shards that stream holds: with one stream (``num_workers <= 1``) a rank gets exactly
  ``split_dataset_by_node``'s examples; with ``W`` workers each worker's shards are split
  between the ranks (so by examples where their count does not divide), and every example is
  still read by exactly one (rank, worker).

Each worker thread iterates its own ``copy.copy`` of the dataset (HF keeps its iteration state
on the object), so no two threads share HF's state.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from dataloader import _context
from dataloader._context import get_worker_info, set_worker
from dataloader._datasets.base import IterableDataset

__all__ = ["HFIterableDataset"]

# The loader's epoch of the iteration a state was taken in, which the previous release added to
# HF's state dict (its loader saved the ended epoch's last position at the next epoch's start;
# the loader now saves no dataset state there): such a state still loads, resumed only in that
# epoch (another epoch starts at its beginning); states are no longer written with it.
_OLD_EPOCH_KEY = "dataloader_epoch"


class HFIterableDataset(IterableDataset):
    """A ``datasets.IterableDataset`` split across ranks and workers as HF splits it (module
    docstring); its examples unchanged (dicts, formatted by the dataset's format).

    Args:
        dataset: a ``datasets.IterableDataset``; kept, not copied (``dataset.set_epoch(e)``
            before each epoch reshuffles a ``shuffle``d one, as with torch).
        rank, world_size: this process's rank in ``[0, world_size)`` and the number of ranks;
            both None (default): no split by rank.

    Resume: ``state_dict()`` is the ``state_dict()`` of the copy being iterated (of the whole
    dataset before iteration), ``load_state_dict(state)`` hands ``state`` to the next
    iteration's copy: the loader's ``state_dict()`` keeps one per worker (docs/design.md), so a
    loader resumed with the same ``num_workers`` continues where HF's state says (HF's own
    caveats hold: a shuffle buffer's contents are refilled, not restored).

    Raises:
        TypeError: ``dataset`` is not a ``datasets.IterableDataset``; ``rank`` / ``world_size``
            not ints or only one of them given.
        ValueError: ``world_size < 1`` or ``rank`` outside ``[0, world_size)``.

    Thread-safety: each worker iterates its own copy; one copy is not for two threads at once.
    """

    def __init__(self, dataset: Any, *, rank: int | None = None, world_size: int | None = None) -> None:
        if type(dataset).__module__.partition(".")[0] != "datasets" or type(dataset).__name__ != "IterableDataset":
            raise TypeError(f"HFIterableDataset takes a datasets.IterableDataset, got {type(dataset).__name__}")
        if (rank is None) != (world_size is None):
            raise TypeError(f"give both rank and world_size or neither, got rank={rank!r}, world_size={world_size!r}")
        if rank is not None and world_size is not None:
            for name, value in (("rank", rank), ("world_size", world_size)):
                if isinstance(value, bool) or not isinstance(value, int):
                    raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
            if world_size < 1 or not 0 <= rank < world_size:
                raise ValueError(f"rank must be in [0, world_size) and world_size >= 1, got rank={rank}, world_size={world_size}")
            from datasets.distributed import split_dataset_by_node  # lazy: datasets is imported already

            dataset = split_dataset_by_node(dataset, rank=rank, world_size=world_size)
        self.dataset = dataset
        self.rank = rank
        self.world_size = world_size
        self._stream: Any = None  # the copy this object iterates (set by __iter__)
        self._start: Any = None  # a state for the next __iter__ (load_state_dict)

    def __repr__(self) -> str:
        split = "" if self.rank is None else f", rank={self.rank}, world_size={self.world_size}"
        return f"HFIterableDataset(num_shards={self.dataset.num_shards}{split})"

    def __iter__(self) -> Iterator[Any]:
        part = self._worker_part()
        if part is None:
            self._stream, self._start = None, None
            return iter(())
        return self._started(part)

    def _started(self, part: Any) -> Iterator[Any]:
        """``part``'s examples, from the loaded state (one of the previous release's, with the
        loader's epoch in it, only in that epoch: read when the first example is asked for, as
        the loader sets the epoch while it builds a batch)."""
        start, self._start = self._start, None
        if start is not None and _OLD_EPOCH_KEY in start:  # not popped: worker copies share it
            key = _context.thread_state().epoch_key
            same = key is None or key[1] == start[_OLD_EPOCH_KEY]
            start = {k: v for k, v in start.items() if k != _OLD_EPOCH_KEY} if same else None
        if start is not None:
            part.load_state_dict(start)
        self._stream = part
        yield from _examples(part)

    def _worker_part(self) -> Any:
        """This worker's copy of the dataset: its shards (None: no shard for it) or the whole."""
        info = get_worker_info()
        mine = copy.copy(self.dataset)
        # HF's IterableDataset copies share one __dict__ (its __getstate__ returns it and
        # __setstate__ assigns it): give the copy its own, or the state loaded into it below
        # (``_starting_state_dict``) would stay on the user's object for every later epoch.
        mine.__dict__ = dict(mine.__dict__)
        if info is None or info.num_workers <= 1:
            return mine
        if info.id >= mine.num_shards:
            return None
        return mine.shard(num_shards=info.num_workers, index=info.id, contiguous=False)

    def state_dict(self) -> dict[str, Any]:
        """HF's ``state_dict()`` of the copy being iterated (or last iterated: after its end,
        the ended position; a loader saves no dataset state at an epoch's start); a state
        loaded and not yet used; before either, the dataset's."""
        if self._start is not None:
            return copy.deepcopy(self._start)
        if self._stream is not None:
            state: dict[str, Any] = self._stream.state_dict()
            return state
        initial: dict[str, Any] = self.dataset.state_dict()
        return initial

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Start the next ``iter()`` from HF's ``state`` (``state_dict()``'s result; a state of
        the previous release, which holds the loader's epoch it was taken in, is resumed only
        in that epoch of a loader: another epoch starts at its beginning).

        Raises:
            TypeError: ``state`` is not a dict.
        """
        if not isinstance(state, dict):
            raise TypeError(f"state must be the dict state_dict() returned, got {type(state).__name__}")
        self._start = state
        self._stream = None


def _examples(part: Any) -> Iterator[Any]:
    """``part``'s examples, its iteration started with this thread's worker info hidden: HF's
    ``__iter__`` reads ``torch.utils.data.get_worker_info()`` once, when it starts."""
    examples = iter(part)
    saved = get_worker_info()
    set_worker(None)
    try:
        first = next(examples, _END)
    finally:
        set_worker(saved)
    if first is _END:
        return
    yield first
    yield from examples


_END = object()
