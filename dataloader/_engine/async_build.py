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
already), and the batch fails with the first error by position.  (Under
``on_error="skip"``/``"replace"``, ``AsyncFetcher.fetch_outcomes`` runs every item
whatever fails, each failure kept in its place: ``dataloader._engine.recover``.)  A batch is
complete only when every item has a value or an error:

- a coroutine that ends cancelled although this batch did not cancel it (it
  awaited a shared request another task cancelled) fails its item with
  ``ItemCancelledError`` (``dataloader._engine.errors``), the ``CancelledError``
  its cause;
- ``KeyboardInterrupt`` and ``SystemExit`` from a coroutine are its item's error,
  raised by ``next()`` at that batch's position as for a plain ``Dataset`` (asyncio
  raises them out of the event loop too, which then runs on: ``async_loop``).

Cancellation: while it waits, the builder polls its epoch every ``ASYNC_POLL_S``
(the window's ``cancelled``; with ``num_workers=0``, ``AsyncFetcher.cancel``,
which the epoch's ``close()`` calls); once the epoch is closed (``close()``,
dropped, ``break``, ``DataLoader.close()``) or on ``KeyboardInterrupt`` it
cancels the batch's coroutines and waits (bounded) until each has ended, so
requests in flight are cancelled, not completed, and the build ends with
``EpochCancelled`` (the epoch's ``next()`` then raises ``StopIteration``).

A failed batch's exception is raised from a frame that no longer holds it (nor
anything holding it): a traceback that reached back to a local holding its own
exception would be a reference cycle keeping the epoch, and with it the loader
and its threads, alive until the cyclic garbage collector ran.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import reprlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._datasets.fetch import check_item_count
from dataloader._engine.async_loop import LoopRun
from dataloader._engine.build import Builder, BuilderKind
from dataloader._engine.errors import ItemCancelledError
from dataloader._engine.items import MapItems
from dataloader._engine.pool import WorkerSetup
from dataloader._engine.stats import EpochStats
from dataloader._native._awaitable import is_awaitable
from dataloader._native._ring import Window
from dataloader._native._stats import Recorder

__all__ = ["ASYNC_POLL_S", "AsyncFetcher", "AsyncItems", "EpochCancelled"]

ASYNC_POLL_S = 0.02  # how soon a waiting builder sees its epoch cancelled (seconds)
_DONE: Any = object()


class EpochCancelled(Exception):
    """The batch was abandoned because its epoch was closed (never shown to a user)."""


