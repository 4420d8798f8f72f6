"""Building a batch of an ``AsyncDataset``: coroutines on the loop, the rest on a worker.

The worker (or the consumer, with ``num_workers=0``) that builds a batch hands
the loop thread a ``_BatchRun``: up to ``item_concurrency`` item coroutines in
flight, started in position order, each result put on a queue as it completes.
The worker takes the results as they arrive, transforms each one at once (so
CPU work never runs on the loop) and collates the batch.  With ``num_workers``
workers building one batch each, at most ``max(num_workers, 1) *
item_concurrency`` coroutines are in flight.

Errors are those of the sequential loader: when the item at position ``p``
fails (its coroutine or its transform), no position after ``p`` starts, those
in flight are cancelled, those before ``p`` are awaited (they were started
already), and the batch fails with the first error by position.

Cancellation: while it waits, the builder polls the epoch's window every
``ASYNC_POLL_S``; once the epoch is cancelled (closed, dropped, ``break``) or on
``KeyboardInterrupt`` it cancels the batch's coroutines and waits (bounded) until
each has ended, so requests in flight are cancelled, not completed.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.async_loop import AsyncLoop
from dataloader._datasets.fetch import check_item_count
from dataloader._engine.build import Builder
from dataloader._engine.items import MapItems
from dataloader._native._ring import Window
from dataloader._native._stats import Recorder

__all__ = ["ASYNC_POLL_S", "AsyncFetcher", "AsyncItems"]

ASYNC_POLL_S = 0.02  # how soon a waiting builder sees its epoch cancelled (seconds)
_DONE: Any = object()


class EpochCancelled(Exception):
    """The batch was abandoned because its epoch was closed (never shown to a user)."""


class _BatchRun:
    """One batch's coroutines.  Built on a worker; every method after that runs on the
    loop thread only, so its state needs no lock."""

    def __init__(
        self, dataset: Any, indices: Sequence[Any], k: int, getitems: bool, out: queue.SimpleQueue, per_item: bool
    ) -> None:
        self.dataset, self.indices, self.k, self.getitems, self.out = dataset, indices, k, getitems, out
        # per_item: each result goes to the builder as it completes (there is a transform to
        # run); otherwise they are kept and sent once, with the end (one wake-up per batch).
        self.kept: list[tuple[int, bool, Any]] | None = None if per_item else []
        self.tasks: dict[int, Any] = {}
        self.next_pos = 0
        self.stop_at: int | None = None
        self.cancelled = False
        self.finished = False

    def start(self) -> None:
        if self.getitems:
            self.next_pos = len(self.indices)
            self._spawn(0, lambda: self.dataset.__getitems__(list(self.indices)))
        else:
            self._fill()
        self._maybe_done()

    def _fill(self) -> None:
        while len(self.tasks) < self.k and self.next_pos < len(self.indices) and self.stop_at is None:
            if self.cancelled:
                return
            pos = self.next_pos
            self.next_pos += 1
            self._spawn(pos, functools.partial(self.dataset.__getitem__, self.indices[pos]))

    def _spawn(self, pos: int, make: Callable[[], Any]) -> None:
        coro = None
        try:
            coro = make()
            task = asyncio.ensure_future(coro)
        except BaseException as exc:  # __getitem__ raised, or returned no awaitable
            if inspect.iscoroutine(coro):
                coro.close()
            self._emit(pos, False, exc)
            self.fail(pos)
            return
        self.tasks[pos] = task
        task.add_done_callback(functools.partial(self._done, pos))

    def _done(self, pos: int, task: Any) -> None:
        self.tasks.pop(pos, None)
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:
                self._emit(pos, False, exc)
                self.fail(pos)
            elif self.getitems:
                self._put_batch(task.result())
            else:
                self._emit(pos, True, task.result())
        self._fill()
        self._maybe_done()

    def _put_batch(self, items: Any) -> None:
        try:
            items = check_item_count(items, len(self.indices))
        except ValueError as exc:
            self._emit(0, False, exc)
            return
        for pos, item in enumerate(items):
            self._emit(pos, True, item)

    def fail(self, pos: int) -> None:
        """Start nothing after ``pos``; cancel what is in flight after it."""
        if self.stop_at is None or pos < self.stop_at:
            self.stop_at = pos
        for p, task in list(self.tasks.items()):
            if p > pos:
                task.cancel()
        self._maybe_done()

    def cancel(self) -> None:
        self.cancelled = True
        for task in list(self.tasks.values()):
            task.cancel()
        self._maybe_done()

    def _maybe_done(self) -> None:
        if self.finished or self.tasks:
            return
        if self.cancelled or self.stop_at is not None or self.next_pos >= len(self.indices):
            self.finished = True
            if self.kept:
                self.out.put(self.kept)
            self.out.put(_DONE)

    def _emit(self, pos: int, ok: bool, value: Any) -> None:
        if self.kept is None:
            self.out.put((pos, ok, value))
        else:
            self.kept.append((pos, ok, value))


class AsyncFetcher(Builder):
    """Builds a batch of an ``AsyncDataset`` from its indices (see the module).

    Args:
        dataset: the ``AsyncDataset``.
        auto_collation: work items are lists of indices (False: one index each).
        item_concurrency: item coroutines in flight per batch (>= 1); with 1 and an
            ``async def __getitems__``, one coroutine fetches the whole batch.
        loop: the loader's event loop.
    """

    __slots__ = ("_dataset", "_auto", "_k", "_getitems", "_loop", "_window")

    def __init__(
        self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None, item_concurrency: int, epoch_key: tuple[int, int], loop: AsyncLoop,
    ) -> None:
        super().__init__(collate_fn, transform, epoch_key)
        self._dataset = dataset
        self._auto = auto_collation
        self._k = item_concurrency
        self._getitems = item_concurrency == 1 and hasattr(type(dataset), "__getitems__")
        self._loop = loop
        self._window: Window | None = None

    def watch(self, window: Window) -> None:
        """Abandon batches once ``window`` is cancelled (the epoch's; set by every worker)."""
        self._window = window

    def _build(self, indices: Any, rec: Recorder) -> Any:
        # The transform runs on this thread as each item arrives: it counts as fetching.
        items = self.fetch([indices], getitems=False)[0] if not self._auto else self.fetch(indices, self._getitems)
        rec.fetched()
        out = self._collate(items)
        rec.done()
        return out

    def fetch(self, indices: Sequence[Any], getitems: bool) -> list[Any]:
        """The transformed items of ``indices``, in order.

        Raises:
            The first error by position; ``EpochCancelled`` once the epoch is closed.
        """
        out: queue.SimpleQueue = queue.SimpleQueue()
        run = _BatchRun(self._dataset, indices, self._k, getitems, out, per_item=self._transform is not None)
        self._loop.call(run.start)
        items: list[Any] = [None] * len(indices)
        error: tuple[int, BaseException] | None = None
        try:
            while (msg := self._next_result(out)) is not _DONE:
                for pos, ok, value in msg if isinstance(msg, list) else (msg,):
                    if error is not None and pos > error[0]:
                        continue
                    if not ok:
                        error = (pos, value)
                        continue
                    try:
                        items[pos] = self._transform_one(indices[pos], value)
                    except BaseException as exc:
                        error = (pos, exc)
                        self._loop.call(run.fail, pos)
        except BaseException:
            self._abandon(run, out)
            raise
        if error is not None:
            raise error[1]
        return items

    def _next_result(self, out: queue.SimpleQueue) -> Any:
        while True:
            try:
                return out.get(timeout=ASYNC_POLL_S)
            except queue.Empty:
                window = self._window
                if window is not None and window.cancelled:
                    raise EpochCancelled from None
                if not self._loop.alive():
                    raise RuntimeError("the DataLoader's event loop stopped while a batch was being fetched") from None

    def _abandon(self, run: _BatchRun, out: queue.SimpleQueue) -> None:
        """Cancel the batch's coroutines and wait (bounded) until every one has ended."""
        try:
            self._loop.call(run.cancel)
        except RuntimeError:
            return
        deadline = time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0 and self._loop.alive():
            try:
                if out.get(timeout=min(left, ASYNC_POLL_S * 5)) is _DONE:
                    return
            except queue.Empty:
                pass

    def _transform_one(self, index: Any, item: Any) -> Any:
        if self._transform is None:
            return item
        saved = _context._swap_index(index)
        try:
            return self._transform(item)
        finally:
            _context._set_index(saved)


class AsyncItems(MapItems):
    """``MapItems`` whose builder is an ``AsyncFetcher`` watching the epoch's window."""

    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo:
        self._fetch.watch(window)  # type: ignore[attr-defined]
        return super().start_worker(worker_id, window)
