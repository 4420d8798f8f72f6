"""Building one batch from one work item: fetch (or draw), transform, collate.

A builder is made once per epoch and called by whichever thread builds a batch
(a worker, or the consumer when ``num_workers=0``).  ``Builder.build`` is the one
place that sets the thread's ``item_rng`` epoch, turns a ``StopIteration`` into
a ``RuntimeError`` (PEP 479: it would end the caller's loop, a silently short
epoch) and catches every exception into a ``Failure``, which the consumer
re-raises for that batch.

- ``Fetcher`` (map-style): a work item is a batch of indices.
- ``StreamBatcher`` (``IterableDataset``): a work item is "the next batch of this
  worker's stream"; it returns ``END`` once the stream has ended.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from types import FrameType, TracebackType
from typing import Any

import numpy as np

from dataloader import _context
from dataloader._collation.default import collate_columns, default_collate
from dataloader._datasets.array import ArrayDataset
from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.fetch import awaitable_item_error, check_item_count, check_items_not_awaitable
from dataloader._engine.errors import INTERRUPTS
from dataloader._engine.lanes import LanePool, fetch_with_lanes
from dataloader._indices import as_index_array
from dataloader._native._awaitable import is_awaitable
from dataloader._native._arrayrows import take_columns
from dataloader._native._rowjobs import RowJobs, can_run
from dataloader._native._stats import Recorder
from dataloader._sampling.permute import PermutationSpan

__all__ = ["END", "Builder", "Failure", "Fetcher", "Stream", "StreamBatcher", "interrupted"]

END: Any = type("End", (), {"__repr__": lambda self: "END", "__slots__": ()})()
"""What ``StreamBatcher`` returns for a stream that has ended (never a batch)."""


class Failure:
    """An exception raised while building a batch, carried to the consumer.

    The exception object keeps its original type and traceback; ``reraise``
    raises it on the consumer thread, where Python appends the consumer's frames.
    Each raise starts again from the traceback the worker caught, so one exception
    carried for several batches (a failing ``worker_init_fn``) does not grow.
    """

    __slots__ = ("exc", "tb")

    def __init__(self, exc: BaseException, tb: TracebackType | None = None) -> None:
        if tb is None:
            # Drop the engine's own leading frames: the worker loop's frame is still running
            # on its thread, and a traceback that holds it keeps the epoch's locals alive and
            # lets the consumer read a frame while its own thread tears it down (a data race
            # inside CPython that ThreadSanitizer reports on free-threaded builds).
            tb = _without_engine_frames(exc.__traceback__)
            exc.__traceback__ = tb
        self.exc: BaseException | None = exc
        self.tb = tb

    def again(self) -> Failure:
        """A new ``Failure`` of the same exception and traceback (one per batch)."""
        assert self.exc is not None
        return Failure(self.exc, self.tb)

    def reraise(self) -> None:
        exc, tb = self.exc, self.tb
        self.exc = self.tb = None
        assert exc is not None
        try:
            raise exc.with_traceback(tb)
        finally:
            del exc, tb


def interrupted(out: Any) -> bool:
    """``out`` is a ``Failure`` of an interrupt (``INTERRUPTS``: Ctrl-C, ``sys.exit()``): not
    the batch's own error, so ``next()`` raises it without counting a position."""
    return type(out) is Failure and isinstance(out.exc, INTERRUPTS)


def no_stop_iteration(exc: BaseException, who: str, doing: str) -> BaseException:
    """The one ``StopIteration`` rule: user code's ``StopIteration`` is a ``RuntimeError``
    (its cause), never the end of an epoch (PEP 479); any other exception is returned as is."""
    if not isinstance(exc, StopIteration):
        return exc
    error = RuntimeError(f"{who} raised StopIteration while {doing}")
    error.__cause__ = exc
    return error


