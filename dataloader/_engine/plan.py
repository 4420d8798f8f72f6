"""The loader's arguments resolved once into what every epoch needs (``EpochPlan``).

``DataLoader.__init__`` validates its scalar options (``LoaderOptions``), picks
the sampler and batch sampler, the collate function and the index source, and
freezes them here; ``EpochPlan.start`` builds one epoch from them, with its
epoch number, its pool and its length passed as keywords.  Nothing is injected
into an epoch after it is built.
"""

from __future__ import annotations

import copy
import functools

from collections.abc import Callable, Iterator, MutableSequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataloader._context import epoch_seed
from dataloader._engine.autotune import AutoTuner
from dataloader._engine.build import BuilderKind, StreamBatcher
from dataloader._engine.builders import MapBuild, map_builder
from dataloader._engine.epoch import Epoch
from dataloader._engine.error_policy import ErrorPolicy
from dataloader._engine.failures import FailureLog
from dataloader._engine.iterator import EpochIterator, SequentialEpoch
from dataloader._engine.items import MapItems, StreamItems
from dataloader._engine.outcome import END
from dataloader._engine.policed import PolicedEpoch, PolicedSequentialEpoch
from dataloader._engine.pool import WorkerPool, WorkerSetup
from dataloader._engine.recover import WatchedItems, policy_builder
from dataloader._engine.resume import EpochResume, Progress, skip_items, stateful
from dataloader._engine.stream_policy import PolicedStreamBatcher
from dataloader._engine.stream_state import StatefulStreamItems, StreamSnapshots
from dataloader._engine.stats import EpochStats
from dataloader._sampling.base import ChunkedSampler
from dataloader._sampling.batch import BatchSampler
from dataloader._sampling.spans import index_spans

__all__ = ["EpochPlan", "index_source", "index_sources"]


def index_source(dataset: Any, auto_collation: bool, sampler: Any, batch_sampler: Any) -> Callable[[], Iterator[Any]]:
    """What starts one epoch's indices: the sampler (``batch_size=None``) or the batch
    sampler, as index arrays when the dataset accepts them (``accepts_index_arrays``).

    A (batch) sampler that is not ours may yield one buffer (a list, an array) that it
    refills after each yield, as PyTorch allows (its workers get a pickled copy): a worker
    reads a batch's indices after the sampler's next ``next()``, so each one is copied
    (``kept``).  Ours yield a fresh list or array each time.
    """
    source = batch_sampler if auto_collation else sampler
    if auto_collation and getattr(dataset, "accepts_index_arrays", False) and hasattr(batch_sampler, "_index_arrays"):
        return lambda: iter(batch_sampler._index_arrays())
    if type(source) is BatchSampler or isinstance(source, ChunkedSampler):
        return lambda: iter(source)
    return lambda: map(kept, source)


def kept(indices: Any) -> Any:
    """``indices`` as the loader keeps them until a worker reads them: a copy of a list or
    an array (or of another mutable sequence), anything else as it is."""
    if type(indices) is list or isinstance(indices, np.ndarray):
        return indices.copy()
    if isinstance(indices, (int, tuple, range)) or not isinstance(indices, MutableSequence):
        return indices
    return copy.copy(indices)


def index_sources(
    dataset: Any, iterable: bool, auto_collation: bool, sampler: Any, batch_sampler: Any
) -> dict[str, Any]:
    """The plan's ``indices`` and ``spans``: ``index_source``, and for a batch sampler the
    batches as permutation spans (``dataloader._sampling.spans.index_spans``: None where
    that does not apply), which epochs with native batch jobs use; None for an
    ``IterableDataset``."""
    if iterable:
        return {"indices": None, "spans": None}
    spans = functools.partial(index_spans, batch_sampler) if auto_collation else None
    return {"indices": index_source(dataset, auto_collation, sampler, batch_sampler), "spans": spans}


