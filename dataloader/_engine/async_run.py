"""The loop thread's side of an ``AsyncDataset``'s batches: item coroutines under a budget.

A builder (a worker, or the consumer with ``num_workers=0``) owns one ``Feed``: a budget of
``item_concurrency`` item coroutines in flight over the batches it has (``BatchRun``),
started in the order the batches came, then in position order.  When an item ends, its
slot goes to the next item not yet started: of the same batch, else of the next batch.  So
a worker's requests stay in flight across its batch boundaries: the items of batch ``k +
1`` start as those of batch ``k`` end, while the worker still collates batch ``k``.

A worker's feed claims the next batch itself, on the loop thread, without waiting
(``claim``: the epoch window's ``try_claim``), as soon as an item ended and every item of
its batches has started, with a slot free, and one item at least of its last batch has
ended: a worker claims batches ahead only while that last batch's items come back, so
items that hang never draw more batches after them, and the window's bound on batches
bounds the rest.  It tells the worker with a ``BEGUN`` message, before the batch's first
result.  ``park`` stops the claims (the worker is about to sleep in the window's blocking
``claim``, which must not race with one here): ``PARKED`` answers it.

Messages on the builder's queue, each ``(sink, pos, ok, value)``, ``sink`` the builder's
own object for the batch: ``pos >= 0`` an item's value (``ok``) or error; ``ENDED`` the
batch is done (every item has a value or an error), ``value`` the results not sent yet, a
list of ``(pos, ok, value)`` (without a transform, all of them: one wake-up a batch);
``BEGUN`` the feed claimed the batch; ``PARKED`` (``sink`` None) the feed claims no more;
``STOPPED`` (``sink`` None) the feed claims no more and cancelled its batches (``stop``).

Every method of ``Feed`` and ``BatchRun`` after their construction runs on the loop thread
only, so their state needs no lock.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import queue
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from dataloader._datasets.fetch import check_item_count
from dataloader._engine.async_loop import LoopRun
from dataloader._engine.errors import ItemCancelledError
from dataloader._native._awaitable import is_awaitable

__all__ = ["BEGUN", "ENDED", "PARKED", "STOPPED", "BatchRun", "Feed"]

ENDED = -2  # a message's pos: the batch is done (every item has a value or an error)
BEGUN = -3  # a message's pos: the feed claimed the batch (its first message)
PARKED = -4  # a message's pos: the feed claims no more batches
STOPPED = -5  # a message's pos: the feed claims no more and cancelled every batch it had


class Feed:
    """One builder's budget of item coroutines on the loop (see the module).

    Args:
        owner: the run of the loader's event loop.
        limit: item coroutines in flight at most (``item_concurrency``, >= 1).
        out: the builder's queue.
        claim: on the loop thread, the next batch as a ``BatchRun`` of this feed (its
            ``BEGUN`` message sent), or None (none published); None: the feed never claims.
    """

    def __init__(
        self, owner: LoopRun, limit: int, out: queue.SimpleQueue, claim: Callable[[], BatchRun | None] | None,
    ) -> None:
        self.owner, self.limit, self.out, self.claim = owner, limit, out, claim
        self.runs: list[BatchRun] = []  # not done, in the order they came
        self.last: BatchRun | None = None  # the last batch that came (done or not)
        self.in_flight = 0  # item coroutines started and not ended (cancelled ones too)

    def add(self, run: BatchRun) -> None:
        """Take one more batch (after those before it)."""
        if self.owner.stopping:  # handed over as the run began to stop: never started
            run.cancel()
            return
        self.owner.batches.add(run)  # the run's stop cancels it (async_loop.LoopRun._begin_stop)
        self.runs.append(run)
        self.last = run
        self.fill()
        run.maybe_done()

    def park(self) -> None:
        """Claim no more batches; say so (``PARKED``)."""
        self.claim = None
        self.out.put((None, PARKED, True, None))

    def stop(self) -> None:
        """Claim no more batches and cancel every one it has; say so (``STOPPED``)."""
        self.claim = None
        for run in list(self.runs):
            run.cancel()
        self.out.put((None, STOPPED, True, None))

    def fill(self) -> None:
        """Start items, oldest batch first, while a slot is free; claim a batch if none is left."""
        for run in tuple(self.runs):  # a batch whose item failed to start may end (done) meanwhile
            if self.in_flight >= self.limit:
                return
            run.fill()
        last = self.last
        if (self.claim is not None and self.in_flight < self.limit and last is not None and last.ended > 0
                and not self.owner.stopping):
            claimed = self.claim()
            if claimed is not None:
                self.add(claimed)

    def done(self, run: BatchRun) -> None:
        self.owner.batches.discard(run)
        if run in self.runs:
            self.runs.remove(run)


class BatchRun:
    """One batch's coroutines, under its feed's budget.  Built on the builder's thread;
    every method after that runs on the loop thread only.

    Errors are those of the sequential loader: when the item at position ``p`` fails, no
    position after ``p`` starts, those in flight are cancelled, those before ``p`` are
    awaited, and the batch fails with the first error by position (``async_build``).
    """

    def __init__(
        self, feed: Feed, dataset: Any, indices: Sequence[Any], getitems: bool, per_item: bool, sink: Any,
    ) -> None:
        self.feed, self.dataset, self.indices, self.getitems = feed, dataset, indices, getitems
        self.sink = sink
        # per_item: each result goes to the builder as it completes (there is a transform to
        # run); otherwise they are kept and sent once, with the end (one wake-up per batch).
        self.per_item = per_item
        self.kept: list[tuple[int, bool, Any]] = []
        self.tasks: dict[int, Any] = {}
        self.next_pos = 0
        self.ended = 0  # item coroutines that ended (a value, an error, cancelled)
        self.stop_at: int | None = None
        self.cancelled = False
        self.finished = False

    def fill(self) -> None:
        """Start the next positions while the feed has a free slot."""
        feed = self.feed
        if self.getitems:
            if self.next_pos == 0 and feed.in_flight < feed.limit and not self.cancelled:
                self.next_pos = len(self.indices)
                self._spawn(0, "__getitems__", list(self.indices))
            return
        while feed.in_flight < feed.limit and self.next_pos < len(self.indices) and self.stop_at is None:
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
            task = asyncio.ensure_future(aw, loop=self.feed.owner.loop)
        except BaseException as exc:  # __getitem__ raised, or returned no awaitable
            if inspect.iscoroutine(aw):
                aw.close()
            self._emit(pos, False, exc)
            self.fail(pos)
            return
        self.tasks[pos] = task
        self.feed.in_flight += 1
        task.add_done_callback(functools.partial(self._done, pos))

    def _what(self, pos: int) -> str:
        name = type(self.dataset).__name__
        if self.getitems:
            return f"{name}.__getitems__({reprlib.repr(list(self.indices))})"
        return f"{name}.__getitem__({reprlib.repr(self.indices[pos])})"

    def _done(self, pos: int, task: Any) -> None:
        self.tasks.pop(pos, None)
        self.feed.in_flight -= 1
        self.ended += 1
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
        self.feed.fill()
        self.maybe_done()

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
        """Start nothing after ``pos``; cancel what is in flight after it."""
        if self.stop_at is None or pos < self.stop_at:
            self.stop_at = pos
        for p, task in list(self.tasks.items()):
            if p > pos:
                self._cancel(p, task)
        self.maybe_done()

    def cancel(self) -> None:
        """Abandon the batch: cancel every coroutine in flight, start none."""
        self.cancelled = True
        for pos, task in list(self.tasks.items()):
            self._cancel(pos, task)
        self.maybe_done()

    def _cancel(self, pos: int, task: Any) -> None:
        task.set_name(self._what(pos))  # what the loop's stop names if it does not end
        task.cancel()

    def maybe_done(self) -> None:
        if self.finished or self.tasks:
            return
        if self.cancelled or self.stop_at is not None or self.next_pos >= len(self.indices):
            self.finished = True
            self.feed.done(self)
            kept, self.kept = self.kept, []
            self.feed.out.put((self.sink, ENDED, True, kept))  # one message: one wake-up of the builder

    def _emit(self, pos: int, ok: bool, value: Any) -> None:
        if self.per_item:
            self.feed.out.put((self.sink, pos, ok, value))
        else:
            self.kept.append((pos, ok, value))
