"""Resumable iterable epochs: per-worker ``state_dict`` of an ``IterableDataset``.

With ``num_workers > 0`` each worker iterates its own copy of the dataset, ahead of the
consumer, so the dataset's state at the consumer's position exists only per worker and
per batch.  ``StatefulStreamItems`` (used when the dataset has both ``state_dict`` and
``load_state_dict``) records it:

- **what and when**: right after a worker builds a batch (or a failed batch) of its
  stream, on that worker's thread, it calls its copy's ``state_dict()`` and attaches a deep
  copy of the result to that batch (one call and one ``copy.deepcopy`` per batch; the cost
  is the dataset's): a dataset may return its live dict, which its iterator goes on
  mutating while the worker builds ahead, so the state must be a snapshot, as torch's
  worker processes take one by pickling it;
- the consumer, when ``next()`` returns (or raises for) a batch from worker ``w``, keeps
  the state attached to it as worker ``w``'s state; prefetched batches' states are not
  kept, so they are built again after resume;
- ``state()`` is ``{"workers": [state of worker 0, ...] (None: no batch of that worker
  returned yet), "last": the worker of the last batch returned (-1: none), "live": the
  workers whose end was not reached}``: the round-robin position, so the next batch comes
  from the same worker as in the uninterrupted run.

Resuming (the same ``num_workers``): each worker copies the dataset, runs
``worker_init_fn``, then calls ``load_state_dict(a deep copy of its saved state)`` (if it
has one) before ``iter()``; the rotation continues after ``last`` over ``live``.

``num_workers=0`` (``StreamSnapshots``): the consumer iterates the dataset itself; its
state is snapshotted (``state_dict()`` and a deep copy) after each batch ``next()`` builds,
so a Ctrl-C while a batch is being built (items already drawn from the stream) resumes at
that batch, not after the items it drew.  Before the epoch's first batch the state is None
(the epoch starts as ``iter(dataset)`` starts it: a stream's ``state_dict()`` there may be
where its last iteration ended, which would resume an empty epoch), or, in an epoch resumed
from a loaded state, a snapshot taken before the epoch's ``iter()`` (the loaded position).

Both keep the state of the position before the last batch too: an interrupt
(``errors.INTERRUPTS``) after a batch was built but before ``next()`` counted it leaves
the consumer's count one behind, and ``state(yielded)`` answers for that count.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

from dataloader._engine.build import StreamBatcher
from dataloader._engine.items import StreamItems
from dataloader._engine.outcome import END, interrupted
from dataloader._engine.pool import WorkerSetup
from dataloader._engine.stats import EpochStats

__all__ = ["PositionMoved", "StatefulStreamItems", "StreamSnapshots", "snapshot"]


class _StateError:
    """A worker's ``state_dict()`` raised: ``DataLoader.state_dict()`` raises it then."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


def snapshot(dataset: Any) -> Any:
    """A deep copy of ``dataset.state_dict()``, or a ``_StateError`` of what that raised."""
    try:
        return copy.deepcopy(dataset.state_dict())
    except Exception as exc:  # noqa: BLE001 - raised by DataLoader.state_dict()
        return _StateError(exc)


def _checked(state: Any) -> Any:
    if isinstance(state, _StateError):
        raise RuntimeError("the dataset's state_dict() raised (or its state could not be deep-copied)") from state.exc
    return state


class PositionMoved(RuntimeError):
    """``state(yielded)`` was asked for a position the stream's record is no longer at: the
    consumer went on between the caller's read of ``yielded`` and this one (a
    ``DataLoader.state_dict()`` on another thread reads ``yielded`` again and retries)."""


def _behind(yielded: int, count: int) -> bool:
    """``yielded`` is one behind ``count`` (an interrupt after the batch was built, or a batch
    built and not yet returned), else it must equal ``count``."""
    if yielded not in (count, count - 1):
        raise PositionMoved(f"internal: the consumer yielded {yielded} batches, the stream's state has {count}")
    return yielded != count


