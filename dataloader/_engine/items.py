"""Work-item sources: what varies between a map-style and an iterable epoch.

An epoch (``dataloader._engine.epoch``) asks its source, on the consumer thread,
for the next work item and the worker it is for (``next_item``), and tells it
about every result it takes (``taken``: False means "skip it, not a batch");
worker threads ask it to start (``start_worker``) and to build an item
(``build``).  ``sequential`` gives the ``num_workers=0`` path the same items
built inline.

- ``MapItems``: an item is the next batch of indices, drawn lazily from the
  (batch) sampler only as the window moves; any worker builds any item.
- ``StreamItems``: an item is "the next batch of worker w's stream", published
  round-robin over the live streams (worker 0, 1, ..., skipping those that are
  done), which is PyTorch's order.  A stream that has ended builds ``END``; the
  consumer skips it and drops that worker from the rotation.  Each worker
  iterates its own copy of the dataset (``worker_copy``), on its own thread only.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from dataloader import _context
from dataloader._engine.build import Builder, Stream, StreamBatcher
from dataloader._engine.errors import reported_length, warn_past_length
from dataloader._engine.native import NativeJobs
from dataloader._engine.outcome import END, Failure, no_stop_iteration
from dataloader._engine.pool import WorkerSetup, start_worker, worker_copy, worker_info
from dataloader._engine.stats import EpochStats
from dataloader._native._ring import Window

__all__ = ["MapItems", "StreamItems"]

ANY_WORKER = -1


class MapItems:
    """Map-style work items: batches of indices from ``indices``, built by ``fetch``.

    Args:
        indices: the epoch's (batch) sampler iterator, already started.
        fetch: builds one batch from its indices (the epoch's named builder; one with
            ``rows``, ``native_rows``, gives the source its ``native`` jobs).
        setup: what a worker needs to start the epoch.
        num_workers: workers of the epoch (0 for the sequential path).
        stats: the epoch's statistics (worker ``w`` records into ``stats.workers[w]``).
    """

    owners = 0  # any worker builds any item
    skips = False  # taken() is always True: every result is a batch
    native: NativeJobs | None  # the epoch's native jobs (a native_rows builder's), or None

    def __init__(
        self, indices: Iterator[Any], fetch: Builder, setup: WorkerSetup, num_workers: int, stats: EpochStats
    ) -> None:
        self._recs = stats.workers
        self._indices = indices
        self._fetch = fetch
        self._setup = setup
        self._num_workers = num_workers
        self._init_failures: list[Failure | None] = [None] * num_workers
        rows = fetch.rows
        self.native = NativeJobs(rows, self._recs, self._init_failures) if rows is not None else None

    def next_item(self) -> tuple[Any, int]:
        """The next batch's indices and ``ANY_WORKER`` (raises what the sampler raises)."""
        return next(self._indices), ANY_WORKER

    def taken(self, owner: int, result: Any) -> bool:
        return True

    def describe(self, k: int, owner: int | None) -> str:
        return f"batch {k}"

    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo:
        """Run ``worker_init_fn``; its exception fails every batch this worker builds."""
        info = worker_info(worker_id, self._num_workers, self._setup, self._setup.dataset)
        try:
            start_worker(worker_id, self._setup, info)
        except BaseException as exc:
            self._init_failures[worker_id] = Failure(no_stop_iteration(exc, "worker_init_fn", "starting a worker"))
        return info

    def build(self, worker_id: int, indices: Any) -> Any:
        failure = self._init_failures[worker_id]
        if failure is not None:
            return failure.again()
        return self._fetch.build(indices, self._recs[worker_id])

    def stop_worker(self, worker_id: int) -> None:
        pass

    def ahead_loop(self, worker_id: int) -> Callable[[Window, Any, int], None] | None:
        """A worker loop of the source's own (``work.work``'s alternative), or None."""
        return None

    def sequential(self) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
        """``num_workers=0``: ``(next_item, build)`` for ``SequentialEpoch``."""
        build, rec = self._fetch.build, self._recs[0]
        return self._indices.__next__, lambda indices: build(indices, rec)  # cheaper than a partial's keyword


