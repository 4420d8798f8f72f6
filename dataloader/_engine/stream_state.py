"""Resumable iterable epochs: per-worker ``state_dict`` of an ``IterableDataset``.

With ``num_workers > 0`` each worker iterates its own copy of the dataset, ahead of the
consumer, so the dataset's state at the consumer's position exists only per worker and
per batch.  ``StatefulStreamItems`` (used when the dataset has both ``state_dict`` and
``load_state_dict``) records it:

- **what and when**: right after a worker builds a batch (or a failed batch) of its
  stream, on that worker's thread, it calls its copy's ``state_dict()`` and attaches the
  result to that batch (one call per batch; its cost is the dataset's);
- the consumer, when ``next()`` returns (or raises for) a batch from worker ``w``, keeps
  the state attached to it as worker ``w``'s state; prefetched batches' states are not
  kept, so they are built again after resume;
- ``state()`` is ``{"workers": [state of worker 0, ...] (None: no batch of that worker
  returned yet), "last": the worker of the last batch returned (-1: none), "live": the
  workers whose end was not reached}``: the round-robin position, so the next batch comes
  from the same worker as in the uninterrupted run.

Resuming (the same ``num_workers``): each worker copies the dataset, runs
``worker_init_fn``, then calls ``load_state_dict(its saved state)`` (if it has one) before
``iter()``; the rotation continues after ``last`` over ``live``.
"""

from __future__ import annotations

import collections
from typing import Any

from dataloader._engine.build import END, StreamBatcher
from dataloader._engine.items import StreamItems
from dataloader._engine.pool import WorkerSetup
from dataloader._engine.stats import EpochStats

__all__ = ["StatefulStreamItems"]


class _StateError:
    """A worker's ``state_dict()`` raised: ``DataLoader.state_dict()`` raises it then."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


class StatefulStreamItems(StreamItems):
    """``StreamItems`` that keep each worker's dataset state at the consumer's position.

    Args:
        resume: a ``state()`` saved by an earlier run with as many workers, or None.
    """

    def __init__(
        self, dataset: Any, batcher: StreamBatcher, setup: WorkerSetup, num_workers: int,
        resume: dict[str, Any] | None, stats: EpochStats,
    ) -> None:
        super().__init__(dataset, batcher, setup, num_workers, stats)
        self._copies: list[Any] = [None] * num_workers  # worker w's copy, on w's thread only
        self._cells: list[collections.deque[list[Any]]] = [collections.deque() for _ in range(num_workers)]
        self._loaded: list[Any] | None = None
        self._saved: list[Any] = [None] * num_workers  # consumer only
        self._last_taken = -1
        if resume is not None:
            self._loaded = list(resume["workers"])
            self._saved = list(resume["workers"])
            self._live = list(resume["live"])
            self._last = self._last_taken = resume["last"]

    def _prepare(self, worker_id: int, mine: Any) -> Any:
        self._copies[worker_id] = mine
        loaded = self._loaded
        if loaded is not None and loaded[worker_id] is not None:
            mine.load_state_dict(loaded[worker_id])
        return mine

    def next_item(self) -> tuple[Any, int]:
        _, worker = super().next_item()
        cell: list[Any] = [None]  # the worker stores its copy's state here after the batch
        self._cells[worker].append(cell)
        return cell, worker

    def build(self, worker_id: int, item: Any) -> Any:
        out = super().build(worker_id, item)
        mine = self._copies[worker_id]
        if out is not END and mine is not None:
            try:
                item[0] = mine.state_dict()
            except Exception as exc:  # noqa: BLE001 - raised by DataLoader.state_dict()
                item[0] = _StateError(exc)
        return out

    def taken(self, owner: int, result: Any) -> bool:
        cell = self._cells[owner].popleft()  # one owner's items are taken in publication order
        keep = super().taken(owner, result)
        if keep:
            self._saved[owner] = cell[0]
            self._last_taken = owner
        return keep

    def stop_worker(self, worker_id: int) -> None:
        super().stop_worker(worker_id)
        self._copies[worker_id] = None

    def state(self) -> dict[str, Any]:
        """The consumer's position (module docstring).

        Raises:
            RuntimeError: a worker's ``state_dict()`` raised (chained).
        """
        saved = list(self._saved)
        for s in saved:
            if isinstance(s, _StateError):
                raise RuntimeError("the dataset's state_dict() raised on a worker thread") from s.exc
        return {"workers": saved, "last": self._last_taken, "live": list(self._live)}
