"""The one place that picks a map-style epoch's named builder (``BuilderKind``).

Picked once an epoch, from the loader's options and the dataset, in this order:

==================  =========================================================================
``async``           an ``AsyncDataset`` (``async_build.AsyncFetcher``, with ``AsyncItems``)
``single``          ``batch_size=None``: a work item is one index
``lanes``           ``item_concurrency > 1`` (and the pool has lanes)
``native_rows``     the dataset's ``__batch_rows__()`` gives ``BatchRows``, the batch is plain
                    ``default_collate`` of its items (no ``transform``, the default
                    ``collate_fn``), the epoch has workers and ``RowJobs`` accept the rows
``native_gather``   the same with arrays where ``native_rows`` does not apply (no workers, or
                    columns ``RowJobs`` or ``default_collate`` do not take as they are)
``getitems``        the dataset has ``__getitems__``
``items``           otherwise
==================  =========================================================================

(``stream``, an ``IterableDataset``'s ``StreamBatcher``, is the iterable epoch's only builder.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dataloader._collation.default import default_collate
from dataloader._datasets.rows import BatchRows
from dataloader._engine.build import Builder, Fetcher, GetitemsFetcher, ItemsFetcher, LanesFetcher, SingleFetcher
from dataloader._engine.items import MapItems
from dataloader._engine.lanes import LanePool
from dataloader._engine.native import GatherFetcher, RowsFetcher, batch_rows, jobs_collate
from dataloader._native._gather import Reader

__all__ = ["MapBuild", "map_builder"]


@dataclass(frozen=True, slots=True)
class MapBuild:
    """What picks a map-style epoch's builder: the plan's options for this epoch.

    Attributes:
        dataset: the map-style dataset.
        auto_collation: work items are lists of indices (``batch_size`` or ``batch_sampler``).
        collate_fn: turns the items (or the single item) into a batch.
        transform: per-item transform, or None.
        item_concurrency: lanes per batch (>= 1).
        workers: the epoch has worker threads (``num_workers > 0``).
        lanes: the pool's lanes, or None.
        async_loop: the loader's event loop for an ``AsyncDataset``, else None.
        native: ask the dataset's ``__batch_rows__`` (False: an epoch whose call raised).
    """

    dataset: Any
    auto_collation: bool
    collate_fn: Callable[[Any], Any]
    transform: Callable[[Any], Any] | None
    item_concurrency: int
    workers: bool
    lanes: LanePool | None
    async_loop: Any = None
    native: bool = True


def map_builder(build: MapBuild, epoch_key: tuple[int, int]) -> tuple[Builder, type[MapItems]]:
    """The epoch's builder (its ``kind`` names it) and its work-item source class.

    Raises:
        TypeError: the dataset's ``__batch_rows__`` returned something else than ``BatchRows``.
    """
    ds, collate, transform = build.dataset, build.collate_fn, build.transform
    fetch: Builder
    if build.async_loop is not None:
        from dataloader._engine.async_build import AsyncFetcher, AsyncItems  # lazy: asyncio only for async datasets

        # The epoch keeps the run of the loop it starts with (async_loop.LoopRun).
        fetch = AsyncFetcher(ds, build.auto_collation, collate, transform, build.item_concurrency, epoch_key,
                             build.async_loop.start())
        return fetch, AsyncItems
    if not build.auto_collation:
        return SingleFetcher(ds, collate, transform, epoch_key), MapItems
    if build.item_concurrency > 1 and build.lanes is not None:
        return LanesFetcher(ds, collate, transform, epoch_key, build.lanes, build.item_concurrency), MapItems
    plain = transform is None and collate is default_collate and build.item_concurrency == 1
    rows = batch_rows(ds) if plain and build.native else None
    fetch = _general(ds, collate, transform, epoch_key, rows)
    if rows is not None and build.workers and jobs_collate(rows):
        return RowsFetcher(fetch, rows, epoch_key), MapItems
    return fetch, MapItems


def _general(
    ds: Any, collate: Callable[[Any], Any], transform: Callable[[Any], Any] | None, epoch_key: tuple[int, int],
    rows: BatchRows | None,
) -> Builder:
    """The builder of a batch of indices on its building thread: ``native_gather`` for arrays'
    ``BatchRows`` (over ``getitems`` or ``items`` for the batches it cannot gather), else
    ``getitems`` or ``items``."""
    fetch: Fetcher
    if getattr(ds, "__getitems__", None) is not None:
        fetch = GetitemsFetcher(ds, collate, transform, epoch_key)
    else:
        fetch = ItemsFetcher(ds, collate, transform, epoch_key)
    if rows is not None and not isinstance(rows.source, Reader):
        return GatherFetcher(fetch, rows, epoch_key)
    return fetch
