"""A builder's items spread over several event loops (``event_loops > 1``): a feed per loop.

A builder (a worker, or the consumer with ``num_workers=0``) has one ``async_run.Feed`` on
each loop of the run, and a ``FeedGroup`` that they share.  Each batch is split by index
(``split``): the item ``index`` at position ``pos`` belongs to loop ``index % n`` (an index
that is not an int: ``pos % n``; an ``async def __getitems__`` batch, one coroutine: batch
``k`` runs on loop ``k % n``, ``k`` its number, so that batches of a size that is a multiple
of ``n`` do not all land on one loop), and
that loop's share of the batch (a ``BatchRun`` with its positions, a *part*) runs on that
loop only: its ``__getitem__`` is called there, its coroutine awaited there, and its
results put straight on the builder's queue, from that loop's thread.  No item's start or
outcome goes through another loop: each loop parses its own share of the responses, and the
builder counts the parts of a batch as they end (a batch is done when every part is).  What
an item is never depends on its loop, hence outputs identical for any ``n``; with one loop
a batch is one part and the group one feed.

What the feeds share, under the group's lock (never held across an await or a callback):

- the budget: ``item_concurrency`` lanes at most over all the builder's loops (``take``,
  ``release``).  A feed that has items waiting and got no slot is *hungry*; a slot released
  on another loop wakes it (one ``call_soon_threadsafe``), so a loop with nothing to do
  gives its slots to those that have;
- the claims of batches ahead (``claim_for``): any loop with nothing left to start claims
  the next batch (the window's ``try_claim``, through the builder's ``claim``), once one item
  of the last batch came back and no other loop is hungry; the claimer starts its own part
  at once and hands the others to their loops;
- ``park``: no more claims, said on the builder's queue (``PARKED``) after every ``BEGUN``.

Errors: when the item at ``p`` fails, its part stops after ``p`` and tells the other parts
(``BatchRun.fail`` on their loops): each cancels what it has in flight after ``p`` and
still starts and awaits its items before ``p`` (on one loop these had all started), so the
batch fails with its first error by position, as the sequential loader.  A cancellation
(``Pipeline.abandon``, the run's stop) reaches every part on its own loop.

Thread-safety: ``FeedGroup``'s methods from any thread (the lock); each part and each feed
is touched by its own loop's thread only, after its construction.
"""

from __future__ import annotations

import operator
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dataloader._engine.async_run import BatchRun, Feed

__all__ = ["PARKED", "Batch", "FeedGroup", "loop_of", "split"]

PARKED = -4  # a message's pos: the feed claims no more batches


def loop_of(index: Any, pos: int, n: int) -> int:
    """The loop (``0 <= j < n``) that runs the item ``index`` at position ``pos`` of its batch."""
    try:
        return operator.index(index) % n
    except TypeError:
        return pos % n


def split(indices: Sequence[Any], n: int, getitems: bool, k: int = 0) -> list[Sequence[int]]:
    """The positions each of ``n`` loops runs of batch ``k`` (its number, >= 0), of
    ``indices`` (ascending; empty for a loop with none); ``getitems``: one ``__getitems__``
    coroutine, position 0 only, on loop ``k % n``."""
    if getitems:
        parts: list[Sequence[int]] = [() for _ in range(n)]
        parts[k % n] = range(1)
        return parts
    if n == 1:
        return [range(len(indices))]
    lists: list[list[int]] = [[] for _ in range(n)]
    for pos, index in enumerate(indices):
        lists[loop_of(index, pos, n)].append(pos)
    return list(lists)


class Batch:
    """One batch's parts (one per loop that has items of it, each joining as it is made) and
    how many are not done (``left``, under the group's lock once handed over)."""

    __slots__ = ("parts", "left")

    def __init__(self) -> None:
        self.parts: list[BatchRun] = []
        self.left = 0

    def join(self, part: BatchRun) -> None:
        self.parts.append(part)
        self.left += 1

    def came_back(self) -> bool:
        """One item of it at least ended (a value, an error, cancelled)."""
        for part in self.parts:
            if part.ended:
                return True
        return False


