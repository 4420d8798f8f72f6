"""What every epoch iterator shares, and the ``num_workers=0`` epoch.

``EpochIterator`` is the surface of one ``iter(loader)``: iteration, ``len``,
``close``, context management, the seed-004 start-failure rule (a failure to
start the epoch is raised once, by the first ``next()``, then the epoch ends)
and the error for ``next()`` from two threads at once.  ``SequentialEpoch``
builds each batch inside ``next()`` from the same work items as ``Epoch`` (see
``dataloader._engine.items``).  ``WorkSource`` is what ``Epoch`` needs from a
work-item source.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

from dataloader import _context
from dataloader._engine.errors import INTERRUPTS
from dataloader._engine.native import NativeJobs
from dataloader._engine.outcome import END, Failure, interrupted
from dataloader._engine.resume import Progress
from dataloader._engine.stats import EpochStats
from dataloader._native._ring import Window

__all__ = ["EpochIterator", "SequentialEpoch", "WorkSource", "Forks", "forked_error"]


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


def forked_error(pid: int) -> RuntimeError:
    return RuntimeError(
        f"this DataLoader iterator was started in process {pid}, not in this one ({os.getpid()}): "
        f"after fork() its worker threads do not exist here; start a new epoch with iter(loader)"
    )


class EpochIterator:
    """Common surface of one epoch: iteration, ``len``, ``close`` and context management."""

    _length: int | None = None
    _start_error: BaseException | None = None

    def __init__(
        self,
        length: int | None,
        start_error: BaseException | None,
        progress: Progress | None,
        stats: EpochStats | None,
    ) -> None:
        self._length = length
        self._start_error = start_error
        self._pid = os.getpid()
        self._forks = Forks.count  # another count in next(): a forked child (forked_error)
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

    def close(self) -> None:
        raise NotImplementedError

    def _raise_start_error(self) -> None:
        """Seed 004: a failure to start the epoch is raised once, then the epoch ends."""
        if self._start_error is not None:
            exc, self._start_error = self._start_error, None
            self._progress.done = True
            self.close()
            raise exc

    @staticmethod
    def _concurrent_next() -> RuntimeError:
        return RuntimeError("next() was called on one DataLoader iterator from two threads at once")


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
    drops the batch and raises ``StopIteration``, as ``Epoch``'s does.
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
        super().__init__(length, start_error, progress, stats)
        self._consumer = self.stats.consumer
        self._items = items
        self._on_close = on_close
        self._keep_alive = keep_alive
        self._inside = threading.Lock()

    def __next__(self) -> Any:
        inside = self._inside
        if not inside.acquire(False):
            raise self._concurrent_next()
        try:
            if self._start_error is not None:
                self._raise_start_error()
            items = self._items  # close() may run on another thread
            if items is None:
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
            if self._items is None:  # closed meanwhile (another thread, or the batch's own code)
                raise StopIteration
            if out is END:
                self._progress.done = True
                self.close()
                raise StopIteration
            if type(out) is Failure:
                if interrupted(out):  # Ctrl-C while building: not a position, and the epoch ends
                    self.close()
                else:
                    self._consumer.delivered(0)
                    self._progress.yielded += 1
                # The raised traceback keeps this frame: it must not keep the epoch (as in
                # Epoch.__next__: an AsyncDataset's exception is made on the event loop thread,
                # which frees it, on free-threaded builds, only when it next wakes up).
                del self
                out.reraise()
            self._consumer.delivered(0)
            self._progress.yielded += 1  # last: a signal before this line leaves the position as it was
            return out
        finally:
            inside.release()

    def close(self) -> None:
        self._items = self._keep_alive = None
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()
