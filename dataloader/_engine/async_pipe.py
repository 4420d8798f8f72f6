"""The builder's side of an ``AsyncDataset``'s batches: the batches it handed the loop.

A ``Pipeline`` belongs to one builder thread (a worker, or the consumer with
``num_workers=0``).  It hands the loop thread a batch (``begin``: a ``async_run.BatchRun``
under the pipeline's ``async_run.Feed``); a worker's feed then claims the next batches
itself, on the loop thread (``claim``: ``async_run``), and says so on the pipeline's queue.
The pipeline takes the results from that one queue in the order they come, whichever batch
they belong to: each item is transformed at once, on this thread, into its batch's
``Sink``.  ``finish`` waits until the oldest batch is done and returns it; meanwhile the
later batches' items keep arriving and are transformed too.  ``head`` names the oldest
batch; when there is none it first parks the feed (no more claims) and takes the batches
the feed claimed before it parked.

Settled batches (``settled=True``: an error policy's, one ``__getitem__`` coroutine an item): an
item's ``Exception`` (its coroutine's or its transform's) is kept at its position in
``Sink.items`` (``Sink.errors`` lists those positions) and the batch's other items go on, so
one fetch gives every item's outcome; an interrupt still fails the batch (``Sink.failed``).

Cancellation: the waits poll ``cancelled()`` every ``ASYNC_POLL_S``; ``abandon`` cancels
the batches and waits (bounded) until each is done, so requests in flight are cancelled,
not completed.
"""

from __future__ import annotations

import collections
import queue
import time
from collections.abc import Callable, Sequence
from typing import Any

from dataloader import _context
from dataloader._constants import SHUTDOWN_JOIN_TIMEOUT_S
from dataloader._engine.async_loop import LoopRun
from dataloader._engine.async_run import BEGUN, ENDED, PARKED, STOPPED, BatchRun, Feed
from dataloader._engine.async_spread import Batch, FeedGroup, split

__all__ = ["ASYNC_POLL_S", "EpochCancelled", "Pipeline", "Sink"]

ASYNC_POLL_S = 0.02  # how soon a waiting builder sees its epoch cancelled (seconds)


class EpochCancelled(Exception):
    """The batch was abandoned because its epoch was closed (never shown to a user)."""


class Sink:
    """One batch's results on the builder's thread: the transformed items and the first
    error by position (``failed``: ``[pos, exception]``, or empty); settled, the positions
    whose ``items`` entry is that item's exception (``errors``, in the order they came).
    ``tag``: what the batch was handed over with (``Pipeline.begin``, ``claim``), or None."""

    __slots__ = ("k", "indices", "tag", "runs", "left", "items", "filled", "failed", "errors", "done")

    def __init__(self, k: int, indices: Sequence[Any], tag: Any = None) -> None:
        self.k, self.indices, self.tag = k, indices, tag
        self.runs: tuple[BatchRun, ...] = ()  # its parts (one per loop with items of it), set by Pipeline._run
        self.left = 0  # parts that did not send ENDED yet
        self.items: list[Any] = [None] * len(indices)
        self.filled = 0
        self.failed: list[Any] = []
        self.errors: list[int] = []
        self.done = False