class StreamItems:
    """``IterableDataset`` work items: the next batch of one worker's stream.

    Args:
        dataset: the ``IterableDataset``.
        batcher: cuts a stream into collated batches.
        setup: what a worker needs to start the epoch.
        num_workers: workers of the epoch (each iterates its own copy).
        stats: the epoch's statistics (worker ``w`` records into ``stats.workers[w]``).
    """

    skips = True  # taken() is False for a stream's END
    native: NativeJobs | None = None  # a stream's batches are built from its iterator, by its own worker

    def __init__(
        self, dataset: Any, batcher: StreamBatcher, setup: WorkerSetup, num_workers: int, stats: EpochStats
    ) -> None:
        self._recs = stats.workers
        self.owners = num_workers
        self._dataset = dataset
        self._batcher = batcher
        self._setup = setup
        self._streams: list[Stream | None] = [None] * num_workers
        self._live = list(range(num_workers))  # consumer only: workers whose END was not taken
        self._last = -1  # consumer only: the worker the last item was published for
        self._taken = 0  # consumer only: batches (and errors) taken so far
        self._dataset_len = reported_length(dataset)

    def next_item(self) -> tuple[Any, int]:
        """``(None, worker)`` for the next live worker after the last one (round-robin).

        Raises:
            StopIteration: every stream has ended.
        """
        live = self._live
        if not live:
            raise StopIteration
        worker = live[bisect.bisect_right(live, self._last) % len(live)]
        self._last = worker
        return None, worker

    def taken(self, owner: int, result: Any) -> bool:
        if result is END:
            i = bisect.bisect_left(self._live, owner)
            if i < len(self._live) and self._live[i] == owner:
                del self._live[i]
            return False
        self._taken += 1
        length = self._dataset_len
        if length is not None and self._taken > length and not isinstance(result, Failure):
            warn_past_length(self._dataset, length, self._taken, self.owners)
        return True

    def describe(self, k: int, owner: int | None) -> str:
        source = "from any worker" if owner is None else f"from worker {owner}"
        return f"batch {self._taken} ({source})"

    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo:
        """Copy the dataset, run ``worker_init_fn`` and start this worker's stream.

        Like a torch worker process, every worker runs ``worker_init_fn`` at the
        start of the epoch, also when the epoch was closed before it woke up.  A
        failure (copy, ``worker_init_fn`` or ``iter()``) is built once, then ``END``.
        """
        setup = self._setup
        info = worker_info(worker_id, self.owners, setup, setup.dataset)
        try:
            mine = worker_copy(setup.dataset, setup.persistent)
            info = worker_info(worker_id, self.owners, setup, mine)
            start_worker(worker_id, setup, info)
            stream = Stream(None) if window.cancelled else Stream(iter(self._prepare(worker_id, mine)))
        except BaseException as exc:
            stream = Stream(None, Failure(no_stop_iteration(exc, "worker_init_fn or iter(dataset)", "starting a worker")))
        self._streams[worker_id] = stream
        return info

    def _prepare(self, worker_id: int, mine: Any) -> Any:
        """The copy worker ``worker_id`` iterates (a hook for ``_engine/stream_state.py``)."""
        return mine

    def build(self, worker_id: int, item: Any) -> Any:
        stream = self._streams[worker_id]
        return END if stream is None else self._batcher.build(stream, self._recs[worker_id])

    def stop_worker(self, worker_id: int) -> None:
        """Drop this worker's stream (on its own thread: a generator finishes there)."""
        self._streams[worker_id] = None

    def ahead_loop(self, worker_id: int) -> Callable[[Window, Any, int], None] | None:
        return None  # a stream's worker builds its own batches one after another

    def sequential(self) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
        """``num_workers=0``: ``(next_item, build)`` for ``SequentialEpoch``; the consumer
        iterates the dataset itself (no copy).

        Raises:
            Exception: what ``iter(dataset)`` raises (a failure to start the epoch).
        """
        try:
            stream = Stream(iter(self._dataset))
        except StopIteration as exc:
            raise no_stop_iteration(exc, "iter(dataset)", "starting the epoch") from exc
        batcher, rec = self._batcher, self._recs[0]
        length = self._dataset_len
        if length is None:
            return itertools.repeat(stream).__next__, functools.partial(batcher.build, rec=rec)
        yielded = 0

        def build(stream: Stream) -> Any:
            nonlocal yielded
            out = batcher.build(stream, rec)
            if out is not END and not isinstance(out, Failure):
                yielded += 1
                if yielded > length:
                    warn_past_length(self._dataset, length, yielded, 0)
            return out

        return itertools.repeat(stream).__next__, build
