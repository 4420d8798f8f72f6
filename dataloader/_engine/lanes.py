"""Item lanes: the items of one batch fetched by up to ``item_concurrency`` threads.

The thread that builds a batch is one lane; it asks the ``LanePool`` for up to
``k - 1`` helpers.  Every lane takes the batch's next position from a shared
counter, fetches and transforms that item, and takes another, so uneven items
balance across lanes.  Positions are taken in increasing order, so when an item
fails every earlier position has already been taken: the lanes stop taking new
ones, wait for those in flight, and the batch fails with the first error by
position — the same error the sequential loader raises.

A helper that starts after the batch is complete does nothing, so the batch
thread never waits for a lane that is busy elsewhere; it waits only for lanes
that are inside its batch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from dataloader import _context
from dataloader._constants import LANE_THREAD_PREFIX
from dataloader._engine.errors import INTERRUPTS

__all__ = ["LanePool", "fetch_with_lanes", "start_threads"]


def start_threads(threads: list[threading.Thread], stop_started: Callable[[list[threading.Thread]], None]) -> None:
    """Start ``threads``; if one cannot start (e.g. the OS thread limit), have
    ``stop_started`` stop those that did, then re-raise."""
    try:
        for t in threads:
            t.start()
    except BaseException:
        stop_started([t for t in threads if t.ident is not None])
        raise


class LanePool:
    """Threads that run lane jobs; created with the loader's pool, reused across epochs.

    Args:
        num_threads: number of helper threads (>= 1).

    Thread-safety: ``submit`` may be called from any thread.
    """

    def __init__(self, num_threads: int) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(
                target=_lane_main, args=(self._jobs,), name=f"{LANE_THREAD_PREFIX}-{i}", daemon=True
            )
            for i in range(num_threads)
        ]
        start_threads(self._threads, self._stop_started)

    def _stop_started(self, started: list[threading.Thread]) -> None:
        for _ in started:
            self._jobs.put(None)
        for t in started:
            t.join()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def shutdown(self) -> list[threading.Thread]:
        """Ask the threads to exit after the jobs already queued; return them (to join)."""
        for _ in self._threads:
            self._jobs.put(None)
        return list(self._threads)

    @property
    def threads(self) -> list[threading.Thread]:
        return list(self._threads)


def _lane_main(jobs: queue.SimpleQueue[Callable[[], None] | None]) -> None:
    while True:
        job = jobs.get()
        if job is None:
            return
        job()
        del job


def _no_item(index: Any) -> Any:
    raise AssertionError("a closed lane batch fetched an item")


class _LaneBatch:
    """The shared state of one batch's lanes."""

    def __init__(self, fetch_item: Callable[[Any], Any], indices: Sequence[Any]) -> None:
        self.fetch_item = fetch_item
        self.indices = indices
        self.items: list[Any] = [None] * len(indices)
        self.errors: list[tuple[int, BaseException]] = []
        self.next_pos = 0
        self.inside = 0
        self.closed = False
        self.cond = threading.Condition(threading.Lock())
        self.snapshot = _context.snapshot()

    def drop(self) -> None:
        """Let go of the dataset (``fetch_item``), the indices and the context (under ``cond``,
        with the batch closed: a helper that starts later takes no position)."""
        self.fetch_item = _no_item
        self.indices = ()
        self.snapshot = (None, None)

    def run_lane(self, helper: bool) -> None:
        cond = self.cond
        with cond:
            if self.closed:
                return
            self.inside += 1
        saved = _context.snapshot() if helper else None
        if helper:
            _context.restore(self.snapshot)
        try:
            while True:
                with cond:
                    pos = self.next_pos
                    if self.closed or pos >= len(self.items):
                        self.closed = True
                        break
                    self.next_pos = pos + 1
                try:
                    self.items[pos] = self.fetch_item(self.indices[pos])
                except BaseException as exc:  # carried to the consumer, whatever it is
                    with cond:
                        self.errors.append((pos, exc))
                        self.closed = True
        finally:
            if saved is not None:
                _context.restore(saved)
            with cond:
                self.inside -= 1
                if self.inside == 0:
                    cond.notify_all()


def fetch_with_lanes(
    lanes: LanePool, fetch_item: Callable[[Any], Any], indices: Sequence[Any], k: int
) -> list[Any]:
    """Fetch ``indices`` with up to ``k`` lanes; return the items in order.

    Raises:
        An interrupt (``errors.INTERRUPTS``: Ctrl-C) of any item, else the exception of the
        first failing item by position.  A Ctrl-C while this thread waits for the helpers
        stops them after their current item.
    """
    batch = _LaneBatch(fetch_item, indices)
    for _ in range(min(k, len(indices)) - 1):
        lanes.submit(lambda: batch.run_lane(True))
    try:
        batch.run_lane(False)
        with batch.cond:
            while batch.inside > 0:
                batch.cond.wait()
    except BaseException:
        with batch.cond:
            batch.closed = True
        raise
    with batch.cond:
        # Helpers still queued find the batch closed and return; they must not keep the
        # dataset alive (through fetch_item) after the batch is done.
        batch.drop()
    if batch.errors:
        errors = batch.errors
        # Ctrl-C in any item is raised, not hidden by an earlier item's own error.
        errors.sort(key=lambda e: (not isinstance(e[1], INTERRUPTS), e[0]))
        del errors[1:]
        # Raised from no local: a local holding it would be a reference cycle through its
        # traceback (this frame), keeping the batch's epoch and loader until the cyclic GC.
        raise errors.pop()[1]
    return batch.items