class StreamSnapshots:
    """``num_workers=0``: the dataset's state at the consumer's position (module docstring).

    Args:
        dataset: the ``IterableDataset`` (with ``state_dict``), not iterated yet this epoch.
        yielded: the epoch's position at its start (a resumed epoch's ``yielded``).
        loaded: the dataset was given a loaded state to start the epoch from: its
            ``state_dict()`` is the epoch's start; else the start's state is None (its
            ``state_dict()`` may be where its last iteration ended; the epoch starts as
            ``iter(dataset)`` starts it).

    Thread-safety: ``wrap``'s builder on the consumer's thread only, as ``next()``; ``state``
    from any thread (it reads one record, replaced whole after each batch).
    """

    def __init__(self, dataset: Any, yielded: int, loaded: bool = False) -> None:
        self._dataset = dataset
        # (batches built since the epoch's start, failures included; the state after them;
        # the state one batch earlier): one tuple, replaced whole, so that a state() on another
        # thread never pairs a count with another count's state.
        self._record: tuple[int, Any, Any] = (yielded, snapshot(dataset) if loaded else None, None)

    def wrap(self, build: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``build`` that snapshots the state after each batch (or failure) it builds."""
        dataset = self._dataset

        def built(item: Any) -> Any:
            out = build(item)
            if out is not END and not interrupted(out):
                count, now, _ = self._record
                self._record = (count + 1, snapshot(dataset), now)
            return out

        return built

    def state(self, yielded: int) -> Any:
        """The dataset's state after ``yielded`` batches of the epoch.

        Raises:
            RuntimeError: ``state_dict()`` raised, or its result could not be deep-copied.
        """
        count, now, before = self._record
        return _checked(before if _behind(yielded, count) else now)


class StatefulStreamItems(StreamItems):
    """``StreamItems`` that keep each worker's dataset state at the consumer's position.

    Args:
        resume: a ``state()`` saved by an earlier run with as many workers, or None.
        yielded: the epoch's position at its start (the saved ``yielded`` when resumed).
    """

    def __init__(
        self, dataset: Any, batcher: StreamBatcher, setup: WorkerSetup, num_workers: int,
        resume: dict[str, Any] | None, stats: EpochStats, yielded: int = 0,
    ) -> None:
        super().__init__(dataset, batcher, setup, num_workers, stats)
        self._copies: list[Any] = [None] * num_workers  # worker w's copy, on w's thread only
        self._cells: list[collections.deque[list[Any]]] = [collections.deque() for _ in range(num_workers)]
        self._loaded: list[Any] | None = None
        saved: list[Any] = [None] * num_workers
        last_taken = -1
        if resume is not None:
            self._loaded = list(resume["workers"])
            saved = list(resume["workers"])
            self._live = list(resume["live"])
            self._last = last_taken = resume["last"]
        # Written by the consumer only, read by state() from any thread: (batches taken in the
        # epoch, failures included; each worker's state at its last batch taken, a list never
        # changed once stored here; the worker of the last batch taken (-1: none); the last
        # take undone, (owner, its state, last worker) before it, or None).  One tuple,
        # replaced whole, so that a reader never sees a count with another count's states.
        self._record: tuple[int, list[Any], int, tuple[int, Any, int] | None] = (yielded, saved, last_taken, None)

    def _prepare(self, worker_id: int, mine: Any) -> Any:
        self._copies[worker_id] = mine
        loaded = self._loaded
        if loaded is not None and loaded[worker_id] is not None:
            mine.load_state_dict(copy.deepcopy(loaded[worker_id]))  # the copy may keep it live
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
            item[0] = snapshot(mine)  # a copy: the live dict moves on as this worker builds ahead
        return out

    def taken(self, owner: int, result: Any) -> bool:
        cell = self._cells[owner].popleft()  # one owner's items are taken in publication order
        keep = super().taken(owner, result)
        if keep:
            count, saved, last, _ = self._record
            now = list(saved)
            now[owner] = cell[0]
            self._record = (count + 1, now, owner, (owner, saved[owner], last))
        return keep

    def stop_worker(self, worker_id: int) -> None:
        super().stop_worker(worker_id)
        self._copies[worker_id] = None

    def state(self, yielded: int) -> dict[str, Any]:
        """The position after ``yielded`` batches of the epoch (module docstring).

        Raises:
            RuntimeError: a worker's ``state_dict()`` raised, or its state could not be
                deep-copied (chained).
        """
        count, states, last, undo = self._record
        saved = list(states)
        if _behind(yielded, count) and undo is not None:
            owner, saved[owner], last = undo
        return {"workers": [_checked(s) for s in saved], "last": last, "live": list(self._live)}