class FeedGroup:
    """The budget and the claims the feeds of one builder share (see the module).

    Args:
        limit: item coroutines in flight at most over every loop (``item_concurrency``, >= 1).
        out: the builder's queue.
        claim: the next batch as a ``Batch`` whose ``BEGUN`` message was sent, or None (none
            published); called under the lock, on the thread of the loop that claims; None: no
            claims (``num_workers=0``).
    """

    def __init__(self, limit: int, out: queue.SimpleQueue, claim: Callable[[], Batch | None] | None) -> None:
        self.lock = threading.Lock()
        self.free = limit  # lanes that may still start, over every loop
        self.hungry: list[Feed] = []  # feeds with items waiting for a slot, in the order they asked
        self.out, self.claim = out, claim
        self.last: Batch | None = None  # the last batch that came, until it is done
        self.last_done = False  # ... it is done
        self.feeds: tuple[Feed, ...] = ()  # set once by the pipeline (``join``), before any batch
        self.shared = False  # more than one feed: the budget is taken and released under the lock

    def join(self, feeds: tuple[Feed, ...]) -> None:
        """The builder's feeds, one per loop (before any batch)."""
        self.feeds, self.shared = feeds, len(feeds) > 1

    def take(self, feed: Feed, waiting: int) -> int:
        """Slots for up to ``waiting`` new lanes of ``feed`` (the rest: ``feed`` is hungry)."""
        if not self.shared:  # one feed: only its loop's thread takes and releases
            got = min(waiting, self.free)
            self.free -= got
            return got
        with self.lock:
            got = min(waiting, self.free)
            self.free -= got
            if got < waiting and feed not in self.hungry:
                self.hungry.append(feed)
        return got

    def release(self, feed: Feed) -> None:
        """A lane of ``feed`` ended: its slot goes to the first hungry feed of another loop
        (woken on its loop), else back to the budget."""
        if not self.shared:
            self.free += 1
            return
        with self.lock:
            self.free += 1
            hungry = self.hungry
            if feed in hungry:  # its own items (if any) ask again: ``fill`` after this
                hungry.remove(feed)
            wake = hungry.pop(0) if hungry else None
        if wake is not None:
            try:
                wake.owner.loop.call_soon_threadsafe(wake.fill)
            except RuntimeError:  # its loop is closed: the run is stopping
                pass

    def came(self, batch: Batch) -> None:
        """``batch`` is the last one handed over (the builder's, or claimed)."""
        with self.lock:
            self.last, self.last_done = batch, False

    def part_done(self, part: BatchRun) -> None:
        """A part ended (on its loop); the batch is done when every part is."""
        with self.lock:
            batch = part.batch
            batch.left -= 1
            if batch.left == 0:
                batch.parts = []  # no cycle left (part -> batch -> part): nothing reads them any more
                if batch is self.last:
                    self.last, self.last_done = None, True

    def claim_for(self, feed: Feed) -> BatchRun | None:
        """On ``feed``'s loop, which has nothing left to start: the next batch, claimed now
        if one of the last batch's items came back and no other loop waits for a slot; its
        other parts handed to their loops.  Returns ``feed``'s part of it, or None."""
        last = self.last  # first without the lock (most calls end here): a stale answer only
        if not (self.last_done or (last is not None and last.came_back())):  # delays a claim
            return None
        with self.lock:
            if feed in self.hungry:
                self.hungry.remove(feed)  # nothing waits on it any more
            last = self.last
            if self.claim is None or self.hungry or not (self.last_done or (last is not None and last.came_back())):
                return None
            batch = self.claim()
            if batch is None:
                return None
            self.last, self.last_done = batch, False
        mine = None
        for part in batch.parts:
            if part.feed is feed:
                mine = part
                continue
            try:
                part.feed.owner.loop.call_soon_threadsafe(part.feed.add, part)
            except RuntimeError:  # its loop is closed: the run is stopping (the builder sees it)
                pass
        return mine

    def park(self) -> None:
        """Claim no more batches; say so on the builder's queue (``PARKED``), after every
        ``BEGUN`` of the claims before.  From the builder's thread."""
        with self.lock:
            self.claim = None
            self.out.put((None, PARKED, True, None))
