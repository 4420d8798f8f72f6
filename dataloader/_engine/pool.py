"""The loader's worker threads: a pool that serves one epoch at a time.

Threads are created on the first epoch that needs them and kept for the
loader's life (no thread is started per epoch).  An epoch hands the pool its
native ``Window`` and a ``work(worker_id)`` callable; every worker thread runs it
once and goes back to sleep.  The pool counts every worker in (``enter``) when
it hands out the job and out (``leave``) when it returns, also a worker that
never picked the job up because the pool was shut down first, so a wait for
the epoch's workers (``Window.wait_idle``) always ends.  The pool is free for
the next epoch as soon as every worker has left the last one (``idle``).

A pool belongs to the process that built it (``pid``): after ``fork()`` its
threads do not exist and its locks may be held by them, so every method is a
no-op (or raises) in another process, and the loader builds a new pool there.

Worker state follows PyTorch: before a thread works on an epoch, it gets that
epoch's ``WorkerInfo`` (so ``get_worker_info()`` works) and, with
``persistent_workers=False``, runs ``worker_init_fn(worker_id)``; with
``persistent_workers=True`` it runs ``worker_init_fn`` only on its first epoch
and keeps that epoch's ``get_worker_info().seed`` for the pool's life (a torch
worker process is seeded once).
"""

from __future__ import annotations

import copy
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S, WAIT_SLICE_S, WORKER_THREAD_PREFIX
from dataloader._engine.lanes import LanePool, start_threads
from dataloader._native._ring import Window

__all__ = ["WorkerPool", "WorkerSetup", "mark_loop_thread", "on_loop_thread", "start_worker", "worker_copy", "worker_info"]

# State of the calling worker thread across epochs.  A worker thread belongs to
# one pool for its whole life, so this is per-pool worker state: ``seed`` is the
# seed of the epoch in which the thread last initialised successfully.
_thread_state = threading.local()
_THREAD = threading.local()  # .loop: this thread runs a loader's event loop (mark_loop_thread)


def mark_loop_thread() -> None:
    """Mark the calling thread as running a loader's event loop (``async_loop.LoopRun``)."""
    _THREAD.loop = True


def on_loop_thread() -> bool:
    """The calling thread runs a loader's event loop (an item coroutine or ``aclose()`` is
    calling).  The batches of an ``AsyncDataset``'s epochs wait on that thread, so it must
    never wait for them (as a worker thread must not): a ``close()`` called from it returns
    without waiting, else the loop, and every request on it, would stall for the whole
    shutdown budget while the workers wait for the loop."""
    return getattr(_THREAD, "loop", False)


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What a worker thread needs to start an epoch.

    Attributes:
        seed: the epoch's seed; worker ``w`` gets ``seed + w``.
        dataset: the dataset (``get_worker_info().dataset``).
        worker_init_fn: called as ``worker_init_fn(worker_id)``, or None.
        persistent: ``persistent_workers``: initialise each thread once.
    """

    seed: int
    dataset: Any
    worker_init_fn: Callable[[int], None] | None
    persistent: bool


class WorkerPool:
    """``num_workers`` named daemon threads plus optional item-lane threads.

    Args:
        num_workers: worker threads (>= 0; 0 makes a pool with lanes only).
        num_lanes: lane helper threads for ``item_concurrency > 1`` (>= 0).

    Thread-safety: every method may be called from any thread of the process that
    built the pool.
    """

    def __init__(self, num_workers: int, num_lanes: int) -> None:
        self.pid = os.getpid()
        # Reentrant: a finalizer run by the garbage collector on a thread that holds it
        # (inside _next_job) must not deadlock.
        self._cond = threading.Condition(threading.RLock())
        self._window: Window | None = None
        self._work: Callable[[int], None] | None = None
        self._generation = 0
        self._picked = 0  # workers that picked up the current job
        self._shutdown = False
        self._stuck = False  # an epoch's close gave up waiting for this pool's workers
        self._threads: list[threading.Thread] = []
        self._idents: frozenset[int | None] = frozenset()
        self.lanes = LanePool(num_lanes) if num_lanes > 0 else None
        threads = [
            threading.Thread(target=_worker_main, args=(self, i), name=f"{WORKER_THREAD_PREFIX}-{i}", daemon=True)
            for i in range(num_workers)
        ]
        try:
            start_threads(threads, self._stop_started)
        except BaseException:
            if self.lanes is not None:
                self.lanes.shutdown()
            raise
        self._threads = threads
        self._idents = frozenset(t.ident for t in threads)
        if self.lanes is not None:
            self._idents |= frozenset(t.ident for t in self.lanes.threads)

    def _stop_started(self, started: list[threading.Thread]) -> None:
        self._threads = started
        self.shutdown(join_s=SHUTDOWN_JOIN_TIMEOUT_S)

    @property
    def num_workers(self) -> int:
        return len(self._threads)

    def in_this_process(self) -> bool:
        return self.pid == os.getpid()

    def owns_current_thread(self) -> bool:
        """True when called from one of this pool's threads."""
        return threading.get_ident() in self._idents

    def must_not_wait_here(self) -> bool:
        """True when the calling thread is one the pool's batches may wait on: one of its
        own threads, or a loader's event loop thread (``on_loop_thread``: an
        ``AsyncDataset``'s item coroutine); waiting for the workers there would wait for itself."""
        return self.owns_current_thread() or on_loop_thread()

    def idle(self) -> bool:
        """True when no worker is inside an epoch (the pool can take the next one)."""
        window = self._window
        return window is None or window.active == 0

    @property
    def stuck(self) -> bool:
        """True once the last epoch's close gave up waiting for these threads (the pool is not
        reused while they are away; an epoch started on it once they are back clears it)."""
        return self._stuck

    def mark_stuck(self) -> None:
        """Say that a worker did not come back within an epoch's close budget."""
        with self._cond:
            self._stuck = True

    def last_window(self) -> Window | None:
        """The window of the last epoch handed out (to wait for it, or to tell whether it closed)."""
        return self._window

    def run(self, window: Window, work: Callable[[int], None]) -> None:
        """Count every worker into ``window`` and have each run ``work(worker_id)``; returns at once.

        ``work`` must not hold the epoch strongly (see ``dataloader._engine.epoch``).

        Raises:
            RuntimeError: the pool was shut down, is still serving an epoch, or
                belongs to another process.
        """
        if not self.in_this_process():
            raise RuntimeError("this worker pool was built in another process (before fork())")
        with self._cond:
            if self._shutdown:
                raise RuntimeError("the loader's worker pool was shut down")
            if not self.idle():
                raise RuntimeError("the worker pool is still serving an epoch")
            window.enter(len(self._threads))
            self._stuck = False  # idle: the workers an earlier close gave up on came back
            self._window, self._work = window, work
            self._generation += 1
            self._picked = 0
            self._cond.notify_all()

    def _next_job(self, seen: int) -> tuple[Callable[[int], None] | None, int]:
        with self._cond:
            while not self._shutdown and self._generation == seen:
                self._cond.wait()
            if self._shutdown:
                return None, seen
            self._picked += 1
            return self._work, self._generation

    def shutdown(self, join_s: float = 0.0) -> None:
        """Stop every thread (each finishes the batch it builds, then exits).

        Workers counted into the current epoch that never picked it up are counted
        out.  With ``join_s > 0`` wait for the threads, at most ``join_s`` seconds in
        all, in slices that run signal handlers; never from one of the pool's own
        threads, in another process, or while the interpreter is finalizing.
        """
        if not self.in_this_process() or sys.is_finalizing():
            # Inherited through fork(): its threads do not exist here.  Finalizing: a
            # frozen daemon thread may hold the lock; the threads die with the process.
            return
        with self._cond:
            if not self._shutdown:
                self._shutdown = True
                window = self._window
                if window is not None and self._work is not None:
                    for _ in range(len(self._threads) - self._picked):
                        window.leave()
                self._work = None
                self._cond.notify_all()
        threads = list(self._threads)
        if self.lanes is not None:
            threads += self.lanes.shutdown()
        if join_s <= 0 or self.must_not_wait_here():
            return
        deadline = time.monotonic() + join_s
        for t in threads:
            while t.is_alive() and (left := deadline - time.monotonic()) > 0:
                t.join(min(left, WAIT_SLICE_S))

    @property
    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def alive_threads(self) -> int:
        threads = self._threads + (self.lanes.threads if self.lanes is not None else [])
        return sum(t.is_alive() for t in threads)


