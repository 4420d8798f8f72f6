"""The loop threads' side of an ``AsyncDataset``'s batches: item coroutines under a budget.

A builder (a worker, or the consumer with ``num_workers=0``) owns one ``Feed`` on each event
loop (``event_loops``, ``async_spread``: a feed per loop, the builder's budget of
``item_concurrency`` item coroutines in flight and its claims shared by its feeds through a
``FeedGroup``).  A batch is one ``BatchRun`` per loop that has items of it (its *part*; with
one loop, the whole batch); a feed starts its parts in the order of their batches, then in
position order.  When an item ends, its slot goes to the next item of that loop not yet
started: of the same batch, else of the next batch.  So a worker's requests stay in flight
across its batch boundaries: the items of batch ``k + 1`` start as those of batch ``k`` end,
while the worker still collates batch ``k``.

A worker's feeds claim the next batch themselves, on their loop's thread, without waiting
(``FeedGroup.claim_for``: the epoch window's ``try_claim``), as soon as an item ended and
every item of that loop's parts has started, with a slot free, and one item at least of the
last batch has ended: a worker claims batches ahead only while that last batch's items come
back, so items that hang never draw more batches after them, and the window's bound on
batches bounds the rest.  The claimer tells the worker with a ``BEGUN`` message, before the
batch's first result.  ``FeedGroup.park`` stops the claims (the worker is about to sleep in
the window's blocking ``claim``, which must not race with one here): ``PARKED`` answers it.

Messages on the builder's queue, each ``(sink, pos, ok, value)``, ``sink`` the builder's
own object for the batch: ``pos >= 0`` an item's value (``ok``) or error; ``ENDED`` a part
is done (every item of it has a value or an error), ``value`` the results not sent yet, a
list of ``(pos, ok, value)`` (without a transform, all of them: one wake-up a part); the
batch is done when each of its parts sent ``ENDED``; ``BEGUN`` a feed claimed the batch;
``PARKED`` (``sink`` None) the feeds claim no more; ``STOPPED`` (``sink`` None) a feed
cancelled its parts (``stop``; one from each loop).  Each loop puts its own items' messages
straight on the queue, from its own thread: no result goes through another loop.

Every method of ``Feed`` and ``BatchRun`` after their construction runs on their loop's
thread only, so their state needs no lock; what the feeds share is under the group's lock.
"""

from __future__ import annotations

import asyncio
import bisect
import inspect
import queue
import reprlib
from collections.abc import Callable, Sequence
from typing import Any

from dataloader._datasets.fetch import check_item_count
from dataloader._engine.async_loop import LoopRun
from dataloader._engine.async_spread import PARKED, Batch, FeedGroup
from dataloader._engine.errors import ItemCancelledError
from dataloader._native._awaitable import is_awaitable

__all__ = ["BEGUN", "ENDED", "PARKED", "STOPPED", "BatchRun", "Feed"]

ENDED = -2  # a message's pos: the part is done (every item of it has a value or an error)
BEGUN = -3  # a message's pos: the feed claimed the batch (its first message)
STOPPED = -5  # a message's pos: the feed claims no more and cancelled every batch it had


