"""An ``AsyncDataset``'s epoch under an error policy, one ``__getitem__`` coroutine an item.

Its batches are settled (``async_pipe``): each comes from one concurrent fetch that gives
every item's outcome, so the ``PolicyBuilder`` (``recover``) narrows nothing.  Its workers
claim batches ahead exactly as without a policy (``async_build.work_ahead``): the items of
batch ``k + 1`` start as those of batch ``k`` end, while the worker applies the policy to
batch ``k`` and collates it.  Which batch a worker claims, and when, changes no outcome: an
item's outcome is its own, and each batch's policy (its records, its substitutes) is a
function of the seed and its position only.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from dataloader._engine.async_build import AsyncFetcher, AsyncItems, claim_ahead
from dataloader._engine.async_pipe import Pipeline
from dataloader._engine.build import Builder
from dataloader._engine.items import MapItems
from dataloader._engine.pool import WorkerSetup
from dataloader._engine.recover import PolicyBuilder
from dataloader._engine.stats import EpochStats
from dataloader._native._ring import Window

__all__ = ["SettledItems", "settles"]


def settles(fetch: Builder) -> bool:
    """``fetch`` is a ``PolicyBuilder`` over an ``AsyncFetcher`` whose batches settle."""
    return isinstance(fetch, PolicyBuilder) and isinstance(fetch.inner, AsyncFetcher) and fetch.inner.settles


class SettledItems(AsyncItems):
    """``AsyncItems`` under a policy (see the module): work items ``(k, indices)``, built by
    the ``PolicyBuilder`` ``fetch`` (``settles(fetch)``); a worker's pipeline is settled.

    Thread-safety: as ``AsyncItems``.
    """

    def __init__(
        self, indices: Iterator[Any], fetch: Builder, setup: WorkerSetup, num_workers: int, stats: EpochStats
    ) -> None:
        assert isinstance(fetch, PolicyBuilder) and isinstance(fetch.inner, AsyncFetcher)
        MapItems.__init__(self, indices, fetch, setup, num_workers, stats)
        self._async_fetch = fetch.inner
        self._policed = fetch

    def _batch(self, task: tuple[int, Any]) -> Sequence[Any]:
        """The indices work item ``task`` fetches."""
        return self._async_fetch.batch_indices(task[1])

    def _claim(self, window: Window, ref: weakref.ref[Any]) -> tuple[int, Sequence[Any], int] | None:
        """On the loop thread, a batch claimed without waiting: ``(k, its indices, its
        number in the epoch)`` (the ``Sink.tag``), or None (none published, or the epoch let
        go of its work items: closed)."""
        got = claim_ahead(window, ref, lambda task: task)
        if got is None:
            return None
        task: Any = got[1]
        return got[0], self._batch(task), task[0]

    def begin(self, window: Window, ref: weakref.ref[Any], k: int, task: Any) -> Pipeline:
        """A worker's settled pipeline, with batch ``k`` (work item ``task``) handed over.

        Raises:
            RuntimeError: the loader's event loop was stopped, or the epoch let go of its
                work items (``task`` is None: closed); the batch is then built on its own.
        """
        if task is None:
            raise RuntimeError("the epoch was closed while its batch was claimed")
        pipe = self._async_fetch.pipeline(functools.partial(self._claim, window, ref), settled=True)
        pipe.begin(k, self._batch(task), task[0])
        return pipe

    def build_oldest(self, worker_id: int, pipe: Pipeline) -> Any:
        """The oldest batch of ``pipe`` built under the policy: its number in the epoch and its
        indices are those it was handed over with (the epoch may let go of its work items
        meanwhile: closed)."""
        oldest = pipe.pending[0]
        return self._policed.build((oldest.tag, oldest.indices, pipe), self._recs[worker_id])