def _without_engine_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` past its leading entries that are frames still running on this thread (the
    worker's own loop: the user's frames, and any finished frame, stay).

    Only frame identities are compared: reading another thread's frame (a lane's) while it
    is torn down is a data race inside CPython on free-threaded builds.
    """
    running = set()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        running.add(id(frame))
        frame = frame.f_back
    while tb is not None and tb.tb_next is not None and id(tb.tb_frame) in running:
        tb = tb.tb_next
    return tb


class Builder:
    """What every builder shares: ``collate_fn``, ``transform`` and the ``item_rng`` epoch.

    Args:
        collate_fn: called with the list of items (or the single item).
        transform: ``transform(item) -> item``, run per item before collation, or None.
        epoch_key: ``(base_seed, epoch)`` for ``item_rng``.

    Thread-safety: stateless between calls; any number of threads may build at once.
    """

    __slots__ = ("_collate", "_transform", "_epoch_key")

    def __init__(
        self, collate_fn: Callable[[Any], Any], transform: Callable[[Any], Any] | None, epoch_key: tuple[int, int]
    ) -> None:
        self._collate = collate_fn
        self._transform = transform
        self._epoch_key = epoch_key

    def build(self, item: Any, rec: Recorder) -> Any:
        """The batch for work item ``item``, a ``Failure`` (its exception), or ``END``.

        The thread's ``item_rng`` epoch is set for the call and restored afterwards,
        so the consumer thread (``num_workers=0``) keeps no trace of the epoch.
        ``rec`` (the calling thread's own) gets the batch's stage times; a batch
        that failed counts as fetching until the failure.
        """
        local = _context.thread_state()
        saved = local.epoch_key
        local.epoch_key = self._epoch_key
        rec.start()
        try:
            return self._build(item, rec)
        except StopIteration as exc:
            rec.failed()
            return Failure(no_stop_iteration(exc, "the dataset, transform or collate_fn", "building a batch"))
        except BaseException as exc:  # carried to the consumer, whatever it is
            rec.failed()
            return Failure(exc)
        finally:
            local.epoch_key = saved

    def _build(self, item: Any, rec: Recorder) -> Any:
        raise NotImplementedError


class Fetcher(Builder):
    """Builds a map-style batch from its indices.

    Args:
        dataset: the map-style dataset.
        auto_collation: True when work items are lists of indices (``batch_size`` or
            ``batch_sampler`` set); False for ``batch_size=None``, where each item is
            one index and ``collate_fn`` converts one item.
        lanes: a ``LanePool`` when ``item_concurrency > 1``, else None.
        item_concurrency: lanes per batch (>= 1).

    An awaitable returned in place of an item (a plain ``__getitem__`` returning
    ``self.load(i)`` of an ``async def load``, which the loader cannot refuse when it is
    built as it refuses ``async def __getitem__``) fails that item with ``TypeError``, as
    if ``__getitem__`` had raised it, and is closed if it is a coroutine.  Every item is
    checked, not only a batch's first: a dataset may return a coroutine for some indices
    only (a cache miss).  The check reads one C type slot (``_native._awaitable``): free
    items cost 13 ns more each on 3.11 and 34 ns on 3.13t (3.3 and 8.6 us a batch of 256,
    +6%), a ``__getitems__`` batch 0.7 and 1.2 us.
    """

    __slots__ = ("_dataset", "_auto", "_lanes", "_k", "_getitems", "_native", "_rows", "_y_shape")

    def __init__(
        self,
        dataset: Any,
        auto_collation: bool,
        collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
        lanes: LanePool | None,
        item_concurrency: int,
        epoch_key: tuple[int, int],
    ) -> None:
        super().__init__(collate_fn, transform, epoch_key)
        self._dataset = dataset
        self._auto = auto_collation
        self._lanes = lanes
        self._k = item_concurrency
        self._getitems = getattr(dataset, "__getitems__", None)
        # The native batch path: an ArrayDataset (not a subclass) collated by default_collate,
        # no transform, one lane.  Same batches as __getitems__ + default_collate, without the
        # BatchedItems in between (docs/performance-notes.md, "In-memory gather and per-batch overhead").
        plain = auto_collation and transform is None and collate_fn is default_collate and item_concurrency == 1
        self._native = type(dataset) is ArrayDataset and plain
        # The native batch jobs (an ArrayDataset's arrays or an NdfDataset's Reader; not a
        # subclass's): workers build these batches with no Python (_native/_rowjobs.pyx).
        rows = getattr(dataset, "_native_rows", None) if plain else None
        self._rows = rows() if rows is not None else None
        # An NdfDataset(scalar_labels=True) gathers y as (B,): _native_y_shape() is ()
        y_shape = getattr(dataset, "_native_y_shape", None) if self._rows is not None else None
        self._y_shape = y_shape() if y_shape is not None else None

    def _build(self, indices: Any, rec: Recorder) -> Any:
        items: Any
        if type(indices) is PermutationSpan:  # a batch of native jobs built here after all
            indices = indices.rows()
        if self._native and (out := self._native_batch(indices, rec)) is not None:
            return out
        if not self._auto:
            items = self.fetch_item(indices)
        elif self._k > 1 and self._lanes is not None:
            items = fetch_with_lanes(self._lanes, self.fetch_item, indices, self._k)
        elif self._getitems is not None:
            items = self._getitems(indices)
            if is_awaitable(items):
                raise awaitable_item_error(self._dataset, items, "__getitems__", indices)
            items = check_items_not_awaitable(self._dataset, check_item_count(items, len(indices)), indices)
            if self._transform is not None:
                rec.fetched()
                items = self._transform_all(indices, items)
                rec.transformed()
                out = self._collate(items)
                rec.done()
                return out
        else:
            items = self._fetch_all(indices)
        rec.fetched()
        out = self._collate(items)
        rec.done()
        return out

    def _native_batch(self, indices: Any, rec: Recorder) -> Any:
        """The batch of an ``ArrayDataset`` whose columns are all native, or None (then the
        general path runs: ``__getitems__``, ``default_collate``)."""
        idx = as_index_array(indices)
        columns = take_columns(self._dataset.arrays, idx)
        if columns is None:
            return None
        rec.fetched()
        n = len(idx)
        out = collate_columns(columns, n)
        if out is None:  # not numeric (a structured dtype), or collation rules changed
            out = self._collate(BatchedItems._of(columns, n))
        rec.done()
        return out

    @property
    def has_row_jobs(self) -> bool:
        """Whether ``row_jobs`` may give jobs: the dataset and the options are native."""
        return self._rows is not None

    def row_jobs(self, size: int) -> RowJobs | None:
        """The native row-gather jobs of an epoch's window of ``size`` slots, or None when its
        batches are not on the native batch path (then ``build`` builds every batch)."""
        rows = self._rows
        if rows is None or not can_run(rows):
            return None
        jobs = RowJobs(size, rows, self._y_shape)
        # default_collate turns the columns into list(columns) (numeric dtypes, the shipped
        # collate map): checked once an epoch, on a batch of one row of each column.
        one = self.prepare(jobs, 0, np.zeros(1, dtype=np.int64)) if len(self._dataset) else None
        jobs.drop(0)
        return jobs if one is not None and collate_columns(one, 1) is not None else None

    def prepare(self, jobs: RowJobs, slot: int, indices: Any) -> Any:
        """The batch of ``indices`` as ``build`` returns it on the native batch path (a list
        of new columns), with ``slot``'s job set to fill it (consumer, before it publishes
        the batch); or None, and the slot holds no job: ``build`` then builds the batch (and
        raises what it raises)."""
        try:
            if type(indices) is PermutationSpan:  # the job computes the rows (_sampling/spans.py)
                return jobs.prepare_span(slot, indices.perm, indices.start, indices.count)
            if type(indices) is not np.ndarray:
                indices = as_index_array(indices)
            return jobs.prepare(slot, indices)
        except Exception:  # not indices, or columns that cannot be allocated (MemoryError):
            jobs.drop(slot)  # raised for its batch by build(), on the general path, not here
            return None

    def fetch_item(self, index: Any) -> Any:
        """Fetch and transform one item (with ``item_rng()`` bound to ``index``)."""
        local = _context.thread_state()
        saved = local.index
        local.index = index
        try:
            item = self._dataset[index]
            if is_awaitable(item):
                raise awaitable_item_error(self._dataset, item, "__getitem__", index)
            if self._transform is not None:
                item = self._transform(item)
            return item
        finally:
            local.index = saved

    def _fetch_all(self, indices: Sequence[Any]) -> list[Any]:
        """``[fetch_item(i) for i in indices]`` with one thread-local lookup for the batch (the
        per-item cost counts ``batch_size`` times a batch; see docs/performance-notes.md)."""
        local = _context.thread_state()
        saved = local.index
        dataset, transform = self._dataset, self._transform
        items = []
        try:
            for index in indices:
                local.index = index
                item = dataset[index]
                if is_awaitable(item):
                    raise awaitable_item_error(dataset, item, "__getitem__", index)
                items.append(item if transform is None else transform(item))
        finally:
            local.index = saved
        return items

    def _transform_all(self, indices: Sequence[Any], items: Sequence[Any]) -> list[Any]:
        transform = self._transform
        assert transform is not None
        local = _context.thread_state()
        saved = local.index
        try:
            out = []
            for index, item in zip(indices, items):
                local.index = index
                out.append(transform(item))
        finally:
            local.index = saved
        return out


class Stream:
    """One ``iter(dataset)``, ended for good at its first ``StopIteration``.

    As in PyTorch, an iterator that would yield again after ``StopIteration`` is
    not asked again: the batch cut short by ``StopIteration`` is the last one.  A
    stream that could not start carries its ``Failure``: built once, then ``END``.
    """

    __slots__ = ("it", "ended", "failure")

    def __init__(self, it: Iterator[Any] | None, failure: Failure | None = None) -> None:
        self.it = it
        self.ended = it is None
        self.failure = failure


class StreamBatcher(Builder):
    """Cuts a ``Stream``'s items into collated batches.

    Args:
        batch_size: items per batch, or None for no auto-batching (one item each).
        drop_last: drop a short final batch.

    An exception from the iterator or from ``collate_fn`` is returned (as a
    ``Failure``) for its batch; the next call goes on with the same iterator (a
    generator that raised is finished, which ends the stream), as PyTorch's
    workers do.
    """

    __slots__ = ("_batch_size", "_drop_last")

    def __init__(
        self,
        batch_size: int | None,
        drop_last: bool,
        collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
        epoch_key: tuple[int, int],
    ) -> None:
        super().__init__(collate_fn, transform, epoch_key)
        self._batch_size = batch_size
        self._drop_last = drop_last

    def _build(self, stream: Stream, rec: Recorder) -> Any:
        if stream.failure is not None:
            failure, stream.failure = stream.failure, None
            return failure
        if stream.ended:
            return END
        it = stream.it
        assert it is not None
        want = 1 if self._batch_size is None else self._batch_size
        items: list[Any] = []
        try:
            while len(items) < want:
                items.append(next(it))
        except StopIteration:  # the stream ended (not an error: caught before the builder's rule)
            stream.ended = True
            if not items or (self._drop_last and self._batch_size is not None):
                return END
        rec.fetched()
        if self._transform is not None:
            items = [self._transform(item) for item in items]
            rec.transformed()
        out = self._collate(items[0] if self._batch_size is None else items)
        rec.done()
        return out