class Feed:
    """One builder's item coroutines on one loop (see the module; ``async_spread``: a feed per
    loop, sharing the builder's budget and claims through ``group``).

    Args:
        owner: the run of the event loop this feed runs on.
        group: what the builder's feeds share (``async_spread.FeedGroup``).
        out: the builder's queue.
    """

    def __init__(self, owner: LoopRun, group: FeedGroup, out: queue.SimpleQueue) -> None:
        self.owner, self.group, self.out = owner, group, out
        self.runs: list[BatchRun] = []  # this loop's parts not done, in batch order
        self.in_flight = 0  # item coroutines started and not ended (cancelled ones too)
        self.lanes = 0  # lane tasks running (each awaits one item at a time)

    def add(self, run: BatchRun) -> None:
        """Take one more batch's part (placed after those of earlier batches)."""
        if run.finished:  # the batch failed before its part came here
            return
        if self.owner.stopping:  # handed over as the run began to stop: never started
            run.cancel()
            return
        self.owner.batches.add(run)  # the run's stop cancels it (async_loop.LoopRun._begin_stop)
        runs = self.runs
        if runs and runs[-1].k > run.k:  # claimed on another loop, came after a later one
            bisect.insort(runs, run, key=_batch_number)
        else:
            runs.append(run)
        self.fill()
        run.maybe_done()

    def stop(self) -> None:
        """Cancel every part it has; say so (``STOPPED``).  The group claims no more (the
        builder parked it first)."""
        for run in list(self.runs):
            run.cancel()
        self.out.put((None, STOPPED, True, None))

    def fill(self) -> None:
        """Start a lane for each item not started yet, as the builder's budget allows."""
        if self.owner.stopping:
            return
        waiting = sum(run.startable() for run in self.runs)
        if waiting <= 0:
            return
        for _ in range(self.group.take(self, waiting)):
            self.lanes += 1
            self.owner.loop.create_task(self._lane())

    def _next(self) -> tuple[BatchRun, int, Any] | None:
        """The next item to await (oldest batch first; a batch claimed now if none is left and
        the last batch came back), or None."""
        for run in tuple(self.runs):  # a batch whose item failed to start may end (done) meanwhile
            got = run.next_item()
            if got is not None:
                return run, got[0], got[1]
        if self.group.claim is not None and not self.owner.stopping:
            claimed = self.group.claim_for(self)
            if claimed is not None:
                self.add(claimed)
                got = claimed.next_item()
                if got is not None:
                    return claimed, got[0], got[1]
        return None

    async def _lane(self) -> None:
        """Await items one after another (no task, no callback per item: the next request
        goes out in the same step as the last one's end); ends when none is left, or after a
        cancellation (``fill`` starts another where items wait)."""
        task = asyncio.current_task()
        try:
            while (got := self._next()) is not None:
                run, pos, aw = got
                got = None
                run.tasks[pos] = task
                self.in_flight += 1
                try:
                    value = await aw
                except asyncio.CancelledError as exc:
                    self.in_flight -= 1
                    run.ended_cancelled(pos, exc)
                    return
                except GeneratorExit:  # the loop closed with the lane pending
                    raise
                except BaseException as exc:  # KeyboardInterrupt too: the item's error
                    self.in_flight -= 1
                    tb = exc.__traceback__
                    run.ended_with(pos, False, exc.with_traceback(tb.tb_next if tb is not None else None))
                else:
                    self.in_flight -= 1
                    run.ended_with(pos, True, value)
                finally:
                    aw = value = None
        finally:
            self.lanes -= 1
            self.group.release(self)
            if not self.owner.stopping:
                self.fill()

    def done(self, run: BatchRun) -> None:
        self.owner.batches.discard(run)
        if run in self.runs:
            self.runs.remove(run)
        self.group.part_done(run)


def _batch_number(run: BatchRun) -> int:
    return run.k


