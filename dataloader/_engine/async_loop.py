"""The loader's asyncio event loop thread, for an ``AsyncDataset`` (seed 000, 6.3).

One per loader, started by its first epoch, named ``dataloader-asyncio`` and
daemonic.  ``close()`` awaits the dataset's ``aclose()`` on the loop (at most
``SHUTDOWN_JOIN_TIMEOUT_S``; errors and time-outs are logged), stops the loop,
which then cancels the tasks still pending and awaits them (again bounded), and
joins the thread.  A later epoch starts a new loop.  Garbage collection of the
loader has the loop await ``aclose()`` and stop by itself (``stop_soon``), without
waiting for it.

``fork()`` (the rule of the loader's worker pool, ``dataloader._engine.pool``): the
child inherits the loop object but not its thread, and the loop's selector and
self-pipe are shared with the parent's running loop, so the child never touches
them (closing the loop would unregister the parent's descriptors from the shared
epoll set): the inherited loop is kept, unclosed, for the object's life.  An epoch
the child starts gets a loop of its own (``start``); a call from an epoch started
before the fork raises ``RuntimeError`` until then, and ``close`` returns at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S

__all__ = ["ASYNC_THREAD_NAME", "AsyncLoop"]

ASYNC_THREAD_NAME = "dataloader-asyncio"
_log = logging.getLogger("dataloader")

# Guards the switch to a new lock in a forked child (a parent thread may have held the old
# one at the fork); never held across a fork itself.
_CHILD_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_CHILD_LOCK.acquire, after_in_parent=_CHILD_LOCK.release,
                        after_in_child=_CHILD_LOCK.release)


class AsyncLoop:
    """A lazily started event loop thread that runs one dataset's coroutines.

    Args:
        dataset: the ``AsyncDataset`` (its ``aclose()`` is awaited by ``close``).

    Thread-safety: ``start``, ``call``, ``close`` and ``stop_soon`` may be called
    from any thread; state changes are under one lock.
    """

    def __init__(self, dataset: Any) -> None:
        self._dataset = dataset
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._inherited: list[asyncio.AbstractEventLoop] = []  # a forked parent's, never closed

    def _mutex(self) -> threading.Lock:
        """The lock, after letting go of a forked parent's loop (see the module)."""
        if self._pid != os.getpid():
            with _CHILD_LOCK:
                if self._pid != os.getpid():
                    self._lock = threading.Lock()
                    if self._loop is not None:
                        self._inherited.append(self._loop)
                    self._loop = self._thread = None
                    self._pid = os.getpid()
        return self._lock

    def start(self) -> None:
        """Start the loop thread unless it runs (also anew in a forked child).

        Raises:
            RuntimeError: the thread could not be started.
        """
        with self._mutex():
            if self._thread is not None and self._thread.is_alive():
                return
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(target=_run, args=(loop, ready), name=ASYNC_THREAD_NAME, daemon=True)
            try:
                thread.start()
            except BaseException:
                loop.close()
                raise
            ready.wait()
            self._loop, self._thread = loop, thread

    def alive(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop thread soon.

        Raises:
            RuntimeError: the loop is not running (the loader was closed), or it was
                started in the parent of this forked process.
        """
        if self._pid != os.getpid():
            raise RuntimeError(
                f"this DataLoader's event loop was started in process {self._pid}, not in this one "
                f"({os.getpid()}): after fork() its thread does not exist here; start a new epoch with iter(loader)"
            )
        loop = self._loop
        if loop is None:
            raise RuntimeError("the DataLoader's event loop is not running (the loader was closed)")
        loop.call_soon_threadsafe(fn, *args)

    def stop_soon(self) -> None:
        """Have the loop await ``aclose()`` (bounded) and stop, without waiting for it
        (garbage collection of the loader)."""
        with self._mutex():
            loop, self._loop, self._thread = self._loop, None, None
        if loop is None:
            return
        aclose = getattr(self._dataset, "aclose", None)

        def begin() -> None:  # on the loop thread
            if aclose is None:
                loop.stop()
                return
            task = loop.create_task(_aclose(aclose, SHUTDOWN_JOIN_TIMEOUT_S))
            task.add_done_callback(lambda _: loop.stop())

        try:
            loop.call_soon_threadsafe(begin)
        except RuntimeError:  # closed already
            pass

    def close(self, timeout_s: float = SHUTDOWN_JOIN_TIMEOUT_S) -> None:
        """Await ``dataset.aclose()`` (bounded), stop the loop and join its thread."""
        with self._mutex():
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if threading.current_thread() is thread:  # close() from a coroutine: no wait
            loop.stop()
            return
        aclose = getattr(self._dataset, "aclose", None)
        if aclose is not None and thread.is_alive():
            done = asyncio.run_coroutine_threadsafe(_aclose(aclose, timeout_s), loop)
            try:
                done.result(timeout_s + 1.0)
            except Exception as exc:  # logged, as the seed says; close() goes on
                _log.warning("DataLoader close: %s.aclose() did not finish: %r", type(self._dataset).__name__, exc)
        try:
            loop.call_soon_threadsafe(loop.stop)
        except RuntimeError:
            pass
        thread.join(2 * timeout_s + 1.0)


async def _aclose(aclose: Callable[[], Any], timeout_s: float) -> None:
    try:
        await asyncio.wait_for(aclose(), timeout_s)
    except Exception as exc:
        _log.warning("DataLoader close: aclose() failed: %r", exc)


def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    ready.set()
    try:
        loop.run_forever()
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=SHUTDOWN_JOIN_TIMEOUT_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
