"""Building a batch under ``on_error="skip"`` or ``"replace"``: failures narrowed to items.

``PolicyBuilder`` wraps an epoch's named builder (``BuilderKind``; the plan wraps it only
when the loader has a policy, so ``on_error="raise"`` runs no line of this module).  Its
work items are ``(k, indices)``: the batch's number in the epoch and its indices (from a
worker claiming ahead, ``(k, the batch's list of indices, its settled pipeline)``:
``async_policy``).

- Item kinds (``items``, ``lanes``, ``single``): each item is fetched (and transformed) on
  its own, its exception kept as an ``ItemError``: a failure costs nothing more than the
  failing item.
- ``async`` with one ``__getitem__`` coroutine an item: the batch is fetched once, settled
  (``async_pipe``): its items run concurrently, a failing one does not cancel the others, and
  each item's exception comes back at its position as an ``ItemError``: every failing
  request is made once.
- Batch kinds (``getitems``, ``native_gather``, ``native_rows``, ``async`` with one
  ``__getitems__`` coroutine a batch): the batch is built as without a policy; if that
  raises, its items are fetched again one by one through the item path (``__getitem__`` +
  ``transform``; an async batch's by halves, ``halved``) to find which failed.  A batch that fails only in ``collate_fn`` (no item fails one by one) fails
  as a whole: ``next()`` raises the collate error, under every policy (not an item's fault).

The policy then applies per failing item: ``"skip"`` drops it (a batch whose every item
failed becomes ``SKIPPED``, and ``next()`` goes on to the next batch); ``"replace"`` fetches
``substitute_index(seed, epoch, k, place, attempt)`` in its place, a pure function of the
epoch's seed and the item's position (never of timing or of the thread), trying at most
``MAX_REPLACE_ATTEMPTS`` substitutes before the batch fails with ``RuntimeError``.  A batch's
substitutes are fetched in rounds, one attempt of every failing place still without one a
round, concurrently where the builder can (an ``AsyncDataset``'s settled fetch, lanes); the
records come in the order of one place after another all the same.  Interrupts
(``errors.INTERRUPTS``) and an epoch's cancellation are never an item's failure: they pass.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dataloader import _context
from dataloader._engine.build import Builder, BuilderKind, Fetcher, ItemsFetcher
from dataloader._engine.error_policy import MAX_REPLACE_ATTEMPTS, ErrorPolicy
from dataloader._engine.failures import FailureRecord, record
from dataloader._engine.items import MapItems
from dataloader._engine.lanes import LanePool, fetch_with_lanes
from dataloader._engine.outcome import Failure, no_stop_iteration
from dataloader._engine.pool import WorkerSetup
from dataloader._engine.stats import EpochStats
from dataloader._native._ring import Window
from dataloader._native._stats import Recorder
from dataloader._sampling.permute import PermutationSpan

__all__ = [
    "SKIPPED", "ItemError", "PolicyBuilder", "Recovered", "SubstitutesFailed", "WatchedItems", "bisected", "halved",
    "item_outcomes", "policy_builder", "substitute_index",
]

SKIPPED: Any = type("Skipped", (), {"__repr__": lambda self: "SKIPPED", "__slots__": ()})()
"""What a batch whose every item failed under ``"skip"`` comes to (never a batch)."""

_SUBSTITUTE_TAG = 0x5EB5717  # keeps the substitutes' stream apart from every other use of the seed


class ItemError:
    """An item's exception, kept in its place among the batch's items until the policy has
    recorded it; then ``exc`` is set to None.  Its traceback's frames reach (``f_back``) the
    frame that caught it, which holds the batch's outcomes, which hold this object: a cycle
    that only the cyclic garbage collector would free (with the dataset), until it is cut."""

    __slots__ = ("exc",)

    def __init__(self, exc: Exception | None) -> None:
        self.exc = exc


class Recovered:
    """A batch built under a policy, for the consumer's ``FailureLog``.

    Attributes:
        batch: the collated batch, ``SKIPPED``, or the ``Failure`` of a ``collate_fn`` that
            failed after some of the batch's items had failed (``next()`` raises it).
        seen: items tried for the batch: its indices, and under ``"replace"`` every substitute
            fetched (so ``len(failures) <= seen``).
        failures: the records of its failed items (substitutes that failed too), in order.
        skipped, replaced: items dropped and items substituted.
    """

    __slots__ = ("batch", "seen", "failures", "skipped", "replaced")

    def __init__(self, batch: Any, seen: int, failures: list[FailureRecord], skipped: int, replaced: int) -> None:
        self.batch, self.seen, self.failures, self.skipped, self.replaced = batch, seen, failures, skipped, replaced


class SubstitutesFailed(RuntimeError):
    """``"replace"``: ``MAX_REPLACE_ATTEMPTS`` substitutes of one item failed, so its batch fails
    (``next()`` raises this ``RuntimeError``).  The consumer counts the batch's failures before
    raising it (``dataloader._engine.policed``): they appear in ``loader.failures`` and count
    toward ``max_failures`` like any other.

    Attributes:
        seen: items tried for the failed batch: its indices, and the substitutes of the places
            whose records are kept (``records``).
        records: the batch's failure records (the failing items and every failed substitute).
    """

    def __init__(self, message: str, seen: int, records: list[FailureRecord]) -> None:
        super().__init__(message)
        self.seen = seen
        self.records = records

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.args[0], self.seen, self.records)


def substitute_index(seed: int, epoch: int, batch: int, place: int, attempt: int, n: int) -> int:
    """The index in ``[0, n)`` that replaces the item at ``place`` of batch ``batch`` of
    ``epoch`` on its ``attempt`` (0, 1, ...): a pure function of its arguments."""
    words = [seed, epoch, batch, place, attempt, _SUBSTITUTE_TAG]
    return int(np.random.SeedSequence(words).generate_state(1, np.uint64)[0] % np.uint64(n))


def _plain(index: Any) -> Any:
    """An index as a record shows it: a NumPy integer as an int."""
    try:
        return operator.index(index)
    except TypeError:
        return index


class PolicyBuilder(Builder):
    """The epoch's builder under a policy (see the module).

    Args:
        inner: the epoch's named builder (``inner.kind`` names the epoch's builder).
        dataset: the map-style dataset (its ``location`` names failed items).
        policy: the loader's ``ErrorPolicy``.
        auto_collation: work items hold lists of indices (False: one index).
        outcomes: ``outcomes(indices)``: each item or its ``ItemError``, in order.
        substitutes: as ``outcomes``, over the item path (``__getitem__`` + ``transform``):
            the substitutes' fetch.
        batch_first: build with ``inner`` first, narrowing only when it raises.
        passthrough: exceptions that end the build as they are (an epoch's cancellation).

    Thread-safety: stateless between calls; any number of threads may build at once.
    """

    __slots__ = ("inner", "_dataset", "_policy", "_auto", "_many", "_outcomes", "_batch_first",
                 "_passthrough", "_n")

    def __init__(
        self, inner: Builder, dataset: Any, policy: ErrorPolicy, auto_collation: bool,
        outcomes: Callable[[Sequence[Any]], list[Any]], substitutes: Callable[[Sequence[Any]], list[Any]],
        batch_first: bool, passthrough: tuple[type[BaseException], ...], epoch_key: tuple[int, int],
    ) -> None:
        super().__init__(inner._collate, None, epoch_key)
        self.inner = inner
        self._dataset, self._policy, self._auto = dataset, policy, auto_collation
        self._many, self._outcomes, self._batch_first = substitutes, outcomes, batch_first
        self._passthrough = passthrough
        self._n = len(dataset) if policy.on_error == "replace" else 0

    def cancel(self) -> None:
        """The inner builder's ``cancel`` (an ``AsyncFetcher``'s), if it has one."""
        getattr(self.inner, "cancel", lambda: None)()

    def watch(self, window: Any) -> None:
        """The inner builder's ``watch`` (an ``AsyncFetcher``'s), if it has one."""
        getattr(self.inner, "watch", lambda w: None)(window)

    def _build(self, work: tuple[Any, ...], rec: Recorder) -> Any:
        k, indices = work[0], work[1]
        source = work[2] if len(work) > 2 else None  # a settled pipeline: indices is its batch's list
        if source is None and not self._auto:
            indices = [indices]
        elif source is None and type(indices) is PermutationSpan:
            indices = indices.rows()
        if self._batch_first and self._auto:
            try:
                return Recovered(self.inner._build(indices, rec), len(indices), [], 0, 0)
            except self._passthrough:
                raise
            except Exception:
                pass  # narrowed to its items below
        items, failures, replaced = self._apply(k, indices, self._outcomes(indices if source is None else source))
        skipped = len(indices) - len(items)
        # Items tried: the batch's, and under "replace" every substitute (each failing place ends
        # with one that did not fail: a failure record each, but the batch's own failing items).
        seen = len(indices) + (len(failures) if self._policy.on_error == "replace" else 0)
        if not items:
            return Recovered(SKIPPED, seen, failures, skipped, 0)
        rec.fetched()
        try:
            batch = self._collate(items if self._auto else items[0])
        except Exception as exc:
            if not failures:
                raise
            # next() raises the collate error, and the failed items of its batch still count.
            rec.failed()
            return Recovered(Failure(no_stop_iteration(exc, "collate_fn", "building a batch")), seen,
                             failures, 0, 0)
        rec.done()
        return Recovered(batch, seen, failures, skipped, replaced)

    def _apply(self, k: int, indices: Sequence[Any], outcomes: list[Any]) -> tuple[list[Any], list[FailureRecord], int]:
        """The batch's items after the policy, its failure records and the items replaced."""
        epoch = self._epoch_key[1]
        replace = self._policy.on_error == "replace"
        items: list[Any] = []
        failed: dict[int, list[FailureRecord]] = {}  # place -> its records (its failed substitutes' after)
        for place, out in enumerate(outcomes):
            if type(out) is not ItemError:
                items.append(out)
                continue
            exc, out.exc = out.exc, None  # the cycle cut (ItemError)
            assert exc is not None
            failed[place] = [record(epoch, self._dataset, _plain(indices[place]), exc)]
            del exc
            if replace:
                items.append(None)  # its substitute's place
        if replace and failed:
            for place, item in self._substitutes(k, failed, len(outcomes)).items():
                items[place] = item
        return items, [r for records in failed.values() for r in records], len(failed) if replace else 0

    def _substitutes(self, k: int, failed: dict[int, list[FailureRecord]], seen: int) -> dict[int, Any]:
        """The first substitute that does not fail of each place of batch ``k`` (of ``seen``
        items) in ``failed``, in rounds (see the module); each failed substitute's record is
        appended to its place's list.

        Raises:
            SubstitutesFailed: ``MAX_REPLACE_ATTEMPTS`` substitutes of a place failed (of the
                first such place; the last one its cause; the records of the places up to it).
        """
        seed, epoch = self._epoch_key
        if self._n == 0:
            raise RuntimeError(f"on_error='replace': batch {k} of epoch {epoch}: the dataset is empty, "
                               "there is no item to substitute")
        # Each place's last failure, dropped once it has a substitute: this frame must not hold
        # one when it returns (its traceback reaches this frame: a cycle only gc would free).
        last: dict[int, Exception] = {}
        got: dict[int, Any] = {}
        waiting = list(failed)
        for attempt in range(MAX_REPLACE_ATTEMPTS):
            if not waiting:
                break
            js = [substitute_index(seed, epoch, k, place, attempt, self._n) for place in waiting]
            try:
                outs = self._many(js)
            except BaseException:  # an interrupt, the epoch's cancellation: passes, this frame let go
                last.clear()
                raise
            still = []
            for place, j, out in zip(waiting, js, outs):
                if type(out) is ItemError:
                    assert out.exc is not None
                    last[place], out.exc = out.exc, None
                    failed[place].append(record(epoch, self._dataset, j, last[place]))
                    still.append(place)
                else:
                    got[place] = out
                    last.pop(place, None)
            waiting, outs, out = still, [], None
        if not waiting:
            return got
        place = waiting[0]
        last = {place: last[place]}
        records = [r for p, rs in failed.items() if p <= place for r in rs]
        # Those places' substitutes were tried, failed (a record each) or not: items seen too.
        tried = len(records) - sum(p <= place for p in failed) + sum(p < place for p in got)
        raise SubstitutesFailed(
            f"on_error='replace': batch {k} of epoch {epoch}, place {place}: {MAX_REPLACE_ATTEMPTS} substitutes "
            f"failed in a row (the data may be mostly broken; see loader.failures)", seen + tried,
            records) from last.pop(place)


