"""Item coroutines spread over several event loops (``event_loops > 1``), by index.

The loader's first loop (its *home*, ``dataloader-asyncio``) keeps everything it has with
one loop: the builders' feeds, their budgets, their batches and every decision about them
(``async_run``).  Only the awaiting of an item's coroutine moves: ``Spread.route`` sends
the coroutine of item ``index`` to loop ``index % n`` (an index that is not an int: its
position in the batch; an ``async def __getitems__`` batch: its first index), where it runs
as a task of that loop, and gives the home loop a future that settles with the task's
outcome.  So each loop's thread parses its share of the responses, and a coroutine runs
on one loop from start to end (a remote dataset makes its client there: ``ClientCache``).
What an item is never depends on its loop, hence outputs identical for any ``n``.

- Loop 0 is the home loop itself: its items are awaited directly, as with one loop.
- Only coroutines move; another awaitable (a future, an object with ``__await__``) may be
  bound to the home loop, so it is awaited there.
- Cancelling the home future (the item's batch failed or was abandoned) cancels the
  task on its loop; a task that ends cancelled without that is its item's
  ``CancelledError`` (``ItemCancelledError`` for the batch, as on one loop).
- A value, an exception (its traceback from the item's own frames) or a cancellation
  crosses back with one ``call_soon_threadsafe``; so does the start and a cancel.

Thread-safety: ``route`` on the home loop's thread only; what it schedules runs on the
target loop's thread (start, cancel: in that order, both there) and on the home loop's
(the outcome), so the state of one routed item is touched by one thread at a time.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Sequence
from typing import Any

__all__ = ["Spread", "loop_of"]


def loop_of(index: Any, pos: int, n: int) -> int:
    """The loop (``0 <= j < n``) that runs the item ``index`` at position ``pos`` of its batch."""
    try:
        return operator.index(index) % n
    except TypeError:
        return pos % n


class Spread:
    """The home loop and its peers (see the module).

    Args:
        home: the loop whose feeds route their items (loop 0).
        peers: the other loops (1 .. n - 1), each running on its own thread.
    """

    __slots__ = ("home", "loops", "n")

    def __init__(self, home: asyncio.AbstractEventLoop, peers: Sequence[asyncio.AbstractEventLoop]) -> None:
        self.home = home
        self.loops = (home, *peers)
        self.n = len(self.loops)

    def route(self, index: Any, pos: int, aw: Any) -> Any:
        """What the home loop awaits for item ``index`` (at ``pos``) whose awaitable is ``aw``:
        ``aw`` itself (its loop is the home loop, or it is no coroutine), else a home-loop
        future of its task on its loop.

        Raises:
            RuntimeError: the item's loop is closed (the loader was closed); ``aw`` is closed.
        """
        j = loop_of(index, pos, self.n)
        if j == 0 or not asyncio.iscoroutine(aw):
            return aw
        return _Routed(self.home, self.loops[j], aw).future


class _Routed:
    """One item's coroutine on another loop, and the home future that stands for it."""

    __slots__ = ("home", "loop", "coro", "task", "future")

    def __init__(self, home: asyncio.AbstractEventLoop, loop: asyncio.AbstractEventLoop, coro: Any) -> None:
        self.home, self.loop, self.coro = home, loop, coro
        self.task: asyncio.Task[Any] | None = None  # the target loop's thread only
        self.future: asyncio.Future[Any] = home.create_future()
        try:
            loop.call_soon_threadsafe(self._start)
        except RuntimeError:  # the loop is closed
            coro.close()
            raise
        self.future.add_done_callback(self._home_done)

    def _start(self) -> None:
        """On the target loop: run the coroutine as a task of it."""
        coro, self.coro = self.coro, None
        task = self.task = self.loop.create_task(coro)
        task.add_done_callback(self._ended)

    def _home_done(self, future: asyncio.Future[Any]) -> None:
        """On the home loop: the future was cancelled (else settled by ``_ended``): cancel the task."""
        if future.cancelled():
            try:
                self.loop.call_soon_threadsafe(self._cancel)  # after _start: both run there, in order
            except RuntimeError:  # the loop is closed: its stop cancelled the task
                pass

    def _cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def _ended(self, task: asyncio.Task[Any]) -> None:
        """On the target loop: the task ended; its outcome goes home."""
        if not task.cancelled():
            task.exception()  # retrieved here: never "exception was never retrieved" if home is gone
        try:
            self.home.call_soon_threadsafe(self._settle, task)
        except RuntimeError:  # the home loop is closed: nobody waits for the item
            pass

    def _settle(self, task: asyncio.Task[Any]) -> None:
        """On the home loop: the task's outcome becomes the future's."""
        future = self.future
        self.task = None
        if future.done():  # cancelled meanwhile
            return
        if task.cancelled():
            future.cancel()
            return
        exc = task.exception()
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(task.result())