@dataclass(frozen=True, slots=True)
class EpochPlan:
    """Everything an epoch needs from its loader, fixed at the loader's construction.

    Attributes:
        dataset: the dataset (map-style or ``IterableDataset``).
        iterable: True for an ``IterableDataset``.
        num_workers: worker threads (0: every batch is built inside ``next()``).
        window: batches being built or waiting (``LoaderOptions.window``).
        timeout_s: seconds ``next()`` waits for one batch (0: no limit).
        in_order: epoch order (True) or completion order.
        batch_size: items per batch of an ``IterableDataset``, or None.
        drop_last: drop a short final batch of an ``IterableDataset`` stream.
        auto_collation: work items are lists of indices (map-style).
        collate_fn: turns a list of items (or one item) into a batch.
        transform: per-item transform, or None.
        worker_init_fn: called on each worker at the start of an epoch, or None.
        persistent: ``persistent_workers``.
        item_concurrency: lanes per map-style batch.
        num_lanes: lane helper threads a pool needs (0 for none).
        indices: starts one epoch's (batch) sampler; None for an ``IterableDataset``.
        tuner: picks the active workers for ``num_workers="auto"`` (``num_workers`` is
            then the pool's size), else None.
        async_loop: the loader's event loop (``async_loop.AsyncLoop``) for an
            ``AsyncDataset``, whose batches ``async_build.AsyncFetcher`` builds; else None.
        policy: ``on_error="skip"`` or ``"replace"`` and its limit (``error_policy``), or None
            for ``"raise"`` (then no epoch runs anything of the policy).
    """

    dataset: Any
    iterable: bool
    num_workers: int
    window: int
    timeout_s: float
    in_order: bool
    batch_size: int | None
    drop_last: bool
    auto_collation: bool
    collate_fn: Callable[[Any], Any]
    transform: Callable[[Any], Any] | None
    worker_init_fn: Callable[[int], None] | None
    persistent: bool
    item_concurrency: int
    num_lanes: int
    indices: Callable[[], Iterator[Any]] | None
    spans: Callable[[], Iterator[Any] | None] | None = None  # batches as permutation spans, or None
    tuner: AutoTuner | None = None
    async_loop: Any = None
    policy: ErrorPolicy | None = None

    def _map_builder(
        self, pool: WorkerPool | None, epoch_key: tuple[int, int], native: bool = True
    ) -> tuple[Any, type[MapItems]]:
        """The named builder of a map-style epoch and its work-item source class (``builders``;
        ``native=False``: without asking the dataset's ``__batch_rows__``)."""
        return map_builder(MapBuild(
            self.dataset, self.auto_collation, self.collate_fn, self.transform, self.item_concurrency,
            workers=self.num_workers > 0, lanes=pool.lanes if pool is not None else None, async_loop=self.async_loop,
            native=native,
        ), epoch_key)

    def new_pool(self) -> WorkerPool | None:
        """A pool for this plan's epochs, or None when they need no thread."""
        if self.num_workers == 0 and self.num_lanes == 0:
            return None
        return WorkerPool(self.num_workers, self.num_lanes)

    def start(
        self,
        *,
        epoch_key: tuple[int, int],
        pool: WorkerPool | None,
        owns_pool: bool,
        length: int | None,
        keep_alive: Any,
        resume: EpochResume | None = None,
    ) -> tuple[EpochIterator, Progress]:
        """Start one epoch (its sampler is started here, on the calling thread); returns its
        iterator and its ``Progress`` (the batches ``next()`` returns, for ``state_dict``).

        ``resume`` (``Resumer.begin``) is where the epoch starts: ``skip`` work items are drawn
        and dropped first (a resumed epoch, ``dataloader._engine.resume``; map-style, or an
        ``IterableDataset`` with ``num_workers=0``, whose first ``skip`` batches are built), and
        ``streams`` resumes a stateful ``IterableDataset``'s workers
        (``dataloader._engine.stream_state``).

        Raises:
            RuntimeError: ``pool`` cannot serve the epoch (shut down or busy).
        """
        if resume is None:
            resume = EpochResume(epoch_key[1], 0, 0, None)
        kind = self._decide()
        stats = EpochStats(epoch_key[1], self.num_workers, kind.inline or kind.helps, self.tuner, kind.inline,
                           requests=getattr(self.dataset, "request_counts", None))
        sequential = self.num_workers == 0 or (kind.inline and self._settled_inline(stats))
        part = self._parts(pool, epoch_key, stats, resume, sequential, kind.inline)
        progress = Progress(resume.epoch, resume.yielded, part.streams)
        policed: dict[str, Any] = {}
        if self.policy is not None:  # the epochs of dataloader._engine.policed, with the epoch's log
            stats.failures = progress.failures = policed["failures"] = FailureLog(
                self.policy, epoch_key[1], resume.failures)
        if sequential:
            # num_workers=0, or "auto" settled inline: no window and no thread at all.
            if owns_pool and pool is not None:
                pool.shutdown()
            return self._sequential_epoch(part, length, progress, stats, keep_alive, policed), progress
        assert pool is not None and (resume.skip == 0 or not self.iterable)
        epoch = (PolicedEpoch if policed else Epoch)(**policed,
            source=part.source, pool=pool, owns_pool=owns_pool, window=self.window, length=length,
            timeout_s=self.timeout_s, in_order=self.in_order, keep_alive=keep_alive, start_error=part.error,
            progress=progress, stats=stats, tune=stats.tune, inline=part.inline_build,
            help_rec=stats.workers[-1] if kind.helps else None,
        )
        return epoch, progress

    def _decide(self) -> _Kind:
        """Where an epoch's batches may be built besides the workers (``_Kind``)."""
        # num_workers="auto" may build batches on the consumer thread ("inline", autotune.py),
        # not where that would skip what workers do: worker_init_fn (but one that only sets up
        # its thread, ``per_thread_only``: dataloader.torch's), an AsyncDataset's event loop, a
        # timeout (next() cannot time out a batch it builds itself).
        init = self.worker_init_fn
        inline = (self.tuner is not None and not self.iterable and self.async_loop is None
                  and (init is None or getattr(init, "per_thread_only", False) is True)
                  and self.timeout_s == 0)
        # The consumer builds native batches (_rowjobs) while the one it needs is not ready: the
        # extra recorder is its own, as for inline building.
        helps = self.num_workers > 0 and not self.iterable and self.async_loop is None
        return _Kind(inline, helps)

    def _settled_inline(self, stats: EpochStats) -> bool:
        """``num_workers="auto"`` settled on the consumer building every batch (0 active)."""
        tune = stats.tune
        return tune is not None and self.tuner is not None and self.tuner.settled and tune.active == 0

    def _parts(
        self, pool: WorkerPool | None, epoch_key: tuple[int, int], stats: EpochStats, resume: EpochResume,
        sequential: bool, inline: bool,
    ) -> _Parts:
        """The epoch's work items and what goes with them (``_Parts``)."""
        setup = WorkerSetup(epoch_seed(*epoch_key), self.dataset, self.worker_init_fn, self.persistent)
        if self.iterable:
            return self._stream_parts(setup, epoch_key, stats, resume, sequential)
        return self._map_parts(pool, setup, epoch_key, stats, resume, sequential, inline)

    def _stream_parts(
        self, setup: WorkerSetup, epoch_key: tuple[int, int], stats: EpochStats, resume: EpochResume,
        sequential: bool,
    ) -> _Parts:
        # skip: the failures the stream reports while a batch is taken are that batch's (stream_policy)
        batcher = (StreamBatcher if self.policy is None else PolicedStreamBatcher)(
            self.batch_size, self.drop_last, self.collate_fn, self.transform, epoch_key)
        if self.num_workers and stateful(self.dataset):
            source: StreamItems = StatefulStreamItems(
                self.dataset, batcher, setup, self.num_workers, resume.streams, stats, yielded=resume.yielded,
            )
            return _Parts(source, streams=source)
        source = StreamItems(self.dataset, batcher, setup, self.num_workers, stats)
        if not sequential:
            return _Parts(source)
        snaps: StreamSnapshots | None = None
        try:
            if stateful(self.dataset):
                # The dataset's state at the consumer's position, from the epoch's start
                # (None unless resumed from a loaded state: stream_state.StreamSnapshots).
                snaps = StreamSnapshots(self.dataset, resume.yielded, resume.loaded)
            items = source.sequential()
            if snaps is not None:
                items = (items[0], snaps.wrap(items[1]))
            _drop_batches(items, resume.skip)
        except Exception as exc:
            return _Parts(source, error=exc, streams=snaps)
        return _Parts(source, items=items, streams=snaps)

    def _map_parts(
        self, pool: WorkerPool | None, setup: WorkerSetup, epoch_key: tuple[int, int], stats: EpochStats,
        resume: EpochResume, sequential: bool, inline: bool,
    ) -> _Parts:
        assert self.indices is not None
        error: Exception | None = None
        try:
            fetch, source_cls = self._map_builder(pool, epoch_key)
        except Exception as exc:  # seed 004: a failing __batch_rows__ is raised by the first next()
            fetch, source_cls = self._map_builder(pool, epoch_key, native=False)
            error = exc
        # Native batch jobs of a shuffled epoch compute their own rows (_sampling/spans.py).
        spans = (self.spans is not None and self.num_workers > 0 and not (inline and sequential)
                 and fetch.kind is BuilderKind.NATIVE_ROWS)
        if self.policy is not None:  # skip/replace: failures narrowed to items (recover.py)
            fetch = policy_builder(self.policy, fetch, self.dataset, self.auto_collation,
                                   pool.lanes if pool is not None else None, self.item_concurrency,
                                   self.transform, epoch_key)
            if source_cls is not MapItems:  # an AsyncDataset's
                source_cls = _policed_async_items(fetch)
        # The consumer's builds record into the extra (last) recorder.
        inline_build = functools.partial(fetch.build, rec=stats.workers[-1]) if inline else None
        indices: Iterator[Any] = iter(())
        try:  # started also after a failed builder: the sampler claims a resumed start here
            batches = self.spans() if spans and self.spans is not None else None
            indices = skip_items(self.indices() if batches is None else batches, resume.skip)
            if self.policy is not None:  # (batch number, indices): the substitutes' position
                indices = enumerate(indices, start=resume.yielded)
        except Exception as exc:  # seed 004: raised by the first next()
            error = error if error is not None else exc
        source = source_cls(indices, fetch, setup, self.num_workers, stats)
        # An AsyncDataset's builder waits on the event loop: close() wakes it (async_build).
        on_close = fetch.cancel if self.async_loop is not None else None
        if not sequential or error is not None:
            return _Parts(source, error=error, inline_build=inline_build, on_close=on_close)
        try:
            items = source.sequential()
        except Exception as exc:
            return _Parts(source, error=exc, inline_build=inline_build, on_close=on_close)
        return _Parts(source, items=items, inline_build=inline_build, on_close=on_close)

    def _sequential_epoch(
        self, part: _Parts, length: int | None, progress: Progress, stats: EpochStats, keep_alive: Any,
        policed: dict[str, Any],
    ) -> SequentialEpoch:
        return (PolicedSequentialEpoch if policed else SequentialEpoch)(**policed, items=part.items, length=length, start_error=part.error, progress=progress,
                               stats=stats, on_close=part.on_close, keep_alive=keep_alive)


