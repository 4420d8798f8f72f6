"""One epoch: the consumer's iterator, on the native window or inline.

``Epoch`` (``num_workers > 0``, map-style and iterable alike) runs the claim
window of ``_native._ring``: the consumer asks its work-item source
(``dataloader._engine.items``) for items only as the window moves and publishes
each into its slot (tagged with the worker that must build it, for iterable
streams); worker threads claim, build and complete items; the reorder ring
gives the results back in epoch order (or in completion order with
``in_order=False``).  ``SequentialEpoch`` (``num_workers=0``,
``dataloader._engine.iterator``) builds the same items inside ``next()``.  Both
keep one contract:

- a batch's exception is raised by ``next()`` for that batch, and the next
  ``next()`` continues;
- an exception from the sampler is raised at the position where it happened,
  after every earlier batch, and then the epoch ends; a failure to start the
  epoch is raised once, by the first ``next()`` (seed 004), and the epoch ends;
- an interrupt (``errors.INTERRUPTS``: Ctrl-C, ``sys.exit()``) raised while
  ``next()`` waits, builds inline or draws from the sampler, or carried from a
  worker, is raised at once, does not count as a batch yielded (``Progress``)
  and ends the epoch;
- ``next()`` from two threads at once raises ``RuntimeError``; ``next()`` in a
  process other than the one that started the epoch (after ``fork()``) raises
  ``RuntimeError``;
- ``close()`` (also on ``with`` exit) stops the epoch: no worker starts another
  batch, batches in flight are waited for (at most ``SHUTDOWN_JOIN_TIMEOUT_S``,
  in slices that run signal handlers; not at all from a worker thread, after
  ``fork()`` or at interpreter shutdown) and dropped, and the epoch lets go of
  its loader.  A dropped epoch is closed by a ``weakref.finalize`` that cancels
  the window and waits (bounded) on the native window only: it takes no Python
  lock a worker may hold, and does nothing at interpreter shutdown.

Workers never hold the epoch strongly while they sleep: their job is the native
``Window`` (which owns no Python object) and a weak reference to ``Shared``
(``dataloader._engine.work``: what workers see of an epoch, and their loop);
they take a strong reference only while they build one item.  So an epoch that
its own dataset or ``collate_fn`` refers to is still collected, and its
finalizer then lets the workers go.
"""

from __future__ import annotations

import functools
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S, WAIT_SLICE_S
from dataloader._engine.autotune import EpochTune, usable_cpus
from dataloader._engine.errors import INTERRUPTS, timeout_error
from dataloader._engine.iterator import IN_NEXT, OPEN, EpochIterator, WorkSource
from dataloader._engine.outcome import Failure, interrupted
from dataloader._engine.pool import WorkerPool
from dataloader._engine.resume import Progress
from dataloader._engine.stats import EpochStats
from dataloader._engine.work import Shared, work
from dataloader._native._ring import Window
from dataloader._native._status import Status
from dataloader._native._stats import Recorder

__all__ = ["Epoch", "finalizer_not_at_exit"]



def finalizer_not_at_exit(obj: object, fn: Callable[..., Any], *args: Any) -> weakref.finalize:
    """``weakref.finalize(obj, fn, *args)`` that does not run at interpreter exit."""
    fin = weakref.finalize(obj, fn, *args)
    # typeshed lists finalize's __slots__ without its documented ``atexit`` attribute.
    settable: Any = fin
    settable.atexit = False
    return fin


def _stop_window(window: Window, tune: EpochTune | None, pool: WorkerPool, wait_s: float, finalizer: bool) -> bool:
    """Stop an epoch's workers: cancel the window (no worker starts another batch), wake
    gated workers, and wait at most ``wait_s`` seconds (in slices that run signal handlers)
    for the batches in flight.  No wait at interpreter shutdown (a frozen daemon thread
    never leaves), nor on a thread the batches may wait on (``pool.must_not_wait_here``).

    ``finalizer``: called by ``_finalize``, which takes no Python lock a worker may hold
    (the "auto" gate's only with a bounded wait, not at all on a worker thread).
    Returns False when a batch did not finish in time.
    """
    window.cancel()  # wakes a next() waiting on another thread, which then ends at once
    if sys.is_finalizing():
        return True
    on_worker = pool.must_not_wait_here()
    if tune is not None:  # gated workers leave now, not after their WAIT_SLICE_S wait
        tune.wake((0.0 if on_worker else WAIT_SLICE_S) if finalizer else -1.0)
    return wait_s <= 0 or on_worker or window.wait_idle(wait_s)