class Pipeline:
    """The batches one builder thread handed the loop (see the module).

    Args:
        loop: the run of the loader's event loop.
        dataset: the ``AsyncDataset``.
        limit: item coroutines in flight at most over all its batches (``item_concurrency``).
        getitems: one ``__getitems__`` coroutine a batch (else one ``__getitem__`` an item).
        transform: per-item transform, or None.
        claim: on the loop thread, the next batch as ``(k, indices)`` (or ``(k, indices,
            tag)``: ``Sink.tag``) without waiting, or None (none published); None: the
            pipeline never claims (``num_workers=0``).
        cancelled: whether the epoch was closed.
        settled: its batches are settled (see the module; not with ``getitems``).

    Thread-safety: one builder thread, and the loop thread for what the feed calls.
    """

    def __init__(
        self, loop: LoopRun, dataset: Any, limit: int, getitems: bool, transform: Callable[[Any], Any] | None,
        claim: Callable[[], tuple[Any, ...] | None] | None, cancelled: Callable[[], bool],
        settled: bool = False,
    ) -> None:
        self.loop, self.dataset, self.getitems, self.transform = loop, dataset, getitems, transform
        self.settles = settled and not getitems
        self.claim, self.cancelled = claim, cancelled
        self.out: queue.SimpleQueue = queue.SimpleQueue()
        self.group = FeedGroup(limit, self.out, self._claimed if claim is not None else None)
        self.feeds = tuple(Feed(run, self.group, self.out) for run in (loop, *loop.peers))  # a feed per loop
        self.group.join(self.feeds)
        self.pending: collections.deque[Sink] = collections.deque()
        self.parked = claim is None  # builder thread only: the feed was told to claim no more
        self.settled = claim is None  # builder thread only: ... and it said so (PARKED, STOPPED)

    def _run(self, k: int, indices: Sequence[Any], tag: Any = None) -> Batch:
        """Batch ``k``: its sink, and a part for each loop that has items of it (``async_spread``)."""
        sink, batch = Sink(k, indices, tag), Batch()
        per_item = self.transform is not None
        sink.runs = tuple(
            BatchRun(feed, self.dataset, indices, self.getitems, per_item, sink, self.settles, order=order,
                     batch=batch, k=k)
            for feed, order in zip(self.feeds, split(indices, len(self.feeds), self.getitems, k)) if order
        )
        sink.left = len(sink.runs)
        return batch

    def _claimed(self) -> Batch | None:
        """On a loop thread, under the group's lock (``FeedGroup.claim_for``): the next batch,
        announced to the builder."""
        got = self.claim() if self.claim is not None else None
        if got is None:
            return None
        batch = self._run(*got)
        self.out.put((batch.parts[0].sink, BEGUN, True, None))
        return batch

    def begin(self, k: int, indices: Sequence[Any], tag: Any = None) -> None:
        """Hand the loop batch ``k`` (after those before it); ``tag``: its ``Sink.tag``.

        Raises:
            RuntimeError: the loader's event loop was stopped.
        """
        batch = self._run(k, indices, tag)
        self.pending.append(batch.parts[0].sink)
        self.group.came(batch)
        try:
            for part in batch.parts:
                part.feed.owner.call(part.feed.add, part)
        except BaseException:
            self.pending.pop()
            raise

    def head(self) -> int:
        """The oldest batch not finished (its ``k``), or -1: there is none, and the feed
        claims no more (it was parked; -1 also when the epoch was closed meanwhile)."""
        if not self.pending and not self.parked:
            self.parked = True
            try:
                self.loop.check()
                self.group.park()
                while self._take(self._next()) != PARKED:
                    pass
                self.settled = True
            except (EpochCancelled, RuntimeError):
                return -1
        return self.pending[0].k if self.pending else -1

    def finish(self) -> Sink:
        """The oldest batch once it is done (it is then no longer pending): its items
        transformed, or its first error by position (``Sink.failed``).

        Raises:
            ``EpochCancelled`` once the epoch is closed; ``RuntimeError`` when the loader's
            event loop stopped under an open epoch (the batch stays pending: ``abandon``).
        """
        sink = self.pending[0]
        while not sink.done:
            self._take(self._next())
        self.pending.popleft()
        return sink

    def _next(self) -> Any:
        while True:
            try:
                return self.out.get(timeout=ASYNC_POLL_S)
            except queue.Empty:
                if self.cancelled():
                    raise EpochCancelled from None
                if not self.loop.alive():  # (any of its loops)
                    raise RuntimeError("the DataLoader's event loop stopped while a batch was being fetched") from None

    def _take(self, msg: Any) -> int:
        """Act on one message of the loop (see ``async_run``); returns its ``pos``."""
        sink, pos, ok, value = msg
        msg = None
        try:
            if pos >= 0:
                self._put(sink, pos, ok, value)
            elif pos == ENDED:
                for p, good, v in value:
                    self._put(sink, p, good, v)
                sink.left -= 1
                if sink.left == 0:
                    sink.done, sink.runs = True, ()  # no cycle left: each part let go of the sink
            elif pos == BEGUN:
                self.pending.append(sink)
        finally:
            value = v = None  # no local of this frame (in a transform error's traceback) holds a result
        return pos

    def _put(self, sink: Sink, pos: int, ok: bool, value: Any) -> None:
        failed = sink.failed
        if failed and pos > failed[0]:
            return
        if not ok:
            if self.settles and isinstance(value, Exception):
                self._settle(sink, pos, value)
            else:
                failed[:] = (pos, value)
            return
        if self.transform is None:
            sink.items[pos] = value
            sink.filled += 1
            return
        saved = _context.swap_index(sink.indices[pos])
        try:
            sink.items[pos] = self.transform(value)
            sink.filled += 1
        except BaseException as exc:
            tb = exc.__traceback__
            exc = exc.with_traceback(tb.tb_next if tb is not None else None)  # not this frame
            if self.settles and isinstance(exc, Exception):
                self._settle(sink, pos, exc)
                return
            failed[:] = (pos, exc)
            for part in sink.runs:
                try:
                    part.feed.owner.call(part.fail, pos)
                except RuntimeError:
                    pass
        finally:
            _context.set_index(saved)

    @staticmethod
    def _settle(sink: Sink, pos: int, exc: Exception) -> None:
        """A settled batch's item at ``pos`` failed with ``exc``: kept in its place."""
        sink.items[pos] = exc
        sink.errors.append(pos)
        sink.filled += 1

    def abandon(self, everything: bool = True) -> None:
        """Cancel the batches and wait (bounded) until each is done; ``everything=False``:
        the oldest only (else the feed also claims no more)."""
        if everything and self.settled and not self.pending:
            return
        drop = self.pending if everything else collections.deque(list(self.pending)[:1])
        stops = 0 if everything else -1  # STOPPED messages to wait for (one a loop), -1: none
        try:
            if everything:
                self.parked = True
                self.loop.check()
                self.group.park()  # no claim after this: every BEGUN comes before the STOPPEDs
                for feed in self.feeds:
                    feed.owner.call(feed.stop)
                    stops += 1
            elif drop:
                for part in drop[0].runs:
                    part.feed.owner.call(part.cancel)
        except RuntimeError:  # the loop was stopped: its stop cancelled them
            drop.clear()
            stops = len(self.feeds) + 1  # never met: wait for the loop thread to end
        stopped = stops < 0
        deadline = time.monotonic() + SHUTDOWN_JOIN_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0 and self.loop.alive():
            if stopped and all(s.done for s in drop):
                break
            try:
                if self._take(self.out.get(timeout=min(left, ASYNC_POLL_S * 5))) == STOPPED:
                    stops -= 1
                    stopped = stops == 0
            except queue.Empty:
                pass
        self.settled = self.settled or (everything and stopped)
        if everything:
            self.pending.clear()
        elif self.pending:
            self.pending.popleft()
