"""Turning one batch of indices into one batch: fetch, transform, collate.

A ``Fetcher`` is built once per epoch and called by whichever thread processes
a batch (a worker, or the consumer when ``num_workers=0``).  It is stateless
between calls, so any number of threads may call it at once.  Failures are not
caught here: the worker loop carries them (``Failure``) to the consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from dataloader import _context
from dataloader._engine.lanes import LanePool, fetch_with_lanes

__all__ = ["Failure", "Fetcher"]


class Failure:
    """An exception raised while building a batch, carried to the consumer.

    The exception object keeps its original type and traceback; ``reraise``
    raises it on the consumer thread, where Python appends the consumer's frames.
    Each raise starts again from the traceback the worker caught, so one exception
    carried for several batches (a failing ``worker_init_fn``) does not grow.
    """

    __slots__ = ("exc", "tb")

    def __init__(self, exc: BaseException, tb: TracebackType | None = None) -> None:
        self.exc = exc
        self.tb = tb if tb is not None else exc.__traceback__

    def reraise(self) -> None:
        exc, tb = self.exc, self.tb
        self.exc = self.tb = None  # type: ignore[assignment]
        try:
            raise exc.with_traceback(tb)
        finally:
            del exc, tb


class Fetcher:
    """Builds batches for one epoch.

    Args:
        dataset: the map-style dataset.
        auto_collation: True when batches are lists of indices (``batch_size`` or
            ``batch_sampler`` set); False for ``batch_size=None``, where each
            "batch" is one index and ``collate_fn`` converts one item.
        collate_fn: called with the list of items (or the single item).
        transform: ``transform(item) -> item``, run per item before collation, or None.
        lanes: a ``LanePool`` when ``item_concurrency > 1``, else None.
        item_concurrency: lanes per batch (>= 1).
        epoch_key: ``(base_seed, epoch)`` for ``item_rng``.
    """

    __slots__ = ("_dataset", "_auto", "_collate", "_transform", "_lanes", "_k", "_getitems", "_epoch_key")

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
        self._dataset = dataset
        self._auto = auto_collation
        self._collate = collate_fn
        self._transform = transform
        self._lanes = lanes
        self._k = item_concurrency
        self._getitems = getattr(dataset, "__getitems__", None)
        self._epoch_key = epoch_key

    def __call__(self, indices: Any) -> Any:
        """Return the collated batch for ``indices`` (raises what the dataset raises).

        The thread's ``item_rng`` context is set for the call and restored afterwards,
        so the consumer thread (``num_workers=0``) keeps no trace of the epoch and a
        loader iterated inside ``__getitem__`` leaves the outer item's context intact.
        """
        saved = _context._swap_epoch_key(self._epoch_key)
        try:
            return self._build(indices)
        except StopIteration as exc:
            # Re-raised by next(), a StopIteration would end the caller's for loop: a
            # silently short epoch.  Carry it as PEP 479 does for generators.
            raise RuntimeError(
                "the dataset, transform or collate_fn raised StopIteration while building a batch"
            ) from exc
        finally:
            _context._set_epoch_key(saved)

    def _build(self, indices: Any) -> Any:
        if not self._auto:
            return self._collate(self.fetch_item(indices))
        if self._k > 1 and self._lanes is not None:
            items = fetch_with_lanes(self._lanes, self.fetch_item, indices, self._k)
        elif self._getitems is not None:
            items = self._getitems(indices)
            if self._transform is not None:
                items = self._transform_all(indices, items)
            elif len(items) != len(indices):
                raise ValueError(
                    f"__getitems__ returned {len(items)} items for {len(indices)} indices"
                )
        else:
            items = [self.fetch_item(i) for i in indices]
        return self._collate(items)

    def fetch_item(self, index: Any) -> Any:
        """Fetch and transform one item (with ``item_rng()`` bound to ``index``)."""
        saved = _context._swap_index(index)
        try:
            item = self._dataset[index]
            if self._transform is not None:
                item = self._transform(item)
            return item
        finally:
            _context._set_index(saved)

    def _transform_all(self, indices: Sequence[Any], items: Sequence[Any]) -> list[Any]:
        if len(items) != len(indices):
            raise ValueError(f"__getitems__ returned {len(items)} items for {len(indices)} indices")
        out = []
        transform = self._transform
        saved = _context._swap_index(None)
        try:
            for index, item in zip(indices, items):
                _context._set_index(index)
                out.append(transform(item))
        finally:
            _context._set_index(saved)
        return out