def _finalize(window: Window, pool: WorkerPool, owns_pool: bool, pid: int, tune: EpochTune | None) -> None:
    # An epoch dropped without close(): stop its workers as close() does, on the native window
    # only; nothing at all after fork() (the window's and the pool's locks may be held).
    if os.getpid() != pid:
        return
    _stop_window(window, tune, pool, SHUTDOWN_JOIN_TIMEOUT_S, finalizer=True)
    if owns_pool and not sys.is_finalizing():
        pool.shutdown()


_RUNNING = (OPEN, IN_NEXT)  # not closed: _fill publishes more items


class Epoch(EpochIterator):
    """``num_workers > 0``: worker threads fill a bounded, ordered window of batches.

    Args:
        source: the epoch's work items (``MapItems`` or ``StreamItems``).
        pool: the worker pool that serves this epoch (idle).
        owns_pool: the epoch shuts ``pool`` down when it closes (a pool of its own).
        window: batches being built or waiting (the plan's window).
        length: ``len()`` of the epoch, or None.
        timeout_s: seconds ``next()`` waits for one batch; 0 waits without limit.
        in_order: False yields batches in completion order.
        keep_alive: kept referenced until ``close()`` (the loader, as torch's iterator does).
        start_error: the exception that stopped the epoch from starting, or None.
        stats: the epoch's statistics (the consumer records its waits here).
        tune: the worker gate and probe of ``num_workers="auto"``, or None.
        inline: builds a work item on the consumer thread (``"auto"`` with no active
            worker: ``tune.active == 0``), or None where that is not allowed.
        help_rec: the consumer's recorder for the native batches it builds itself while
            the one it needs is not ready; None: the consumer never builds one (then
            workers build native batches with no Python all the same: ``_rowjobs``).
    """

    _bound_to_process = True  # its worker threads do not exist in a forked child

    def __init__(
        self,
        *,
        source: WorkSource,
        pool: WorkerPool,
        owns_pool: bool,
        window: int,
        length: int | None,
        timeout_s: float,
        in_order: bool,
        keep_alive: Any = None,
        start_error: BaseException | None = None,
        progress: Progress | None = None,
        stats: EpochStats | None = None,
        tune: EpochTune | None = None,
        inline: Callable[[Any], Any] | None = None,
        help_rec: Recorder | None = None,
    ) -> None:
        super().__init__(length, start_error, progress, stats, keep_alive)
        self._consumer = self.stats.consumer
        self._tune = tune
        self._inline = inline
        self._timeout_s = timeout_s
        self._in_order = in_order
        self._pool: WorkerPool | None = pool
        self._window = Window(window, source.owners, usable_cpus())
        self._source: WorkSource | None = source
        # Native batches (a native_rows builder, _engine/native.py): workers build them with no
        # Python, and the consumer builds them too while the batch it needs is not ready.
        self._help_rec = help_rec
        native = source.native if help_rec is not None else None
        self._native = native
        jobs = native.jobs(window) if native is not None else None
        self._jobs = jobs
        self._shared = Shared(source, window, pool.num_workers, tune, jobs)
        if tune is not None:
            tune.bind(self._window)
        self._owner = [-1] * window  # the worker each published slot is for (consumer only)
        self._exhausted = False
        self._pending_error: tuple[int, BaseException] | None = None
        self._own_pool = pool if owns_pool else None
        # At exit the daemon threads simply stop.
        self._finalizer = finalizer_not_at_exit(self, _finalize, self._window, pool, owns_pool, self._pid, tune)
        if start_error is not None:
            self._exhausted = True
            self._window.finish()
            return
        self._fill()
        pool.run(self._window, functools.partial(work, self._window, weakref.ref(self._shared)))

    def _fill(self) -> None:
        """Publish items until the window is full or the source is exhausted."""
        window, shared, source = self._window, self._shared, self._source
        if source is None:
            return
        limit = window.base + shared.size
        next_item = source.next_item
        published = window.published
        while published < limit and not self._exhausted and self._state in _RUNNING:
            try:
                task, owner = next_item()
            except StopIteration:
                self._exhausted = True
                window.finish()
                return
            except INTERRUPTS:
                # Ctrl-C while the sampler ran: stop at once, as a wait does (not a position).
                self.close(timeout_s=0.0)
                raise
            except BaseException as exc:  # raised by next() at its position, after every earlier batch
                self._pending_error = (window.published, exc)
                self._exhausted = True
                window.finish()
                return
            slot = published % shared.size
            shared.tasks[slot] = task
            self._owner[slot] = owner
            if self._jobs is not None and self._native is not None:
                shared.prepared[slot] = self._native.prepare(self._jobs, slot, task)
            if window.publish(owner) == Status.CANCELLED:  # by a close() meanwhile
                return
            published += 1

    def _next(self) -> Any:
        # The consumer's path of every batch: attributes are read once into locals (3.13t does
        # not specialise attribute reads; each costs a type lookup).
        window, shared, consumer, jobs = self._window, self._shared, self._consumer, self._jobs
        consumer.begin()
        k = window.base
        in_flight = window.claimed - k
        in_order = self._in_order
        while True:
            if k == window.published:
                self._end_of_epoch(k)
            try:
                if self._inline is not None and self._tune is not None and self._tune.active == 0:
                    self._build_inline()
                elif jobs is not None and self._help_rec is not None:
                    jobs.help(window, k if in_order else -1, self._help_rec)
                r = window.wait(k, self._timeout_s) if in_order else window.wait_any(self._timeout_s)
            except INTERRUPTS:
                # Ctrl-C (waiting, building inline): stop now; state_dict() resumes at batch k.
                self.close(timeout_s=0.0)
                raise
            if r < 0 or self._state is not IN_NEXT:
                self._raise_status(r, k)
            slot = r % shared.size
            cell, owner = shared.results[slot], self._owner[slot]
            result, cell.value = cell.value, None
            shared.tasks[slot] = None
            if jobs is not None and (prepared := shared.prepared[slot]) is not None:
                shared.prepared[slot] = None
                error = jobs.take(slot)
                if result is None:  # its job filled it (else a thread whose worker_init_fn failed built it)
                    result = prepared if error is None else Failure(error)
            window.release(r)
            if interrupted(result):  # a worker's Ctrl-C / sys.exit(): not a position; the epoch ends
                self.close(timeout_s=0.0)
                return result
            source = self._source
            keep = source is not None and (not source.skips or source.taken(owner, result))
            self._fill()
            if not keep:
                if source is None:
                    raise StopIteration
                k = window.base
                continue  # an ended stream: not a batch
            consumer.delivered(in_flight)
            if self._tune is not None:
                self._tune.tick(consumer.count)
            self._progress.yielded += 1  # last: a signal before this line leaves the position as it was
            return result  # a Failure is raised by __next__, outside this frame

    def _build_inline(self) -> None:
        """Build the next unclaimed batch here, on the consumer thread (as ``num_workers=0``
        does: ``get_worker_info()`` is None) while ``"auto"`` runs with no active worker."""
        window, shared, inline, jobs = self._window, self._shared, self._inline, self._jobs
        j = window.try_claim() if inline is not None else -1
        if j < 0 or inline is None:
            return
        slot = j % shared.size
        try:
            if jobs is None or self._help_rec is None or not jobs.run(window, j, self._help_rec):
                out = inline(shared.tasks[slot])
                if interrupted(out):  # Ctrl-C while building here: raised now (_next ends the epoch)
                    out.reraise()
                shared.results[slot].value = out
        finally:
            window.complete(j)

    def _raise_status(self, status: int, k: int) -> None:
        """The one translation of the window's statuses into what ``next()`` raises."""
        if status == Status.TIMED_OUT and self._state is IN_NEXT:
            source = self._source
            owner = self._owner[k % self._shared.size] if self._in_order else None
            what = source.describe(k, owner) if source is not None else f"batch {k}"
            raise timeout_error(self._timeout_s, f"{what} was not ready")
        raise StopIteration  # Status.CANCELLED, or closed meanwhile

    def _end_of_epoch(self, k: int) -> None:
        pending, self._pending_error = self._pending_error, None
        self._progress.done = True
        if self._tune is not None:
            self._tune.finished()
        self.close()
        if pending is not None and pending[0] == k:
            raise pending[1]
        raise StopIteration

    def _stop(self, timeout_s: float | None) -> None:
        pool = self._pool
        wait_s = SHUTDOWN_JOIN_TIMEOUT_S if timeout_s is None else timeout_s
        if pool is not None and not _stop_window(self._window, self._tune, pool, wait_s, finalizer=False):
            pool.mark_stuck()  # a batch did not finish in time: the pool is never reused

    def _release(self) -> None:
        self._finalizer.detach()
        own = self._own_pool
        self._source = self._pool = self._own_pool = self._native = None
        self._shared.clear()
        if own is not None:
            own.shutdown()

    def _abandon(self) -> None:
        # After fork(): never touch the window or the pool (their locks may be held).
        self._source = self._pool = self._own_pool = None
        self._finalizer.detach()
