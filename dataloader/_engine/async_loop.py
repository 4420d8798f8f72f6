"""The loader's asyncio event loop thread, for an ``AsyncDataset`` (seed 000, 6.3).

One per loader, started by its first epoch, named ``dataloader-asyncio`` and
daemonic.  Each start is a ``LoopRun``; an epoch keeps the run it started with,
so it never hands work to a later one.  ``DataLoader.close()`` detaches the run
(a later epoch starts a new one) together with its list of open epochs, so every
epoch that used a run is closed before the run stops.

With ``event_loops=n > 1`` a run is ``n`` loops: the home run above and ``n - 1`` peer
runs (threads ``dataloader-asyncio-1``, ...), started before it and stopped with it, on
the same deadline and by the same steps (each awaits the dataset's ``aclose()`` on its own
loop: a remote dataset closes that loop's client there).  Each loop runs its own share of
every batch (a builder has a feed on each: ``async_spread``); the run is alive while all
its loops are.

Stopping a run has one time budget, a deadline (``close``: the rest of
``DataLoader.close()``'s ``SHUTDOWN_JOIN_TIMEOUT_S``; ``stop_soon``, when the loader
is garbage-collected: ``SHUTDOWN_JOIN_TIMEOUT_S`` from then).  On the loop thread,
the item coroutines still in flight are cancelled and the dataset's ``aclose()`` is
awaited (errors are logged), until the deadline at most; then the loop stops,
cancels every task still pending and waits for them until the same deadline;
then the loop is closed and the thread ends.  Tasks that did not end by then
(coroutines that ignore cancellation) are abandoned: dropped with the closed loop,
without asyncio's "Task was destroyed but it is pending!", and named in a
``RuntimeWarning`` (raised by ``close()``, or by the loop thread itself after
``stop_soon``).  ``close()`` joins the thread until the deadline, never longer: a
thread blocked in a synchronous call is left to end by itself (daemonic), and the
warning says what it was running.

``fork()`` (the rule of the loader's worker pool, ``dataloader._engine.pool``): the
child inherits the loop object but not its thread, and the loop's selector and
self-pipe are shared with the parent's running loop, so the child never touches
them (closing the loop would unregister the parent's descriptors from the shared
epoll set): the inherited run is kept, unclosed, for the object's life.  An epoch
the child starts gets a run of its own (``start``); a call from an epoch started
before the fork raises ``RuntimeError``, and closing returns at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.pool import mark_loop_thread

__all__ = ["ASYNC_THREAD_NAME", "AsyncLoop", "LoopRun"]

ASYNC_THREAD_NAME = "dataloader-asyncio"
_MARGIN_S = 0.1  # the loop thread ends this long before close()'s deadline, which then sees it gone
_log = logging.getLogger("dataloader")

# Guards the switch to a new lock in a forked child (a parent thread may have held the old
# one at the fork); never held across a fork itself.
_CHILD_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_CHILD_LOCK.acquire, after_in_parent=_CHILD_LOCK.release,
                        after_in_child=_CHILD_LOCK.release)


class LoopRun:
    """One start of the event loop thread (see the module).

    Args:
        dataset: the ``AsyncDataset`` (its ``aclose()`` is awaited when the run stops).
        name: its thread's name.
        peers: the runs of the other loops of ``event_loops > 1`` (started, stopped and
            waited for with this one; each runs its share of the items: ``async_spread``), or none.

    Thread-safety: ``call``, ``check``, ``alive``, ``close`` and ``stop_soon`` from any thread.
    What a stop hands the loop thread is written before it is scheduled
    (``call_soon_threadsafe``), and what the thread leaves is read after it ended.
    """

    def __init__(self, dataset: Any, name: str = ASYNC_THREAD_NAME, peers: tuple[LoopRun, ...] = ()) -> None:
        self.dataset = dataset
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.peers = peers
        self.batches: set[Any] = set()  # loop thread only: batches in flight (``cancel()``)
        self.deadline = 0.0  # time.monotonic() by which the thread ends (set by the stop)
        self.waited = False  # close() waits for the thread and warns; else the thread warns
        self.stopping = False  # a stop was requested: call() refuses new work
        self._stop_called = False  # loop thread only
        # Written by the loop thread as it stops, read by close() when the thread outlives the
        # deadline: the tasks it waits for (None: it never began to stop: a callback or a
        # coroutine blocks it), and, once it has waited, those it gave up on.
        self.pending: list[str] | None = None
        self.abandoned: list[str] | None = None
        self.ready = threading.Event()

    def start(self) -> None:
        """Start the threads (the peers' first) and wait until their loops run.

        Raises:
            RuntimeError: the thread could not be started.
        """
        started: list[LoopRun] = []
        try:
            for run in (*self.peers, self):
                run.thread.start()
                started.append(run)
                run.ready.wait()
        except BaseException:
            for run in started:
                run._request_stop(time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S, waited=False)
            for run in (*self.peers, self):
                if run not in started:
                    run.loop.close()
            raise

    def alive(self) -> bool:
        """Its thread runs, and those of its peers."""
        return self.thread.is_alive() and all(peer.thread.is_alive() for peer in self.peers)

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop thread soon.

        Raises:
            RuntimeError: as ``check``.
        """
        self.check()
        self.loop.call_soon_threadsafe(fn, *args)

    def check(self) -> None:
        """Raises ``RuntimeError`` unless the run takes work: it was stopped (the loader was
        closed), or it was started in the parent of this forked process."""
        if self.pid != os.getpid():
            raise RuntimeError(
                f"this DataLoader's event loop was started in process {self.pid}, not in this one "
                f"({os.getpid()}): after fork() its thread does not exist here; start a new epoch with iter(loader)"
            )
        if self.stopping:
            raise RuntimeError("the DataLoader's event loop is not running (the loader was closed)")

    def close(self, deadline: float) -> None:
        """Stop the run (see the module) and wait for its thread until ``deadline``
        (``time.monotonic()`` seconds); from the loop thread itself, do not wait.

        Warns:
            RuntimeWarning: tasks did not end by the deadline, or the thread is still
                running (it is abandoned); the message names them.
        """
        if self.pid != os.getpid():
            return  # inherited from the parent: never touched (see the module)
        runs = (self, *self.peers)
        if any(threading.current_thread() is run.thread for run in runs):  # close() from a coroutine
            self.stop_soon()
            return
        for run in runs:
            run._request_stop(deadline, waited=True)
        for run in runs:
            run._wait(deadline)

    def _wait(self, deadline: float) -> None:
        """Join the thread until ``deadline``; warn of what did not end (``close``)."""
        self.thread.join(max(0.0, deadline - time.monotonic()))
        abandoned, pending = self.abandoned, self.pending
        if abandoned:
            _warn(self.dataset, abandoned, "they were dropped with the event loop", stacklevel=3)
        elif abandoned is None and self.thread.is_alive():  # still waiting, or blocked
            what = pending if pending is not None else [_running(self.loop)]
            if what:
                _warn(self.dataset, what, "the event loop thread is abandoned: a daemon thread, it ends by "
                      "itself once they return", stacklevel=3)

    def stop_soon(self) -> None:
        """Stop the run within ``SHUTDOWN_JOIN_TIMEOUT_S`` without waiting for it (garbage
        collection of the loader); the loop thread warns about what it abandoned."""
        if self.pid == os.getpid():
            for run in (self, *self.peers):
                run._request_stop(time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S, waited=False)

    def _request_stop(self, deadline: float, waited: bool) -> None:
        if self.stopping:
            return
        self.deadline, self.waited, self.stopping = deadline, waited, True
        try:
            self.loop.call_soon_threadsafe(self._begin_stop)
        except RuntimeError:  # the loop is closed: its thread ended
            pass

    def _left(self) -> float:
        return max(0.0, self.deadline - _MARGIN_S - time.monotonic())

    def _begin_stop(self) -> None:
        """On the loop thread: cancel the batches in flight, await ``aclose()`` until the
        deadline, then stop the loop."""
        for batch in list(self.batches):  # their epochs were closed: they end before aclose()
            batch.cancel()
        aclose = getattr(self.dataset, "aclose", None)
        left = self._left()
        who = f"{type(self.dataset).__name__}.aclose()"
        self.pending = [_describe(t) for t in asyncio.all_tasks(self.loop) if not t.done()]
        if aclose is not None and left > 0:
            self.pending.append(who)
        if aclose is None or left <= 0:
            if aclose is not None:
                _log.warning("DataLoader close: %s was not awaited: the %g s budget was spent", who,
                             SHUTDOWN_JOIN_TIMEOUT_S)
            self._stop_once()
            return
        task = self.loop.create_task(_aclose(aclose, who), name=who)
        timer = self.loop.call_later(left, self._stop_once)
        task.add_done_callback(lambda _: self._stopped_by(timer))

    def _stopped_by(self, timer: asyncio.TimerHandle) -> None:
        timer.cancel()
        self._stop_once()

    def _stop_once(self) -> None:
        # Once only: a second stop() would end the run_until_complete() calls of _drain early.
        if not self._stop_called:
            self._stop_called = True
            self.loop.stop()

    def _main(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        mark_loop_thread()
        self.ready.set()
        try:
            while True:
                try:
                    loop.run_forever()
                except (KeyboardInterrupt, SystemExit):  # a task's (see _run_through): run on
                    if not self._stop_called:
                        continue
                break
        finally:
            try:
                if not self.stopping:  # ended by an exception, not by a stop
                    self.deadline, self.stopping = time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S, True
                    for peer in self.peers:  # nothing routes items to them any more
                        peer._request_stop(self.deadline, waited=False)
                self._stop_called = True
                self._drain()
            finally:
                # What is still pending is dropped with the loop, and named in our warning
                # instead of asyncio's "Task was destroyed but it is pending!".
                loop.set_exception_handler(_quiet_destroyed)
                asyncio.set_event_loop(None)
                loop.close()
        if self.abandoned and not self.waited:  # after stop_soon(): nobody else would warn
            _warn(self.dataset, self.abandoned, "they were dropped with the event loop", stacklevel=1)

    def _drain(self) -> None:
        """Cancel every pending task and wait for them until the deadline (again for
        tasks they started meanwhile); ``abandoned`` names those that did not end."""
        loop = self.loop
        while pending := [t for t in asyncio.all_tasks(loop) if not t.done()]:
            self.pending = [_describe(t) for t in pending]
            for task in pending:
                task.cancel()
            waiting = loop.create_task(asyncio.wait(pending, timeout=self._left()))
            _run_through(functools.partial(loop.run_until_complete, waiting))
            if self._left() <= 0:
                break
        gens = loop.create_task(loop.shutdown_asyncgens(), name="shutdown_asyncgens()")
        waiting = loop.create_task(asyncio.wait([gens], timeout=self._left()))
        _run_through(functools.partial(loop.run_until_complete, waiting))
        self.abandoned = [_describe(t) for t in asyncio.all_tasks(loop) if not t.done()]


class AsyncLoop:
    """A loader's event loop: a ``LoopRun`` started lazily, and again after a close.

    Args:
        dataset: the ``AsyncDataset`` (its ``aclose()`` is awaited when a run stops, on each
            of its loops).
        loops: event loops per run (``event_loops``, >= 1): the first is named
            ``dataloader-asyncio``, the others ``dataloader-asyncio-1``, ... (``async_spread``).

    Thread-safety: every method may be called from any thread; the current run is
    swapped under one lock.
    """

    def __init__(self, dataset: Any, loops: int = 1) -> None:
        self._dataset = dataset
        self._loops = loops
        self._lock = threading.Lock()
        self._run: LoopRun | None = None
        self._pid = os.getpid()
        self._inherited: list[LoopRun] = []  # a forked parent's, never closed

    def _mutex(self) -> threading.Lock:
        """The lock, after letting go of a forked parent's run (see the module)."""
        if self._pid != os.getpid():
            with _CHILD_LOCK:
                if self._pid != os.getpid():
                    self._lock = threading.Lock()
                    if self._run is not None:
                        self._inherited.append(self._run)
                    self._run = None
                    self._pid = os.getpid()
        return self._lock

    def start(self) -> LoopRun:
        """The running run, started now unless one runs (also anew in a forked child).

        Raises:
            RuntimeError: the thread could not be started.
        """
        with self._mutex():
            run = self._run
            if run is None or run.stopping or not run.alive():
                if run is not None and not run.stopping:  # one of its loops ended: stop the others
                    run.stop_soon()
                peers = tuple(LoopRun(self._dataset, f"{ASYNC_THREAD_NAME}-{j}") for j in range(1, self._loops))
                run = LoopRun(self._dataset, peers=peers)
                run.start()
                self._run = run
            return run

    def detach(self) -> LoopRun | None:
        """Take the current run away (the next ``start`` starts a new one); the caller
        stops it (``LoopRun.close``)."""
        with self._mutex():
            run, self._run = self._run, None
        return run

    def close(self, deadline: float | None = None) -> None:
        """Stop the current run, waiting until ``deadline`` (``time.monotonic()``
        seconds; default ``SHUTDOWN_JOIN_TIMEOUT_S`` from now).  Warns as ``LoopRun.close``."""
        run = self.detach()
        if run is not None:
            run.close(time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S if deadline is None else deadline)

    def stop_soon(self) -> None:
        """Stop the current run without waiting (garbage collection of the loader)."""
        run = self.detach()
        if run is not None:
            run.stop_soon()


def _run_through(run: Callable[[], Any]) -> None:
    """``run()`` (the loop's ``run_forever``, or ``run_until_complete``), again after each
    ``KeyboardInterrupt`` or ``SystemExit``: asyncio raises these out of the loop when a task
    raises them, after it made them the task's exception (an item's error, for its batch).
    On this thread they are never a signal (Python runs handlers on the main thread)."""
    while True:
        try:
            run()
            return
        except (KeyboardInterrupt, SystemExit):
            continue


async def _aclose(aclose: Callable[[], Any], who: str) -> None:
    try:
        await aclose()
    except asyncio.CancelledError:
        _log.warning("DataLoader close: %s did not finish within the %g s budget: cancelled", who,
                     SHUTDOWN_JOIN_TIMEOUT_S)
        raise
    except GeneratorExit:  # an abandoned aclose() closed with its loop
        raise
    except BaseException as exc:  # KeyboardInterrupt too: it is not a signal here (_run_through)
        _log.warning("DataLoader close: %s failed: %r", who, exc)


def _describe(task: asyncio.Task[Any]) -> str:
    name = task.get_name()
    if not name.startswith("Task-"):  # named by the loader: "Items.__getitem__(3)"
        return name
    coro = task.get_coro()
    return f"{getattr(coro, '__qualname__', type(coro).__name__)}() ({name})"


def _running(loop: asyncio.AbstractEventLoop) -> str:
    task = asyncio.current_task(loop)
    return f"{_describe(task)}, still running" if task is not None else "a callback that did not return"


def _warn(dataset: Any, what: list[str], consequence: str, stacklevel: int) -> None:
    shown = ", ".join(what[:5]) + (f" and {len(what) - 5} more" if len(what) > 5 else "")
    message = (
        f"DataLoader close: {len(what)} task(s) on {type(dataset).__name__}'s event loop did not end within "
        f"the {SHUTDOWN_JOIN_TIMEOUT_S:g} s budget after they were cancelled ({shown}); {consequence}"
    )
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
    except Exception:  # warnings turned into errors on the loop thread, where nobody would catch one
        if threading.current_thread().name != ASYNC_THREAD_NAME:
            raise
        _log.warning("%s", message)


def _quiet_destroyed(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if context.get("message") != "Task was destroyed but it is pending!":
        loop.default_exception_handler(context)