class BatchRun:
    """One loop's part of a batch (with one loop: the whole batch): the coroutines of the
    positions ``order`` under its feed's budget.  Built on the builder's thread (or the
    claiming loop's); every method after that runs on its feed's loop thread only.

    Errors are those of the sequential loader: when the item at position ``p`` fails, no
    position after ``p`` starts, those in flight are cancelled, those before ``p`` are
    awaited (on the batch's other loops too: ``async_spread``), and the batch fails with the
    first error by position (``async_build``).  ``settled`` (an error policy's batches, one
    ``__getitem__`` coroutine an item): an item's ``Exception`` is its outcome, sent at its
    position, and the batch's other items go on; an interrupt (any other ``BaseException``)
    still stops the batch as above.

    Args (keyword-only ones): ``order`` the ascending positions this part runs (a
    ``__getitems__`` batch: ``range(1)``); ``batch`` the ``async_spread.Batch`` it joins;
    ``k`` the batch's number in the epoch (its place among the feed's parts).
    """

    def __init__(
        self, feed: Feed, dataset: Any, indices: Sequence[Any], getitems: bool, per_item: bool, sink: Any,
        settled: bool = False, *, order: Sequence[int], batch: Batch, k: int,
    ) -> None:
        self.feed, self.dataset, self.indices, self.getitems = feed, dataset, indices, getitems
        self.sink, self.order, self.batch, self.k = sink, order, batch, k
        batch.join(self)
        self.settled = settled and not getitems
        # per_item: each result goes to the builder as it completes (there is a transform to
        # run); otherwise they are kept and sent once, with the end (one wake-up per batch).
        self.per_item = per_item
        self.kept: list[tuple[int, bool, Any]] = []
        self.tasks: dict[int, Any] = {}
        self.next_i = 0  # order[next_i] is the next position to start
        self.ended = 0  # item coroutines that ended (a value, an error, cancelled)
        self.stop_at: int | None = None
        self.cancelled = False
        self.finished = False

    def startable(self) -> int:
        """Items not started yet that may start (after a failure at ``p``: those before ``p``)."""
        if self.cancelled:
            return 0
        left = len(self.order) - self.next_i
        if self.stop_at is None or left == 0:
            return left
        return bisect.bisect_left(self.order, self.stop_at, self.next_i) - self.next_i

    def next_item(self) -> tuple[int, Any] | None:
        """``(position, awaitable)`` of the next item to start, or None; an item whose
        ``__getitem__`` raised (or returned no awaitable) fails here, and nothing after it starts."""
        while self.startable():
            pos = self.order[self.next_i]
            self.next_i += 1
            if self.getitems:
                aw = self._awaitable(0, "__getitems__", list(self.indices))
            else:
                aw = self._awaitable(pos, "__getitem__", self.indices[pos])
            if aw is not None:
                return pos, aw
        return None

    def _awaitable(self, pos: int, method: str, arg: Any) -> Any:
        aw = None
        try:
            aw = getattr(self.dataset, method)(arg)
            if not is_awaitable(aw):
                raise TypeError(f"{self._what(pos)} returned a {type(aw).__name__}, not an awaitable")
            return aw
        except BaseException as exc:  # __getitem__ raised, or returned no awaitable
            if inspect.iscoroutine(aw):
                aw.close()
            self.ended += 1
            self._emit(pos, False, exc)
            self._failed(pos, exc)
            return None

    def _what(self, pos: int) -> str:
        name = type(self.dataset).__name__
        if self.getitems:
            return f"{name}.__getitems__({reprlib.repr(list(self.indices))})"
        return f"{name}.__getitem__({reprlib.repr(self.indices[pos])})"

    def ended_with(self, pos: int, ok: bool, value: Any) -> None:
        """The item at ``pos`` returned ``value`` (``ok``) or raised it."""
        self.tasks.pop(pos, None)
        self.ended += 1
        if not ok:
            self._emit(pos, False, value)
            self._failed(pos, value)
        elif self.getitems:
            self._put_batch(value)
        else:
            self._emit(pos, True, value)
        self.maybe_done()

    def ended_cancelled(self, pos: int, exc: asyncio.CancelledError) -> None:
        """The item at ``pos`` ended cancelled: by this batch (an error before it, or the batch
        abandoned), no item; by anything else, its item's error (the batch would lack it)."""
        self.tasks.pop(pos, None)
        self.ended += 1
        if not self.cancelled and (self.stop_at is None or pos <= self.stop_at):
            error = self._cancelled_error(pos, exc)
            self._emit(pos, False, error)
            self._failed(pos, error)
        self.maybe_done()

    def _cancelled_error(self, pos: int, exc: asyncio.CancelledError) -> ItemCancelledError:
        tb = exc.__traceback__
        cause = exc.with_traceback(tb.tb_next if tb is not None else None)  # not the lane's frame: no cycle
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

    def _failed(self, pos: int, exc: BaseException) -> None:
        """The item at ``pos`` failed with ``exc`` (sent): the batch stops after it (its parts
        on other loops told on theirs), unless it is ``settled`` and ``exc`` is not an interrupt."""
        if self.settled and isinstance(exc, Exception):
            self.maybe_done()
            return
        self.fail(pos)
        for part in self.batch.parts:
            if part is not self:
                try:
                    part.feed.owner.loop.call_soon_threadsafe(part.fail, pos)
                except RuntimeError:  # its loop is closed: the run's stop cancelled the part
                    pass

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
        if self.cancelled or self.startable() == 0:
            self.finished = True
            self.feed.done(self)
            kept, self.kept = self.kept, []
            sink, self.sink = self.sink, None  # the sink holds its run until the builder saw this
            self.feed.out.put((sink, ENDED, True, kept))  # one message: one wake-up of the builder

    def _emit(self, pos: int, ok: bool, value: Any) -> None:
        if self.per_item:
            self.feed.out.put((self.sink, pos, ok, value))
        else:
            self.kept.append((pos, ok, value))
