"""The loader's worker threads: a persistent pool that serves one epoch at a time.

Threads are created on the first epoch that needs them and kept for the
loader's life (no thread is started per epoch).  An epoch hands the pool a job
(an object with ``work(worker_id)``); every worker thread runs it once and goes
back to sleep.  The pool keeps no reference to a job after the epoch closes it,
so an idle pool holds no dataset.

Worker state follows PyTorch: before a thread works on an epoch, it gets that
epoch's ``WorkerInfo`` (so ``get_worker_info()`` works) and, with
``persistent_workers=False``, runs ``worker_init_fn(worker_id)``; with
``persistent_workers=True`` it runs ``worker_init_fn`` only on its first epoch
and keeps that epoch's ``get_worker_info().seed`` for the pool's life (a torch
worker process is seeded once).
"""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S, WORKER_THREAD_PREFIX
from dataloader._engine.lanes import LanePool

__all__ = ["EpochJob", "WorkerPool", "start_worker", "worker_copy"]

# State of the calling worker thread across epochs.  A worker thread belongs to
# one pool for its whole life, so this is per-pool worker state: ``seed`` is the
# seed of the epoch in which the thread last initialised successfully.
_thread_state = threading.local()


class EpochJob(Protocol):
    """What the pool runs: ``work`` is called once per worker thread per epoch."""

    def work(self, worker_id: int) -> None: ...


class WorkerPool:
    """``num_workers`` named daemon threads plus optional item-lane threads.

    Args:
        num_workers: worker threads (>= 0; 0 makes a pool with lanes only).
        num_lanes: lane helper threads for ``item_concurrency > 1`` (>= 0).

    Thread-safety: ``run``, ``clear`` and ``shutdown`` may be called from any
    thread; one epoch runs at a time.
    """

    def __init__(self, num_workers: int, num_lanes: int) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._job: EpochJob | None = None
        self._generation = 0
        self._shutdown = False
        self.lanes = None
        self._threads: list[threading.Thread] = []
        self.lanes = LanePool(num_lanes) if num_lanes > 0 else None
        self._threads = [
            threading.Thread(
                target=_worker_main,
                args=(self, i),
                name=f"{WORKER_THREAD_PREFIX}-{i}",
                daemon=True,
            )
            for i in range(num_workers)
        ]
        self._idents: frozenset[int | None] = frozenset()
        try:
            for t in self._threads:
                t.start()
        except BaseException:
            # e.g. the OS thread limit: stop the threads that did start, then report it.
            self._threads = [t for t in self._threads if t.ident is not None]
            self.shutdown(join=True)
            raise
        self._idents = frozenset(t.ident for t in self._threads)
        if self.lanes is not None:
            self._idents |= frozenset(t.ident for t in self.lanes.threads)

    @property
    def num_workers(self) -> int:
        return len(self._threads)

    def owns_current_thread(self) -> bool:
        """True when called from one of this pool's threads."""
        return threading.get_ident() in self._idents

    def needs_init(self, worker_id: int, persistent: bool) -> bool:
        """Whether worker ``worker_id`` runs ``worker_init_fn`` now.

        Every epoch without ``persistent_workers``; with it, until it has once
        succeeded on this thread (a failed ``worker_init_fn`` is tried again the
        next epoch).  Call it on the worker's own thread.
        """
        return not persistent or getattr(_thread_state, "seed", None) is None

    def run(self, job: EpochJob) -> None:
        """Give every worker thread ``job``; returns at once."""
        with self._cond:
            if self._shutdown:
                raise RuntimeError("the loader's worker pool was shut down")
            self._job = job
            self._generation += 1
            self._cond.notify_all()

    def clear(self, job: EpochJob) -> None:
        """Forget ``job`` if it is the current one (threads that did not start it skip it)."""
        with self._cond:
            if self._job is job:
                self._job = None

    def _next_job(self, seen: int) -> tuple[EpochJob | None, int]:
        with self._cond:
            while not self._shutdown and (self._job is None or self._generation == seen):
                self._cond.wait()
            if self._shutdown:
                return None, seen
            return self._job, self._generation

    def shutdown(self, join: bool = True) -> None:
        """Stop every thread.

        Threads finish the item they are running, then exit.  With ``join`` (and
        unless the interpreter is finalizing) wait for them, at most
        ``SHUTDOWN_JOIN_TIMEOUT_S`` in all.
        """
        with self._cond:
            self._shutdown = True
            self._job = None
            self._cond.notify_all()
        threads = list(self._threads)
        if self.lanes is not None:
            threads += self.lanes.shutdown()
        if not join or sys.is_finalizing():
            return
        me = threading.current_thread()
        deadline = time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S
        for t in threads:
            if t is not me:
                t.join(max(0.0, deadline - time.monotonic()))

    @property
    def alive(self) -> bool:
        return any(t.is_alive() for t in self._threads)


def _worker_main(pool: WorkerPool, worker_id: int) -> None:
    seen = 0
    while True:
        job, seen = pool._next_job(seen)
        if job is None:
            return
        try:
            job.work(worker_id)
        finally:
            del job


def start_worker(
    worker_id: int,
    num_workers: int,
    seed: int,
    dataset: Any,
    worker_init_fn: Callable[[int], None] | None,
    run_init: bool,
) -> None:
    """Install this epoch's ``WorkerInfo`` on the calling thread and run ``worker_init_fn``.

    ``seed`` is this epoch's seed for the worker.  Without ``run_init`` (a
    persistent worker that is already initialised) the thread keeps the seed of
    the epoch it was initialised in, as a torch persistent worker does.

    Exceptions from ``worker_init_fn`` propagate to the caller (the epoch job
    carries them to the consumer).
    """
    if not run_init:
        seed = getattr(_thread_state, "seed", seed)
    _context._set_worker(_context.WorkerInfo(worker_id, num_workers, seed, dataset))
    if run_init:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        _thread_state.seed = seed


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
