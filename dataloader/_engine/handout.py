"""Which worker pool serves a loader's next epoch.

A loader keeps one shared pool for its life.  The next epoch gets it when its
workers have left the last epoch (``WorkerPool.idle``).  Otherwise:

- the last epoch is still open (nested loops, ``zip(loader, loader)``, several
  threads): the new epoch gets a pool of its own, shut down when it closes;
- the last epoch was closed without waiting (dropped, or Ctrl-C): wait for its
  workers, at most ``SHUTDOWN_JOIN_TIMEOUT_S``;
- a worker did not come back within a close budget (``WorkerPool.stuck``): the
  pool is abandoned (signalled, never reused) with a ``RuntimeWarning`` naming
  the threads, and a fresh shared pool is built;
- after ``fork()`` the inherited pool is abandoned without being signalled (its
  threads do not exist in the child, its locks may be held).

Not thread-safe by itself: the loader calls it under its lock.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.plan import EpochPlan
from dataloader._engine.pool import WorkerPool

__all__ = ["SharedPool"]


class SharedPool:
    """The shared pool of one loader (``owner``), created on the first epoch that needs it.

    Garbage collection of the owner only signals the threads (they exit after their
    current item); ``take`` hands the pool over for ``DataLoader.close`` to join.
    """

    def __init__(self, plan: EpochPlan, owner: Any) -> None:
        self._plan = plan
        self._owner = weakref.ref(owner)
        self._pool: WorkerPool | None = None
        self._finalizer: weakref.finalize | None = None
        self.abandoned_threads = 0

    def for_epoch(self) -> tuple[WorkerPool | None, bool]:
        """The pool for the next epoch, and whether the epoch owns it (shuts it down)."""
        pool = self._pool
        if pool is not None and not pool.in_this_process():
            self.take()  # inherited through fork(): abandoned, never signalled
            pool = None
        if pool is not None and not pool.idle():
            window = pool.last_window()
            cancelled = window is not None and window.cancelled
            if cancelled and not pool.stuck:
                assert window is not None
                window.wait_idle(SHUTDOWN_JOIN_TIMEOUT_S)  # its workers finish their last batch
            if pool.stuck or (cancelled and not pool.idle()):
                self._abandon(pool)
                pool = None
            elif not pool.idle():
                return self._plan.new_pool(), True
        if pool is None:
            pool = self._pool = self._plan.new_pool()
            owner = self._owner()
            if pool is not None and owner is not None:
                self._finalizer = weakref.finalize(owner, pool.shutdown)
        return pool, False

    def take(self) -> WorkerPool | None:
        """Forget the shared pool and return it (the next epoch builds a new one)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        pool, self._pool, self._finalizer = self._pool, None, None
        return pool

    def _abandon(self, pool: WorkerPool) -> None:
        stuck = pool.alive_threads()
        self.abandoned_threads += stuck
        self.take()
        pool.shutdown()  # they exit when their batch finishes; never reused
        warnings.warn(
            f"{stuck} DataLoader worker thread(s) did not come back within their epoch's close() budget "
            f"(close(timeout_s=...), {SHUTDOWN_JOIN_TIMEOUT_S} s by default) and are abandoned ({self.abandoned_threads} by this loader so far); "
            f"the next epoch runs on new threads",
            RuntimeWarning,
            stacklevel=4,
        )
