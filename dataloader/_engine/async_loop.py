"""The loader's asyncio event loop thread, for an ``AsyncDataset`` (seed 000, 6.3).

One per loader, started by its first epoch, named ``dataloader-asyncio`` and
daemonic.  ``close()`` awaits the dataset's ``aclose()`` on the loop (at most
``SHUTDOWN_JOIN_TIMEOUT_S``; errors and time-outs are logged), stops the loop,
which then cancels the tasks still pending and awaits them (again bounded), and
joins the thread.  A later epoch starts a new loop.  Garbage collection of the
loader has the loop await ``aclose()`` and stop by itself (``stop_soon``), without
waiting for it.
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

    def start(self) -> None:
        """Start the loop thread unless it runs (also anew in a forked child).

        Raises:
            RuntimeError: the thread could not be started.
        """
        with self._lock:
            if self._pid != os.getpid():  # the parent's thread does not exist here
                self._loop = self._thread = None
                self._pid = os.getpid()
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
            RuntimeError: the loop is not running (the loader was closed).
        """
        loop = self._loop
        if loop is None:
            raise RuntimeError("the DataLoader's event loop is not running (the loader was closed)")
        loop.call_soon_threadsafe(fn, *args)

    def stop_soon(self) -> None:
        """Have the loop await ``aclose()`` (bounded) and stop, without waiting for it
        (garbage collection of the loader)."""
        with self._lock:
            loop, self._loop, self._thread = self._loop, None, None
        if loop is None or self._pid != os.getpid():
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
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None or self._pid != os.getpid():
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