@dataclass(frozen=True, slots=True)
class _Kind:
    """An epoch's decision: ``inline`` (``num_workers="auto"``: the consumer may build batches
    itself) and ``helps`` (the consumer builds native batches while it waits)."""

    inline: bool
    helps: bool


@dataclass(frozen=True, slots=True)
class _Parts:
    """What an epoch is built from: its work items (``source``), the first error of starting
    them (raised by the first ``next()``), the ``(next_item, build)`` of a sequential epoch,
    the consumer's own builder (inline), what ``close()`` wakes, and the dataset's state at
    the consumer's position (``Progress.streams``)."""

    source: MapItems | StreamItems
    error: Exception | None = None
    items: tuple[Callable[[], Any], Callable[[Any], Any]] | None = None
    inline_build: Callable[[Any], Any] | None = None
    on_close: Callable[[], None] | None = None
    streams: Any = None


def _policed_async_items(fetch: Any) -> type[MapItems]:
    """The source of an ``AsyncDataset``'s epoch under a policy (its ``PolicyBuilder``
    ``fetch``): settled batches claimed ahead (``async_policy``), else (one ``__getitems__``
    coroutine a batch, narrowed by halves) one batch at a time (``recover.WatchedItems``)."""
    from dataloader._engine.async_policy import SettledItems, settles  # lazy: asyncio only for async datasets

    return SettledItems if settles(fetch) else WatchedItems


def _drop_batches(items: tuple[Callable[[], Any], Callable[[Any], Any]], k: int) -> None:
    # An IterableDataset without state_dict resumed with num_workers=0: its first k batches
    # (failures included) are built again and dropped.
    next_item, build = items
    for _ in range(k):
        if build(next_item()) is END:
            return