class _BatchRun:
    """One batch's coroutines.  Built on a worker; every method after that runs on the
    loop thread only, so its state needs no lock."""

    def __init__(
        self, owner: LoopRun, dataset: Any, indices: Sequence[Any], k: int, getitems: bool, out: queue.SimpleQueue,
        per_item: bool, keep_going: bool = False,
    ) -> None:
        self.keep_going = keep_going  # an item's failure stops nothing (AsyncFetcher.fetch_outcomes)
        self.owner, self.dataset, self.indices, self.k, self.getitems = owner, dataset, indices, k, getitems
        self.out = out
        # per_item: each result goes to the builder as it completes (there is a transform to
        # run); otherwise they are kept and sent once, with the end (one wake-up per batch).
        self.per_item = per_item
        self.kept: list[tuple[int, bool, Any]] = []
        self.tasks: dict[int, Any] = {}
        self.next_pos = 0
        self.stop_at: int | None = None
        self.cancelled = False
        self.finished = False

    def start(self) -> None:
        if self.owner.stopping:  # handed over as the run began to stop: never started
            self.cancel()
            return
        self.owner.batches.add(self)  # the run's stop cancels it (async_loop.LoopRun._begin_stop)
        if self.getitems:
            self.next_pos = len(self.indices)
            self._spawn(0, "__getitems__", list(self.indices))
        else:
            self._fill()
        self._maybe_done()

    def _fill(self) -> None:
        while len(self.tasks) < self.k and self.next_pos < len(self.indices) and self.stop_at is None:
            if self.cancelled:
                return
            pos = self.next_pos
            self.next_pos += 1
            self._spawn(pos, "__getitem__", self.indices[pos])

    def _spawn(self, pos: int, method: str, arg: Any) -> None:
        aw = None
        try:
            aw = getattr(self.dataset, method)(arg)
            if not is_awaitable(aw):
                raise TypeError(f"{self._what(pos)} returned a {type(aw).__name__}, not an awaitable")
            task = asyncio.ensure_future(aw, loop=self.owner.loop)
        except BaseException as exc:  # __getitem__ raised, or returned no awaitable
            if inspect.iscoroutine(aw):
                aw.close()
            self._emit(pos, False, exc)
            self.fail(pos)
            return
        self.tasks[pos] = task
        task.add_done_callback(functools.partial(self._done, pos))

    def _what(self, pos: int) -> str:
        name = type(self.dataset).__name__
        if self.getitems:
            return f"{name}.__getitems__({reprlib.repr(list(self.indices))})"
        return f"{name}.__getitem__({reprlib.repr(self.indices[pos])})"

    def _done(self, pos: int, task: Any) -> None:
        self.tasks.pop(pos, None)
        if task.cancelled():
            # Cancelled by this batch (an error before it, or the batch abandoned): no item.
            # By anything else: its item's error, or the batch would lack that item.
            if not self.cancelled and (self.stop_at is None or pos <= self.stop_at):
                self._emit(pos, False, self._cancelled_error(pos, task))
                self.fail(pos)
        elif (exc := task.exception()) is not None:  # KeyboardInterrupt too (async_loop keeps running)
            self._emit(pos, False, exc)
            self.fail(pos)
        elif self.getitems:
            self._put_batch(task.result())
        else:
            self._emit(pos, True, task.result())
        self._fill()
        self._maybe_done()

    def _cancelled_error(self, pos: int, task: Any) -> ItemCancelledError:
        try:
            task.result()
        except asyncio.CancelledError as exc:
            tb = exc.__traceback__
            cause = exc.with_traceback(tb.tb_next if tb is not None else None)  # not this frame: no cycle
        index = list(self.indices) if self.getitems else self.indices[pos]
        error = ItemCancelledError(
            f"{self._what(pos)} ended cancelled (asyncio.CancelledError) although the loader did not cancel it: "
            f"it awaited something that another task cancelled, or cancelled itself", index)
        error.__cause__ = cause
        return error

    def _put_batch(self, items: Any) -> None:
        try:  # never raise here, in a done-callback: the batch would never end
            if not hasattr(items, "__len__") or not hasattr(items, "__getitem__"):
                raise TypeError(f"{self._what(0)} returned a {type(items).__name__}, not a sequence of items")
            items = check_item_count(items, len(self.indices))
            values = [items[pos] for pos in range(len(self.indices))]
        except Exception as exc:
            self._emit(0, False, exc)
            return
        for pos, item in enumerate(values):
            self._emit(pos, True, item)

    def fail(self, pos: int) -> None:
        """Start nothing after ``pos``; cancel what is in flight after it (unless ``keep_going``)."""
        if self.keep_going:
            return
        if self.stop_at is None or pos < self.stop_at:
            self.stop_at = pos
        for p, task in list(self.tasks.items()):
            if p > pos:
                self._cancel(p, task)
        self._maybe_done()

    def cancel(self) -> None:
        self.cancelled = True
        for pos, task in list(self.tasks.items()):
            self._cancel(pos, task)
        self._maybe_done()

    def _cancel(self, pos: int, task: Any) -> None:
        task.set_name(self._what(pos))  # what the loop's stop names if it does not end
        task.cancel()

    def _maybe_done(self) -> None:
        if self.finished or self.tasks:
            return
        if self.cancelled or self.stop_at is not None or self.next_pos >= len(self.indices):
            self.finished = True
            self.owner.batches.discard(self)
            if self.kept:
                self.out.put(self.kept)
                self.kept = []
            self.out.put(_DONE)

    def _emit(self, pos: int, ok: bool, value: Any) -> None:
        if self.per_item:
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
        loop: the run of the loader's event loop this epoch uses.

    Thread-safety: ``build`` from any number of threads at once; ``cancel`` and
    ``watch`` from any thread.
    """

    __slots__ = ("_dataset", "_auto", "_k", "_getitems", "_loop", "_window", "_closed")
    kind = BuilderKind.ASYNC

    def __init__(
        self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None, item_concurrency: int, epoch_key: tuple[int, int], loop: LoopRun,
    ) -> None:
        super().__init__(collate_fn, transform, epoch_key)
        self._dataset = dataset
        self._auto = auto_collation
        self._k = item_concurrency
        self._getitems = item_concurrency == 1 and hasattr(type(dataset), "__getitems__")
        self._loop = loop
        self._window: Window | None = None
        self._closed = False

    def watch(self, window: Window) -> None:
        """Abandon batches once ``window`` is cancelled (the epoch's; set by every worker)."""
        self._window = window

    def cancel(self) -> None:
        """Abandon the batch being built and every later one (``num_workers=0``: the
        epoch's ``close()``, from any thread); they end with ``EpochCancelled``."""
        self._closed = True

    def _cancelled(self) -> bool:
        window = self._window
        return self._closed or (window is not None and window.cancelled)

    def _build(self, indices: Any, rec: Recorder) -> Any:
        # The transform runs on this thread as each item arrives: it counts as fetching.
        items = self.fetch([indices], getitems=False)[0] if not self._auto else self.fetch(indices, self._getitems)
        return self._collated(items, rec)

    def fetch(self, indices: Sequence[Any], getitems: bool) -> list[Any]:
        """The transformed items of ``indices``, in order.

        Raises:
            The first error by position; ``EpochCancelled`` once the epoch is closed;
            ``RuntimeError`` when the loader's event loop stopped under an open epoch.
        """
        if self._cancelled():
            raise EpochCancelled
        out: queue.SimpleQueue = queue.SimpleQueue()
        run = _BatchRun(self._loop, self._dataset, indices, self._k, getitems, out, self._transform is not None)
        items: list[Any] = [None] * len(indices)
        failed: list[Any] = []  # [position, exception] of the first error by position
        try:
            self._loop.call(run.start)
            self._collect(run, out, indices, items, failed)
        except KeyboardInterrupt:
            failed.clear()  # an item's error holds _collect's frame, which holds this list: a cycle
            self._abandon(run, out)
            raise
        except BaseException:
            failed.clear()
            self._abandon(run, out)
            if self._cancelled():
                raise EpochCancelled from None
            raise
        del run, out
        if failed:
            raise failed.pop()  # from a frame that no longer refers to it (see the module)
        return items

    @property
    def batched(self) -> bool:
        """A batch is one ``async def __getitems__`` call (``item_concurrency=1``)."""
        return self._getitems and self._auto

    def fetch_outcomes(self, indices: Sequence[Any], wrap: Callable[[Exception], Any]) -> list[Any]:
        """The transformed items of ``indices`` in order, each failed one as ``wrap(exc)``: every
        item is fetched (``__getitem__``), whatever fails (``on_error``, ``dataloader._engine.recover``).

        Raises:
            ``EpochCancelled`` once the epoch is closed; an interrupt of an item; ``RuntimeError``
            when the loader's event loop stopped under an open epoch.
        """
        if self._cancelled():
            raise EpochCancelled
        out: queue.SimpleQueue = queue.SimpleQueue()
        # Results one by one when there is a transform to run as each arrives, else all at once.
        run = _BatchRun(self._loop, self._dataset, indices, self._k, False, out, self._transform is not None,
                        keep_going=True)
        items: list[Any] = [_DONE] * len(indices)
        try:
            self._loop.call(run.start)
            while (msg := self._next_result(out)) is not _DONE:
                for pos, ok, value in msg if isinstance(msg, list) else (msg,):
                    if ok:
                        try:
                            value = self._transform_one(indices[pos], value)
                        except Exception as exc:
                            ok, value = False, exc
                    if not ok and not isinstance(value, Exception):  # an interrupt of the item
                        raise value
                    items[pos] = value if ok else wrap(value)
                msg = value = None
        except BaseException:
            self._abandon(run, out)
            if self._cancelled():
                raise EpochCancelled from None
            raise
        if any(item is _DONE for item in items):  # the loop's stop cancelled the batch
            raise EpochCancelled if self._cancelled() else RuntimeError(
                "the DataLoader's event loop stopped while a batch was being fetched")
        return items

    def _collect(
        self, run: _BatchRun, out: queue.SimpleQueue, indices: Sequence[Any], items: list[Any], failed: list[Any]
    ) -> None:
        """Fill ``items`` (transformed) from the run's results until it is done; the first
        error by position goes into ``failed``."""
        filled = 0
        msg = value = None
        try:
            while (msg := self._next_result(out)) is not _DONE:
                for pos, ok, value in msg if isinstance(msg, list) else (msg,):
                    if failed and pos > failed[0]:
                        continue
                    if not ok:
                        failed[:] = (pos, value)
                        continue
                    try:
                        items[pos] = self._transform_one(indices[pos], value)
                        filled += 1
                    except BaseException as exc:
                        failed[:] = (pos, exc)
                        self._loop.call(run.fail, pos)
        finally:
            msg = value = None  # no local of this frame (in a transform error's traceback) holds a result
        if not failed and filled < len(items):  # the loop's stop cancelled the batch
            if self._cancelled():
                raise EpochCancelled
            raise RuntimeError("the DataLoader's event loop stopped while a batch was being fetched")

    def _next_result(self, out: queue.SimpleQueue) -> Any:
        while True:
            try:
                return out.get(timeout=ASYNC_POLL_S)
            except queue.Empty:
                if self._cancelled():
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
        saved = _context.swap_index(index)
        try:
            return self._transform(item)
        finally:
            _context.set_index(saved)


class AsyncItems(MapItems):
    """``MapItems`` whose builder is an ``AsyncFetcher`` watching the epoch's window.

    Args: as ``MapItems``, with ``fetch`` the epoch's ``AsyncFetcher`` (kept typed here:
    each worker's ``start_worker`` hands it the epoch's window).
    """

    def __init__(
        self, indices: Iterator[Any], fetch: AsyncFetcher, setup: WorkerSetup, num_workers: int, stats: EpochStats
    ) -> None:
        super().__init__(indices, fetch, setup, num_workers, stats)
        self._async_fetch = fetch

    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo:
        self._async_fetch.watch(window)
        return super().start_worker(worker_id, window)