def _worker_main(pool: WorkerPool, worker_id: int) -> None:
    seen = 0
    while True:
        work, seen = pool._next_job(seen)
        if work is None:
            return
        work(worker_id)
        del work


def worker_info(worker_id: int, num_workers: int, setup: WorkerSetup, dataset: Any) -> _context.WorkerInfo:
    """The calling worker's ``WorkerInfo`` for this epoch (``dataset``: what
    ``get_worker_info().dataset`` shows, the worker's copy of an ``IterableDataset``).

    A persistent worker that is already initialised keeps the seed of the epoch it
    was initialised in, as a torch persistent worker process does.
    """
    seed = setup.seed + worker_id
    if setup.persistent:
        seed = getattr(_thread_state, "seed", seed)
    return _context.WorkerInfo(worker_id, num_workers, seed, dataset)


def start_worker(worker_id: int, setup: WorkerSetup, info: _context.WorkerInfo) -> None:
    """Install ``info`` on the calling worker thread and run ``worker_init_fn`` if due.

    Every epoch without ``persistent_workers``; with it, until it has once succeeded
    on this thread (a failed ``worker_init_fn`` is tried again the next epoch).
    The info stays installed (the epoch re-installs it for each batch and clears it
    while the worker sleeps).  Exceptions from ``worker_init_fn`` propagate.
    """
    _context.set_worker(info)
    if not setup.persistent or getattr(_thread_state, "seed", None) is None:
        if setup.worker_init_fn is not None:
            setup.worker_init_fn(worker_id)
        _thread_state.seed = info.seed


def worker_copy(dataset: Any, persistent: bool) -> Any:
    """This worker thread's own shallow copy of an ``IterableDataset``.

    A torch worker process iterates its own copy of the dataset, so
    ``worker_init_fn`` may configure ``get_worker_info().dataset`` (PyTorch's
    documented ``start``/``end`` sharding example) without touching the user's
    object or the other workers.  Threads get the same with ``copy.copy``: a new
    copy every epoch, or with ``persistent_workers`` one copy kept by the thread
    for the loader's life (as a persistent worker process keeps its copy).

    Raises:
        TypeError: the dataset cannot be copied with ``copy.copy``.
    """
    if persistent:
        cached = getattr(_thread_state, "dataset_copy", None)
        if cached is not None and cached[0] is dataset:
            return cached[1]
    try:
        mine = copy.copy(dataset)
    except Exception as exc:
        raise TypeError(
            f"an IterableDataset used with num_workers > 0 must support copy.copy (each worker "
            f"thread iterates its own copy, as torch's worker processes do): {exc}"
        ) from exc
    if persistent:
        _thread_state.dataset_copy = (dataset, mine)
    return mine
