"""Building one batch from one work item: fetch (or draw), transform, collate.

A builder is made once per epoch and called by whichever thread builds a batch
(a worker, or the consumer when ``num_workers=0``).  ``Builder.build`` is the one
place that sets the thread's ``item_rng`` epoch, turns a ``StopIteration`` into
a ``RuntimeError`` (PEP 479: it would end the caller's loop, a silently short
epoch) and catches every exception into a ``Failure``, which the consumer
re-raises for that batch.

Each builder has one named ``kind`` (``BuilderKind``), picked once an epoch
(``dataloader._engine.builders.map_builder``); a builder never decides per batch what
was decided for the epoch.  Map-style (a work item is a batch of indices, or one index):

- ``SingleFetcher`` (``single``): ``batch_size=None``, one index, ``collate_fn`` converts one item;
- ``LanesFetcher`` (``lanes``): the items of a batch fetched by several lanes;
- ``GetitemsFetcher`` (``getitems``): one ``__getitems__`` call a batch;
- ``ItemsFetcher`` (``items``): one ``__getitem__`` call an item;
- ``native_gather`` and ``native_rows`` (``dataloader._engine.native``): a dataset's
  ``BatchRows`` gathered with no Python; ``async`` (``dataloader._engine.async_build``).

``StreamBatcher`` (``stream``, ``IterableDataset``): a work item is "the next batch of this
worker's stream"; it returns ``END`` once the stream has ended.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from dataloader import _context
from dataloader._datasets.fetch import awaitable_item_error, check_item_count, check_items_not_awaitable
from dataloader._datasets.rows import BatchRows
from dataloader._engine.lanes import LanePool, fetch_with_lanes
from dataloader._engine.outcome import END, Failure, no_stop_iteration
from dataloader._native._awaitable import is_awaitable
from dataloader._native._stats import Recorder

__all__ = [
    "Builder", "BuilderKind", "Fetcher", "GetitemsFetcher", "ItemsFetcher", "LanesFetcher", "SingleFetcher",
    "Stream", "StreamBatcher",
]


class BuilderKind(enum.Enum):
    """The named builders; an epoch builds every batch with one of them."""

    NATIVE_ROWS = "native_rows"  # BatchRows gathered by RowJobs in workers, no Python (native.py)
    NATIVE_GATHER = "native_gather"  # BatchRows arrays gathered by take_columns (native.py)
    GETITEMS = "getitems"  # one __getitems__ a batch
    LANES = "lanes"  # item_concurrency > 1: the items of a batch over several lanes
    ITEMS = "items"  # one __getitem__ an item
    SINGLE = "single"  # batch_size=None: one index, one item
    ASYNC = "async"  # an AsyncDataset's coroutines on the loader's event loop (async_build.py)
    STREAM = "stream"  # an IterableDataset's stream cut into batches


class Builder:
    """What every builder shares: ``collate_fn``, ``transform`` and the ``item_rng`` epoch.

    Args:
        collate_fn: called with the list of items (or the single item).
        transform: ``transform(item) -> item``, run per item before collation, or None.
        epoch_key: ``(base_seed, epoch)`` for ``item_rng``.

    Thread-safety: stateless between calls; any number of threads may build at once.
    """

    __slots__ = ("_collate", "_transform", "_epoch_key")

    kind: ClassVar[BuilderKind]
    rows: BatchRows | None = None  # the native_rows builder's rows (its epoch runs RowJobs)

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

    def _collated(self, items: Any, rec: Recorder) -> Any:
        """``collate_fn(items)``, fetching (up to now) and collating timed into ``rec``."""
        rec.fetched()
        out = self._collate(items)
        rec.done()
        return out


class Fetcher(Builder):
    """What the map-style builders share: the dataset, one item fetched and transformed.

    Args:
        dataset: the map-style dataset.
        collate_fn: called with the list of items (or, ``SingleFetcher``, the single item).
        transform: ``transform(item) -> item``, run per item before collation, or None.
        epoch_key: ``(base_seed, epoch)`` for ``item_rng``.

    An awaitable returned in place of an item (a plain ``__getitem__`` returning
    ``self.load(i)`` of an ``async def load``, which the loader cannot refuse when it is
    built as it refuses ``async def __getitem__``) fails that item with ``TypeError``, as
    if ``__getitem__`` had raised it, and is closed if it is a coroutine.  Every item is
    checked, not only a batch's first: a dataset may return a coroutine for some indices
    only (a cache miss).  The check reads one C type slot (``_native._awaitable``): free
    items cost 13 ns more each on 3.11 and 34 ns on 3.13t (3.3 and 8.6 us a batch of 256,
    +6%), a ``__getitems__`` batch 0.7 and 1.2 us.

    Thread-safety: stateless between calls; any number of threads may build at once.
    """

    __slots__ = ("_dataset",)

    def __init__(
        self,
        dataset: Any,
        collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
        epoch_key: tuple[int, int],
    ) -> None:
        super().__init__(collate_fn, transform, epoch_key)
        self._dataset = dataset

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


class SingleFetcher(Fetcher):
    """``batch_size=None``: a work item is one index; ``collate_fn`` converts its one item."""

    __slots__ = ()
    kind = BuilderKind.SINGLE

    def _build(self, index: Any, rec: Recorder) -> Any:
        return self._collated(self.fetch_item(index), rec)


class LanesFetcher(Fetcher):
    """A batch's items fetched (and transformed) by ``item_concurrency`` lanes at once.

    Args:
        lanes: the pool's ``LanePool``.
        item_concurrency: lanes per batch (> 1).
    """

    __slots__ = ("_lanes", "_k")
    kind = BuilderKind.LANES

    def __init__(
        self,
        dataset: Any,
        collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
        epoch_key: tuple[int, int],
        lanes: LanePool,
        item_concurrency: int,
    ) -> None:
        super().__init__(dataset, collate_fn, transform, epoch_key)
        self._lanes = lanes
        self._k = item_concurrency

    def _build(self, indices: Any, rec: Recorder) -> Any:
        return self._collated(fetch_with_lanes(self._lanes, self.fetch_item, indices, self._k), rec)


class ItemsFetcher(Fetcher):
    """One ``__getitem__`` an item, on the building thread."""

    __slots__ = ()
    kind = BuilderKind.ITEMS

    def _build(self, indices: Any, rec: Recorder) -> Any:
        return self._collated(self._fetch_all(indices), rec)

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


class GetitemsFetcher(Fetcher):
    """One ``__getitems__(indices)`` call a batch (its items checked: count, awaitables),
    then ``transform`` per item and ``collate_fn``."""

    __slots__ = ("_getitems",)
    kind = BuilderKind.GETITEMS

    def __init__(
        self,
        dataset: Any,
        collate_fn: Callable[[Any], Any],
        transform: Callable[[Any], Any] | None,
        epoch_key: tuple[int, int],
    ) -> None:
        super().__init__(dataset, collate_fn, transform, epoch_key)
        self._getitems = dataset.__getitems__

    def _build(self, indices: Any, rec: Recorder) -> Any:
        items = self._getitems(indices)
        if is_awaitable(items):
            raise awaitable_item_error(self._dataset, items, "__getitems__", indices)
        items = check_items_not_awaitable(self._dataset, check_item_count(items, len(indices)), indices)
        rec.fetched()
        if self._transform is not None:
            items = self._transform_all(indices, items)
            rec.transformed()
        out = self._collate(items)
        rec.done()
        return out

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
    kind = BuilderKind.STREAM

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
        items = self._take(stream)
        if type(items) is not list:
            return items
        return self._finish(items, rec)

    def _take(self, stream: Stream) -> Any:
        """The next batch's items (a list), or the stream's ``Failure``, or ``END``."""
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
        return items

    def _finish(self, items: list[Any], rec: Recorder) -> Any:
        """``items`` transformed and collated (timed into ``rec``)."""
        rec.fetched()
        if self._transform is not None:
            items = [self._transform(item) for item in items]
            rec.transformed()
        out = self._collate(items[0] if self._batch_size is None else items)
        rec.done()
        return out