def item_outcomes(
    one: Callable[[Any], Any], passthrough: tuple[type[BaseException], ...] = ()
) -> Callable[[Sequence[Any]], list[Any]]:
    """``outcomes(indices)`` over the item path ``one``, on the calling thread (``passthrough``
    exceptions end it)."""

    def outcomes(indices: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for index in indices:
            try:
                out.append(one(index))
            except passthrough:
                raise
            except Exception as exc:
                out.append(ItemError(exc))
        return out

    return outcomes


def bisected(
    many: Callable[[Sequence[Any]], list[Any]], indices: Sequence[Any], passthrough: tuple[type[BaseException], ...]
) -> list[Any]:
    """``outcomes(indices)`` by halves: ``many`` (a batch fetched at once, which raises its first
    error) over each half that fails, down to single items: O(failures x log(batch)) batch
    fetches, each concurrent (an ``AsyncDataset``'s items, whose batch fetch stops at its first
    failure)."""
    if not indices:
        return []
    try:
        return many(indices)
    except passthrough:
        raise
    except Exception as exc:
        if len(indices) == 1:
            return [ItemError(exc)]
    mid = len(indices) // 2
    return bisected(many, indices[:mid], passthrough) + bisected(many, indices[mid:], passthrough)


def halved(
    many: Callable[[Sequence[Any]], list[Any]], indices: Sequence[Any], passthrough: tuple[type[BaseException], ...]
) -> list[Any]:
    """``bisected`` over each half of ``indices``: the outcomes of a batch whose fetch as a
    whole just failed (fetching it whole again would only repeat the failing requests)."""
    if len(indices) < 2:
        return bisected(many, indices, passthrough)
    mid = len(indices) // 2
    return bisected(many, indices[:mid], passthrough) + bisected(many, indices[mid:], passthrough)


def _safe(one: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def safe(index: Any) -> Any:
        try:
            return one(index)
        except Exception as exc:
            return ItemError(exc)

    return safe


def policy_builder(
    policy: ErrorPolicy, inner: Builder, dataset: Any, auto_collation: bool, lanes: LanePool | None,
    item_concurrency: int, transform: Callable[[Any], Any] | None, epoch_key: tuple[int, int],
) -> PolicyBuilder:
    """``inner`` (the epoch's named builder) under ``policy``: its item path and whether it
    builds batches first (see the module)."""
    kind = inner.kind
    passthrough: tuple[type[BaseException], ...] = ()
    if kind is BuilderKind.ASYNC:
        from dataloader._engine.async_build import AsyncFetcher, EpochCancelled  # lazy: asyncio only for async datasets

        assert isinstance(inner, AsyncFetcher)
        fetcher = inner
        passthrough = (EpochCancelled,)
        one: Callable[[Any], Any] = lambda index: fetcher.fetch([index] if auto_collation else index)[0]
        many: Callable[[Sequence[Any]], list[Any]] = lambda indices: fetcher.fetch(list(indices))
        outcomes: Callable[[Sequence[Any]], list[Any]] = (
            (lambda indices: halved(many, indices, passthrough)) if auto_collation else item_outcomes(one, passthrough))
        substitutes = item_outcomes(one, passthrough)
        batch_first = not fetcher.settles
        if fetcher.settles:  # one concurrent fetch gives every item's outcome: no narrowing
            outcomes = substitutes = lambda batch: fetcher.settled(batch, ItemError)
    else:
        items = inner if isinstance(inner, Fetcher) else ItemsFetcher(dataset, inner._collate, transform, epoch_key)
        outcomes = substitutes = item_outcomes(items.fetch_item)
        if kind is BuilderKind.LANES and lanes is not None:
            safe = _safe(items.fetch_item)
            outcomes = substitutes = lambda indices: fetch_with_lanes(lanes, safe, indices, item_concurrency)
        batch_first = kind not in (BuilderKind.ITEMS, BuilderKind.LANES, BuilderKind.SINGLE)
    return PolicyBuilder(inner, dataset, policy, auto_collation, outcomes, substitutes, batch_first, passthrough,
                         epoch_key)


class WatchedItems(MapItems):
    """``MapItems`` of an ``AsyncDataset`` epoch under a policy whose batches do not settle
    (one ``__getitems__`` coroutine a batch; else ``async_policy.SettledItems``): each worker
    hands the ``PolicyBuilder`` the epoch's window (its ``AsyncFetcher`` then abandons batches
    once the epoch is closed).  Workers build one batch at a time (no batches claimed ahead:
    a failing batch is narrowed by halves, fetch after fetch)."""

    def __init__(
        self, indices: Iterator[Any], fetch: Builder, setup: WorkerSetup, num_workers: int, stats: EpochStats
    ) -> None:
        super().__init__(indices, fetch, setup, num_workers, stats)
        self._watched = fetch

    def start_worker(self, worker_id: int, window: Window) -> _context.WorkerInfo:
        watch = getattr(self._watched, "watch", None)
        if watch is not None:
            watch(window)
        return super().start_worker(worker_id, window)
