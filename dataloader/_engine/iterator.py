"""What every epoch iterator shares, and the ``num_workers=0`` epoch.

``EpochIterator`` is the surface of one ``iter(loader)``: iteration, ``len``,
``close(timeout_s)``, context management, and the epoch's life cycle: one
``State`` (open, in ``next()``, closing, closed) under one lock, with the
seed-004 start-failure rule (a failure to start the epoch is raised once, by the
first ``next()``, then the epoch ends), the error for ``next()`` from two threads
at once and the one way an epoch ends (``close()``).  ``SequentialEpoch`` builds
each batch inside ``next()`` from the same work items as ``Epoch`` (see
``dataloader._engine.items``).  ``WorkSource`` is what ``Epoch`` needs from a
work-item source.
"""

from __future__ import annotations

import enum
import math
import numbers
import os
import threading
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from dataloader import _context
from dataloader._engine.errors import INTERRUPTS
from dataloader._engine.native import NativeJobs
from dataloader._engine.outcome import END, Failure, interrupted
from dataloader._engine.resume import Progress
from dataloader._engine.stats import EpochStats
from dataloader._native._ring import Window

__all__ = [
    "CLOSED", "CLOSING", "IN_NEXT", "OPEN", "EpochIterator", "Forks", "SequentialEpoch", "State", "WorkSource",
    "forked_error",
]


class Forks:
    """``count``: fork()s this process came out of (the child adds one, while it is the only
    thread); an epoch compares the count it started with at every ``next()``, which costs
    less than ``os.getpid()`` (a system call)."""

    count = 0


def _forked() -> None:
    Forks.count += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


class WorkSource(Protocol):
    """What an epoch needs from its work items (see ``dataloader._engine.items``)."""

    owners: int
    skips: bool  # taken() may return False (else every result is a batch and it is not called)
    native: NativeJobs | None  # the epoch's native batch jobs (dataloader._engine.native), or None

    def next_item(self) -> tuple[Any, int]: ...
    def taken(self, owner: int, result: Any) -> bool: ...
    def describe(self, k: int, owner: int | None) -> str: ...
    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo: ...
    def build(self, worker_id: int, item: Any) -> Any: ...
    def stop_worker(self, worker_id: int) -> None: ...
    def ahead_loop(self, worker_id: int) -> Callable[[Window, Any, int], None] | None: ...


def forked_error(pid: int) -> RuntimeError:
    return RuntimeError(
        f"this DataLoader iterator was started in process {pid}, not in this one ({os.getpid()}): "
        f"after fork() its worker threads do not exist here; start a new epoch with iter(loader)"
    )


class State(enum.Enum):
    """Where one epoch is in its life (``EpochIterator``; one lock guards the moves).

    ``OPEN`` -> ``IN_NEXT`` (a thread entered ``next()``) -> ``OPEN`` (it returned or raised);
    ``OPEN`` -> ``CLOSED`` (``close()``: it stops the producers, then lets go of the epoch);
    ``IN_NEXT`` -> ``CLOSING`` (``close()`` while a thread is inside ``next()``: it stops the
    producers, and that ``next()`` lets go of the epoch on its way out) -> ``CLOSED``.
    """

    OPEN = "open"
    IN_NEXT = "in next()"
    CLOSING = "closing"
    CLOSED = "closed"


# The members as plain module names: next() reads them on every batch, and a read through the
# Enum class costs about 0.2 µs on 3.11 (a module global: a dict lookup).
OPEN, IN_NEXT, CLOSING, CLOSED = State.OPEN, State.IN_NEXT, State.CLOSING, State.CLOSED


