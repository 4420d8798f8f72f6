"""Building a batch of an ``AsyncDataset``: coroutines on the loop, the rest on a worker.

The builder of a batch (a worker, or the consumer with ``num_workers=0``) hands the loop
thread its batches through a ``Pipeline`` (``async_pipe``; the loop's side: ``async_run``):
at most ``item_concurrency`` item coroutines in flight over the builder's batches, started
in batch order then position order, each result put on the builder's queue as it
completes.  The builder takes the results as they arrive, transforms each one at once (so
CPU work never runs on the loop) and collates the oldest batch once it is complete.

Requests in flight across batch boundaries: a worker (``work_ahead``) claims its next
batch from the epoch's window without waiting while its current one still runs, once every
item of its batches has started and one of its last batch's items has ended, so the items
of batch ``k + 1`` start as those of batch ``k`` end and the event loop never idles while
the worker collates; with ``num_workers`` workers, ``max(num_workers, 1) *
item_concurrency`` coroutines at most are in flight, and the window bounds the batches
claimed.  ``num_workers=0`` fetches one batch at a time, inside ``next()``; so does a worker
of ``num_workers="auto"`` (its gate may withdraw it: it must not hold batches ahead) and a
worker whose ``worker_init_fn`` failed.  Under an error policy the same holds for one
``__getitem__`` coroutine an item, whose batches are then settled (``async_policy``); an
``async def __getitems__`` under a policy fetches one batch at a time (``recover``).

Errors are those of the sequential loader: when the item at position ``p`` fails (its
coroutine or its transform), no position after ``p`` starts, those in flight are
cancelled, those before ``p`` are awaited (they were started already), and the batch
fails with the first error by position; the batches after it are not affected.  A batch
is complete only when every item has a value or an error:

- a coroutine that ends cancelled although this batch did not cancel it (it
  awaited a shared request another task cancelled) fails its item with
  ``ItemCancelledError`` (``dataloader._engine.errors``), the ``CancelledError``
  its cause;
- ``KeyboardInterrupt`` and ``SystemExit`` from a coroutine are its item's error,
  raised by ``next()`` at that batch's position as for a plain ``Dataset`` (asyncio
  raises them out of the event loop too, which then runs on: ``async_loop``).

Cancellation: while it waits, the builder polls its epoch every ``ASYNC_POLL_S``
(the window's ``cancelled``; with ``num_workers=0``, ``AsyncFetcher.cancel``,
which the epoch's ``close()`` calls); once the epoch is closed (``close()``,
dropped, ``break``, ``DataLoader.close()``) or on ``KeyboardInterrupt`` it
cancels the coroutines of every batch it handed the loop and waits (bounded) until
each has ended, so requests in flight are cancelled, not completed, and the build ends
with ``EpochCancelled`` (the epoch's ``next()`` then raises ``StopIteration``).

A failed batch's exception is raised from a frame that no longer holds it (nor
anything holding it): a traceback that reached back to a local holding its own
exception would be a reference cycle keeping the epoch, and with it the loader
and its threads, alive until the cyclic garbage collector ran.
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dataloader import _context
from dataloader._engine.async_loop import LoopRun
from dataloader._engine.async_pipe import ASYNC_POLL_S, EpochCancelled, Pipeline, Sink
from dataloader._engine.build import Builder, BuilderKind
from dataloader._engine.items import MapItems
from dataloader._engine.pool import WorkerSetup
from dataloader._engine.stats import EpochStats
from dataloader._native._ring import Window
from dataloader._native._stats import Recorder

__all__ = ["ASYNC_POLL_S", "AsyncFetcher", "AsyncItems", "EpochCancelled", "work_ahead"]


class AsyncFetcher(Builder):
    """Builds a batch of an ``AsyncDataset`` from its indices (see the module).

    Args:
        dataset: the ``AsyncDataset``.
        auto_collation: work items are lists of indices (False: one index each).
        item_concurrency: item coroutines in flight per builder (>= 1), over its batches;
            with 1 and an ``async def __getitems__``, one coroutine fetches a whole batch.
        loop: the run of the loader's event loop this epoch uses.

    Thread-safety: ``build`` from any number of threads at once (a ``Pipeline`` from the
    thread that made it only); ``cancel`` and ``watch`` from any thread.
    """

    __slots__ = ("_dataset", "_auto", "_k", "_getitems", "_loop", "_window", "_closed", "_turns", "_turn_lock")
    kind = BuilderKind.ASYNC

    def __init__(
        self, dataset: Any, auto_collation: bool, collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None, item_concurrency: int, epoch_key: tuple[int, int], loop: LoopRun,
    ) -> None:
        super().__init__(collate_fn, transform, epoch_key)
        self._dataset = dataset
        self._auto = auto_collation
        self._k = item_concurrency
        self._getitems = auto_collation and item_concurrency == 1 and hasattr(type(dataset), "__getitems__")
        self._loop = loop
        self._window: Window | None = None
        self._closed = False
        # ``__getitems__`` batches fetched one at a time on several loops: their number, so that
        # batch ``k`` runs on loop ``k % n`` (``async_spread.split``); None: one loop or items
        self._turns: itertools.count[int] | None = itertools.count() if self._getitems and loop.peers else None
        self._turn_lock = threading.Lock()

    def watch(self, window: Window) -> None:
        """Abandon batches once ``window`` is cancelled (the epoch's; set by every worker)."""
        self._window = window

    def cancel(self) -> None:
        """Abandon the batch being built and every later one (``num_workers=0``: the
        epoch's ``close()``, from any thread); they end with ``EpochCancelled``."""
        self._closed = True

    def _cancelled(self) -> bool:
        window = self._window
        return self._closed or (window is not None and window.cancelled)

    def batch_indices(self, item: Any) -> Sequence[Any]:
        """The indices a work item fetches (one index: a batch of one)."""
        return item if self._auto else [item]

    @property
    def settles(self) -> bool:
        """Its batches can be settled (``async_pipe``): one ``__getitem__`` coroutine an item."""
        return not self._getitems

    def pipeline(
        self, claim: Callable[[], tuple[Any, ...] | None] | None, settled: bool = False
    ) -> Pipeline:
        """A pipeline for the calling thread's batches; ``claim`` gives it batches ahead
        (a worker's), None: one batch at a time; ``settled``: its batches are settled."""
        return Pipeline(self._loop, self._dataset, self._k, self._getitems, self._transform, claim, self._cancelled,
                        settled)

    def _build(self, item: Any, rec: Recorder) -> Any:
        # The transform runs on this thread as each item arrives: it counts as fetching.
        # ``item``: the work item, or a worker's Pipeline whose oldest batch is the one to build.
        items = self._fetch(item) if isinstance(item, Pipeline) else self.fetch(item)
        return self._collated(items if self._auto else items[0], rec)

    def fetch(self, item: Any) -> list[Any]:
        """The transformed items of work item ``item``, in order, on a pipeline of their own.

        Raises:
            As ``_fetch``; ``EpochCancelled`` also when the epoch was closed before.
        """
        return self._fetch(self._begun(self.batch_indices(item), False))

    def settled(self, batch: Sequence[Any] | Pipeline, wrap: Callable[[Exception], Any]) -> list[Any]:
        """Every item's outcome from one concurrent fetch (a settled batch, ``async_pipe``; only
        where ``settles``): its transformed value, or ``wrap(its exception)``, in order.

        Args:
            batch: the indices to fetch, or a worker's settled ``Pipeline`` whose oldest batch
                is the one to take.
            wrap: what an item's ``Exception`` becomes in the list.

        Raises:
            An interrupt of an item (the first by position); as ``_fetch`` otherwise.
        """
        pipe = batch if isinstance(batch, Pipeline) else self._begun(batch, True)
        sink = self._finished(pipe)
        errors, sink.errors = sink.errors, []
        items = self._items(sink)
        for pos in errors:
            items[pos] = wrap(items[pos])
        return items

    def _begun(self, indices: Sequence[Any], settled: bool) -> Pipeline:
        """A pipeline of its own with ``indices`` handed over as its one batch."""
        if self._cancelled():
            raise EpochCancelled
        pipe = self.pipeline(None, settled)
        turns = self._turns
        if turns is None:
            k = 0
        else:  # its number among this epoch's batches fetched one at a time: the loop it runs on
            with self._turn_lock:
                k = next(turns)
        try:
            pipe.begin(k, indices)
        except RuntimeError:
            if self._cancelled():
                raise EpochCancelled from None
            raise
        return pipe

    def _fetch(self, pipe: Pipeline) -> list[Any]:
        """The transformed items of ``pipe``'s oldest batch, in order.

        Raises:
            The first error by position; ``EpochCancelled`` once the epoch is closed (every
            batch of ``pipe`` is then abandoned); ``RuntimeError`` when the loader's event loop
            stopped under an open epoch.
        """
        return self._items(self._finished(pipe))

    def _finished(self, pipe: Pipeline) -> Sink:
        """``pipe``'s oldest batch once done (``_fetch``'s wait; raises as it does)."""
        try:
            sink = pipe.finish()
        except KeyboardInterrupt:
            pipe.abandon()
            raise
        except BaseException:
            pipe.abandon(everything=self._cancelled())
            if self._cancelled():
                raise EpochCancelled from None
            raise
        return sink

    def _items(self, sink: Sink) -> list[Any]:
        if sink.failed:
            sink.items = []
            raise sink.failed.pop()  # from a frame that no longer refers to it (see the module)
        if sink.filled < len(sink.items):  # the loop's stop cancelled the batch
            if self._cancelled():
                raise EpochCancelled
            raise RuntimeError("the DataLoader's event loop stopped while a batch was being fetched")
        return sink.items


class AsyncItems(MapItems):
    """``MapItems`` whose builder is an ``AsyncFetcher`` watching the epoch's window; its
    workers claim batches ahead (``work_ahead``).

    Args: as ``MapItems``, with ``fetch`` the epoch's ``AsyncFetcher`` (kept typed here:
    each worker's ``start_worker`` hands it the epoch's window).
    """

    def __init__(
        self, indices: Iterator[Any], fetch: AsyncFetcher, setup: WorkerSetup, num_workers: int, stats: EpochStats
    ) -> None:
        super().__init__(indices, fetch, setup, num_workers, stats)
        self._async_fetch = fetch

    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo:
        self._async_fetch.watch(window)
        return super().start_worker(worker_id, window)

    def ahead_loop(self, worker_id: int) -> Callable[[Window, Any, int], None] | None:
        """``work_ahead``, or None for a worker whose ``worker_init_fn`` failed (every
        batch it builds fails: it fetches nothing)."""
        return work_ahead if self._init_failures[worker_id] is None else None

    def begin(self, window: Window, ref: weakref.ref[Any], k: int, task: Any) -> Pipeline:
        """A worker's pipeline, with batch ``k`` (work item ``task``) handed over."""
        fetch = self._async_fetch
        pipe = fetch.pipeline(functools.partial(claim_ahead, window, ref, fetch.batch_indices))
        pipe.begin(k, fetch.batch_indices(task))
        return pipe

    def build_oldest(self, worker_id: int, pipe: Pipeline) -> Any:
        """The oldest batch of ``pipe`` built (as ``build``)."""
        return self._async_fetch.build(pipe, self._recs[worker_id])


def claim_ahead(
    window: Window, ref: weakref.ref[Any], indices: Callable[[Any], Sequence[Any]]
) -> tuple[int, Sequence[Any]] | None:
    """A batch claimed without waiting, as ``(k, its indices)``, or None (none published)."""
    k = window.try_claim()
    if k < 0:
        return None
    shared = ref()
    if shared is None:  # the epoch was collected: it is cancelled, nobody waits for batch k
        return None
    task = shared.tasks[k % shared.size]
    if task is None:  # the epoch was closed (its Shared cleared) since: nobody waits for batch k
        return None
    return k, indices(task)


def work_ahead(window: Window, ref: weakref.ref[Any], worker_id: int) -> None:
    """A worker's loop of an async epoch: ``work.work``'s, with the batches it claimed ahead
    (see the module) built before it claims again.  Holds nothing of the epoch while it
    sleeps in ``claim``; abandons the batches it claimed when the epoch ends."""
    claim, complete, set_worker = window.claim, window.complete, _context.set_worker
    pipe: Pipeline | None = None
    try:
        while True:
            k = pipe.head() if pipe is not None else -1
            if k < 0:
                if pipe is not None:
                    pipe.abandon()  # nothing (the epoch was closed while its feed parked: what it had)
                pipe = None  # nothing ahead: hold nothing while asleep
                k = claim(worker_id)
                if k < 0:
                    return
            shared = ref()
            source = shared.source if shared is not None else None
            if shared is None or source is None:
                return
            slot = k % shared.size
            set_worker(shared.infos[worker_id])
            if pipe is None:
                try:
                    pipe = source.begin(window, ref, k, shared.tasks[slot])
                except RuntimeError:  # the loop was stopped: built (and failed) as one batch
                    shared.results[slot].value = source.build(worker_id, shared.tasks[slot])
            if pipe is not None:
                shared.results[slot].value = source.build_oldest(worker_id, pipe)
            set_worker(None)
            del shared, source
            complete(k)
    finally:
        if pipe is not None:
            pipe.abandon()