class EpochIterator:
    """Common surface of one epoch: iteration, ``len``, ``close`` and context management, and
    its life cycle (``State``), the same for every epoch.

    A subclass gives ``_next()`` (one batch, a ``Failure``, or raises; it ends the epoch with
    ``close()``), ``_stop(timeout_s)`` (no producer starts another batch; wait, bounded, for
    those in flight) and ``_release()`` (drop every reference of the epoch, once, on the
    thread that ends it); ``_abandon()`` replaces both in a process other than the one that
    started the epoch (after ``fork()``), where no lock nor thread of the epoch may be used.
    An epoch ends in ``close()`` only: exhaustion, a sampler's error, a failure to start,
    an interrupt and ``with`` exit all call it; ``Epoch``'s finalizer (a dropped epoch) stops
    the same window without the object.
    """

    _length: int | None = None
    _start_error: BaseException | None = None
    _bound_to_process = False  # next() after fork() raises forked_error (threads do not fork)

    def __init__(
        self,
        length: int | None,
        start_error: BaseException | None,
        progress: Progress | None,
        stats: EpochStats | None,
        keep_alive: Any = None,
    ) -> None:
        self._length = length
        self._start_error = start_error
        self._keep_alive = keep_alive  # the loader, as torch's iterator keeps it: until the end
        self._pid = os.getpid()
        self._forks = Forks.count  # another count in next(): a forked child (forked_error)
        self._lock = threading.Lock()  # guards _state and _start_error; never held while waiting
        self._state = OPEN
        # Batches returned (or raised) by next() and the end, for DataLoader.state_dict().
        self._progress = progress if progress is not None else Progress(0)
        self.stats = stats if stats is not None else EpochStats(0, 0)  # recorders of this epoch

    def __iter__(self) -> EpochIterator:
        return self

    def __len__(self) -> int:
        if self._length is None:
            raise TypeError("this epoch has no length (its sampler or dataset has no __len__)")
        return self._length

    def __enter__(self) -> EpochIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __next__(self) -> Any:
        # close() may come from any thread at any time, also from code that next() runs (the
        # sampler, the dataset).  It never waits for next(): it stops the producers (waking a
        # wait in next()) and this next() lets go of the epoch on its way out.
        if self._bound_to_process and self._forks != Forks.count:
            raise forked_error(self._pid)
        lock = self._lock
        with lock:
            entered = self._state is OPEN and self._start_error is None
            if entered:
                self._state = IN_NEXT
        if not entered:
            self._enter_or_raise()
        try:
            result = self._next()
        finally:
            with lock:  # IN_NEXT -> OPEN, or CLOSING -> CLOSED and let go of the epoch
                closing = self._state is CLOSING
                self._state = CLOSED if closing else OPEN
            if closing:
                self._release_all()
        if type(result) is Failure:
            # The raised traceback keeps this frame (and _next's, the f_back of a builder's
            # frame): neither may keep the epoch.  A worker (or an AsyncDataset's event loop)
            # made the exception, and on free-threaded builds an object is freed by the thread
            # that made it (biased reference counting): a thread that sleeps until the epoch is
            # finalized, so a traceback that held the epoch would keep both alive until the
            # cyclic GC ran.
            del self
            result.reraise()
        return result

    def _enter_or_raise(self) -> None:
        """``next()`` found the epoch not ``OPEN`` or a failure to start pending: enter
        (``OPEN`` again meanwhile), or raise what ``next()`` raises.

        Raises:
            the failure to start the epoch (seed 004: once, by the first ``next()``, even
                after ``close()``), after ending the epoch; ``StopIteration`` once closed;
                ``RuntimeError`` while another thread is inside ``next()``.
        """
        with self._lock:
            start_error, self._start_error = self._start_error, None
            state = self._state
            if start_error is None and state is OPEN:
                self._state = IN_NEXT
                return
        if start_error is not None:
            self._progress.done = True
            self.close()
            raise start_error
        if state is IN_NEXT:
            raise RuntimeError("next() was called on one DataLoader iterator from two threads at once")
        raise StopIteration

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called or the epoch ended (read without the lock: a
        snapshot, True for good once True)."""
        return self._state is CLOSED or self._state is CLOSING

    def __copy__(self) -> NoReturn:
        raise TypeError(f"a {type(self).__name__} (one epoch of a DataLoader) cannot be copied; start another with iter(loader)")

    def close(self, timeout_s: float | None = None) -> None:
        """End the epoch: its ``next()`` raises ``StopIteration`` from now on.

        No batch is started after it; the batches in flight are waited for, then dropped,
        and the epoch lets go of its loader.  The wait runs in slices that run signal
        handlers (Ctrl-C interrupts it); it is skipped on a thread the batches may wait on
        (a worker, inside ``worker_init_fn`` or ``collate_fn``, or an ``AsyncDataset``'s
        event loop), at interpreter shutdown, and in a process other than the one that
        started the epoch (after ``fork()``: close returns at once, touching no lock or
        thread of the parent's).  A second ``close()`` returns at once.

        Args:
            timeout_s: the most seconds to wait for the batches in flight: None waits
                ``SHUTDOWN_JOIN_TIMEOUT_S`` (5 s); 0 (or less) does not wait; ``inf`` (or
                anything over a year) waits a year.  A worker that does not come back in
                time is abandoned (its pool is never reused).

        Thread-safety: may be called from any thread, also while another thread is inside
        ``next()``, which then drops its batch and raises ``StopIteration``; that ``next()``
        lets go of the epoch on its way out.

        Raises:
            TypeError: ``timeout_s`` is not None or a real number (before anything is closed).
            ValueError: ``timeout_s`` is NaN (before anything is closed).
            KeyboardInterrupt: (or what a signal handler raises) during the wait; the epoch
                is closed all the same.
        """
        timeout_s = _close_budget(timeout_s)
        if os.getpid() != self._pid:
            self._state = CLOSED  # no lock: a thread of the parent's may have held it
            self._keep_alive = None
            self._abandon()
            return
        with self._lock:
            state = self._state
            if state is CLOSING or state is CLOSED:
                return
            self._state = CLOSED if state is OPEN else CLOSING
        try:
            self._stop(timeout_s)
        finally:
            if state is OPEN:
                self._release_all()

    def withdraw(self) -> None:
        """End an epoch that was never handed out (``DataLoader.start``'s, replaced or dropped by
        ``load_state_dict``, ``seek`` or ``close``): ``close()``, with nothing said to anyone
        else (``even.EvenEpoch`` does not vote: this rank took no step of it)."""
        self.close()

    def _release_all(self) -> None:
        try:
            self._release()
        finally:
            self._keep_alive = None

    def _next(self) -> Any:
        raise NotImplementedError

    def _stop(self, timeout_s: float | None) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def _abandon(self) -> None:
        self._stop(0.0)
        self._release()


class SequentialEpoch(EpochIterator):
    """``num_workers=0``: the sampler, the dataset and collation run inside ``next()``.

    An interrupt (``errors.INTERRUPTS``: Ctrl-C, ``sys.exit()``) raised while ``next()`` draws
    or builds a batch propagates, does not count that batch and ends the epoch (the next
    ``next()`` raises ``StopIteration``); ``DataLoader.state_dict()`` then resumes at it.

    Args:
        items: ``(next_item, build)`` from the source's ``sequential()``: ``next_item()``
            returns the next work item (``StopIteration`` at the end; the sampler's
            exceptions propagate) and ``build(item)`` the batch, a ``Failure`` or ``END``;
            None when the epoch could not start.
        length: ``len()`` of the epoch, or None.
        start_error: the exception that stopped the epoch from starting, or None.
        stats: the epoch's statistics (``build`` records into its recorder 0).
        on_close: called (once) by ``close()``, from any thread, to wake a ``build`` that
            waits (an ``AsyncDataset``'s, on the event loop), or None.
        keep_alive: kept referenced until the epoch ends or ``close()`` (the loader, as
            ``Epoch`` keeps it: ``for batch in DataLoader(dataset)`` keeps only the iterator,
            and a collected loader stops its ``AsyncDataset``'s event loop).

    ``close()`` from another thread while ``next()`` builds a batch: that ``next()``
    drops the batch and raises ``StopIteration``, as ``Epoch``'s does.  ``close()`` does
    not wait for it (``timeout_s`` is not used: no other thread builds this epoch's batches).
    """

    def __init__(
        self,
        *,
        items: tuple[Callable[[], Any], Callable[[Any], Any]] | None,
        length: int | None,
        start_error: BaseException | None = None,
        progress: Progress | None = None,
        stats: EpochStats | None = None,
        on_close: Callable[[], None] | None = None,
        keep_alive: Any = None,
    ) -> None:
        super().__init__(length, start_error, progress, stats, keep_alive)
        self._consumer = self.stats.consumer
        self._items = items
        self._on_close = on_close

    def _next(self) -> Any:
        items = self._items
        if items is None:  # the epoch could not start (its failure was raised once)
            raise StopIteration
        self._consumer.begin()
        try:
            item = items[0]()
        except BaseException as exc:  # the end, or the sampler failed: raised at its position
            # An interrupt (errors.INTERRUPTS) is no end: the position stays for state_dict().
            self._progress.done = not isinstance(exc, INTERRUPTS)
            self.close()
            raise
        try:
            out = items[1](item)
        except INTERRUPTS:  # a signal outside the builder's own try: as an interrupted build
            self.close()
            raise
        if self._state is not IN_NEXT:  # closed meanwhile (another thread, or the batch's own code)
            raise StopIteration
        if out is END:
            self._progress.done = True
            self.close()
            raise StopIteration
        if type(out) is Failure:  # raised by __next__
            if interrupted(out):  # Ctrl-C while building: not a position, and the epoch ends
                self.close()
            else:
                self._consumer.delivered(0)
                self._progress.yielded += 1
            # This frame outlives the call: it is the f_back of the builder's frame that the
            # exception's traceback keeps (see __next__), so it must not keep the epoch.
            del self
            return out
        self._consumer.delivered(0)
        self._progress.yielded += 1  # last: a signal before this line leaves the position as it was
        return out

    def _stop(self, timeout_s: float | None) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()

    def _release(self) -> None:
        self._items = None


_MAX_CLOSE_BUDGET_S = 365 * 24 * 3600.0  # what timeout_s=inf waits (the native wait counts int64 us)


def _close_budget(timeout_s: Any) -> float | None:
    """``close()``'s ``timeout_s`` checked: None, or a float in ``[0, a year]``.

    Raises:
        TypeError: not None or a real number (a bool is refused too).
        ValueError: NaN.
    """
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
        raise TypeError(f"close(timeout_s=...) takes None or seconds as a number, got {timeout_s!r}")
    try:
        value = float(timeout_s)
    except OverflowError:  # an int past float range: longer than any budget
        value = math.inf
    if math.isnan(value):
        raise ValueError("close(timeout_s=nan): give seconds, 0 to not wait, or None for the default budget")
    return min(max(value, 0.0), _MAX_CLOSE_BUDGET_S)
