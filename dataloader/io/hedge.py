"""Hedged requests: a second request for a slow item, the first answer wins.

An ordered loader waits for its slowest item: one request in a hundred that takes
seconds (object stores do this: S3's performance guidance is to send a second request
when one is slower than usual) stalls a whole batch.  ``Hedge.run(request)`` starts
``request()``; if it has not answered within the hedge delay, it starts ``request()``
again (the *hedge*); if neither has answered one delay later, a second hedge, and so on
up to ``HEDGE_MAX_PER_ITEM`` (2) hedges.  The first of them to succeed is the item: the
others are cancelled (their connections closed).  One value comes out per item, never
two: a loser's value, if it arrives in the same loop turn, is dropped.  (A second hedge:
with 1% of requests slow, a hedge is itself slow once in a hundred, and with one hedge
one item in 10,000 waited the slow request out: 0.64 items, a 2 s stall, an epoch of 6,400.)

- **Delay** (``hedge_delay``, seconds): ``"auto"`` (the default) derives it from the
  latencies observed, ``HEDGE_FACTOR`` (2) times their ``HEDGE_QUANTILE`` (95th
  percentile) over the last ``HEDGE_WINDOW`` (1,000) requests that answered, once
  ``HEDGE_MIN_SAMPLES`` (50) have; before that no item is hedged.  A float > 0 fixes
  it.  ``0``, ``False`` or ``None`` turn hedging off: the dataset makes exactly the
  requests it made without it (no ``Hedge`` at all).
- **Budget** (``hedge_budget``, a share of requests, default 0.05): a token bucket.
  Each item's first request adds ``budget`` tokens (at most ``HEDGE_BURST``, 10, kept);
  a hedge spends one, and is not sent without one (a request still unanswered looks for
  a token again after each further delay).  So at any time ``hedges_sent <=
  budget * requests``: never more than 5% extra requests by default, whatever the
  latencies do (an overloaded server that slows every request is not sent 2x the load).
- **Errors**: a contender that fails lets the others run on; when all fail, the first
  request's exception is the item's (the one it would have had without a hedge).  Each
  contender is a whole fetch, with the dataset's ``Retry`` (every attempt bounded by
  ``attempt_timeout_s``, retried after its backoff); the item's own ``timeout_s`` bounds
  them all together.
- **Latency recorded**: the winner's, from its own start (a hedge that wins records its
  own short latency, so the delay does not drift up with the slow requests it cut).

Where the defaults came from: p95 x 2 is the rule of thumb of "The Tail at Scale" (Dean
and Barroso, 2013: hedge after the 95th-percentile latency, for about 5% more requests)
and of litdata's ``hedge_delay``; 1,000 samples keep the 95th percentile within a few
percent of the true one for a stationary latency while following a change within
seconds at thousands of requests per second.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

__all__ = [
    "HEDGE_BURST", "HEDGE_FACTOR", "HEDGE_MAX_PER_ITEM", "HEDGE_MIN_SAMPLES", "HEDGE_QUANTILE", "HEDGE_WINDOW",
    "Hedge", "check_hedge",
]

T = TypeVar("T")

HEDGE_WINDOW = 1000  # latencies kept for the derived delay (see the module)
HEDGE_MIN_SAMPLES = 50  # latencies observed before a derived delay exists
HEDGE_QUANTILE = 0.95  # "The Tail at Scale": hedge past the 95th percentile
HEDGE_FACTOR = 2.0  # ... times two (issue 25, litdata)
HEDGE_BURST = 10.0  # tokens kept at most: hedges sent back to back after a calm spell
# Hedges per item at most, one a delay: with requests slow independently at a share p, an
# item stays slow with p**3 instead of p**2 (1% slow: one item in 10,000 waits the slow
# request out with one hedge, the stall that then decides a 100-batch epoch's p99)
HEDGE_MAX_PER_ITEM = 2
_REFRESH = 32  # latencies recorded between two computations of the derived delay


def check_hedge(delay: Any, budget: Any, range_threshold: int | None = None) -> Hedge | None:
    """A ``Hedge`` for a dataset's ``hedge_delay`` and ``hedge_budget``, or None when off.
    ``range_threshold``: the dataset's ``range_parallel_threshold`` (a dataset making ranged
    GETs hedges no item: an explicit delay there is refused rather than ignored).

    Raises:
        ValueError, TypeError: see ``Hedge``; ValueError: a delay in seconds with a
            ``range_threshold``.
    """
    if delay is None or delay is False or (not isinstance(delay, str) and delay == 0):
        Hedge.check_budget(budget)
        return None
    hedge = Hedge(delay, budget)
    if range_threshold is not None and not isinstance(delay, str) and hedge.budget > 0:
        raise ValueError(f"hedge_delay={delay!r} with range_parallel_threshold={range_threshold!r}: a dataset "
                         "making ranged GETs hedges no item; leave hedge_delay='auto' or pass 0")
    return hedge if hedge.budget > 0 else None


class Hedge:
    """Hedged requests for one dataset (see the module).

    Args:
        delay: seconds after which a slow request is hedged (a float > 0), or ``"auto"``:
            ``HEDGE_FACTOR`` x the ``HEDGE_QUANTILE`` of recent latencies (none before
            ``HEDGE_MIN_SAMPLES`` latencies).
        budget: hedges per request at most, a share in [0, 1] (0.05: 5% extra requests).

    Thread-safety: ``run`` may be awaited on several event loops (threads) at once; the
    latency window, the token bucket and the counts are changed under one lock.

    Raises:
        ValueError: ``delay`` is a number <= 0 or not finite, or a string other than
            ``"auto"``; ``budget`` is outside [0, 1].
        TypeError: ``delay`` or ``budget`` is of another type.
    """

    def __init__(self, delay: float | str = "auto", budget: float = 0.05) -> None:
        if isinstance(delay, str):
            if delay != "auto":
                raise ValueError(f"hedge_delay={delay!r} must be 'auto', seconds > 0, or 0/False/None (off)")
            fixed: float | None = None
        elif isinstance(delay, bool) or not isinstance(delay, (int, float)):
            raise TypeError(f"hedge_delay must be 'auto', a number of seconds or None, got {type(delay).__name__}")
        else:
            try:
                fixed = float(delay)
            except OverflowError:  # an int past a float's range: not its 400 digits in the message
                raise ValueError("hedge_delay is an int past a float's range: it must be seconds > 0 "
                                 "and finite (0, False or None: off)") from None
            if not 0 < fixed < float("inf"):
                raise ValueError(f"hedge_delay={delay!r} must be > 0 and finite (0, False or None: off)")
        self.budget = self.check_budget(budget)
        self.fixed_delay_s = fixed
        self._fresh()

    def _fresh(self) -> None:
        """No latency observed, no token, no count yet."""
        self._lock = threading.Lock()
        self._latencies: deque[float] = deque(maxlen=HEDGE_WINDOW)
        self._recorded = 0
        self._derived_s: float | None = None
        self._tokens = 0.0
        self._counts = {"requests": 0, "hedges_sent": 0, "hedges_won": 0}

    def __getstate__(self) -> dict[str, Any]:
        """Its settings only (``pickle``, ``copy.deepcopy``): a copy starts with no latency
        observed, no token and no count, as a new dataset does."""
        return {"fixed_delay_s": self.fixed_delay_s, "budget": self.budget}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.fixed_delay_s = state["fixed_delay_s"]
        self.budget = state["budget"]
        self._fresh()

    @staticmethod
    def check_budget(budget: Any) -> float:
        """``budget`` validated: a share in [0, 1].

        Raises:
            TypeError: not a number.  ValueError: outside [0, 1].
        """
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise TypeError(f"hedge_budget must be a number in [0, 1], got {type(budget).__name__}")
        if not 0 <= budget <= 1:
            raise ValueError(f"hedge_budget={budget!r} must be in [0, 1] (a share of requests)")
        return float(budget)

    def delay_s(self) -> float | None:
        """The delay now, seconds; None while ``"auto"`` has too few latencies."""
        return self.fixed_delay_s if self.fixed_delay_s is not None else self._derived_s

    def counts(self) -> dict[str, int]:
        """``{"requests", "hedges_sent", "hedges_won"}`` so far: items fetched, hedges sent,
        hedges whose answer was the item's (a new dict)."""
        with self._lock:
            return dict(self._counts)

    def record(self, seconds: float) -> None:
        """Record one answered request's latency (seconds) in the window."""
        with self._lock:
            self._latencies.append(seconds)
            self._recorded += 1
            if self._recorded % _REFRESH == 0 and len(self._latencies) >= HEDGE_MIN_SAMPLES:
                ordered = sorted(self._latencies)
                self._derived_s = HEDGE_FACTOR * ordered[int(HEDGE_QUANTILE * (len(ordered) - 1))]

    def _start(self) -> float | None:
        """Count one item's request, earn its tokens; the delay to hedge it after."""
        with self._lock:
            self._counts["requests"] += 1
            self._tokens = min(self._tokens + self.budget, HEDGE_BURST)
        return self.delay_s()

    def _spend(self) -> bool:
        """Take a token for a hedge (False: none left, no hedge)."""
        with self._lock:
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            self._counts["hedges_sent"] += 1
            return True

    def won(self) -> None:
        """Count a hedge whose answer was the item's."""
        with self._lock:
            self._counts["hedges_won"] += 1

    async def run(self, request: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """``await request()``, hedged with more ``request()`` calls if it is slow (see the module).

        The first request runs inline, in the item's own task; a timer (``loop.call_later``)
        sends each hedge as a task of its own, and a hedge that answers first cancels the
        item's task (the first request) and hands it its answer.  An item answered in time
        costs one timer, nothing more.  Cancellations the item's task gets from elsewhere
        (``break``, ``close()``, ``timeout_s``) are told apart with ``Task.uncancel``.

        Raises:
            The first request's exception, when all fail (or it alone ran and failed).
        """
        import asyncio

        delay = self._start()
        started = time.perf_counter()
        if delay is None:
            value = await request()
            self.record(time.perf_counter() - started)
            return value
        race: _Race[T] = _Race(self, request, delay)
        try:
            try:
                value = await request()
            except BaseException as exc:  # CancelledError too: the hedge may have won
                failed: BaseException | None = exc
            else:
                failed = None
            race.running = False
            if race.took_over():
                return race.hedge_value()
            if failed is None:
                self.record(time.perf_counter() - started)
                return value
            if not race.hedges or not isinstance(failed, Exception):
                raise failed  # outside the handler: nothing chained
            return await race.hedge_or(failed)
        finally:
            race.end()


class _Race(Generic[T]):
    """One item's timer and hedges (see ``Hedge.run``); its callbacks run on the item's event
    loop, between the steps of the item's task, so no lock is needed here."""

    __slots__ = ("owner", "request", "delay", "loop", "task", "running", "cancelled", "hedges", "sent_at", "winner",
                 "timer")

    def __init__(self, owner: Hedge, request: Callable[[], Coroutine[Any, Any, T]], delay: float) -> None:
        import asyncio

        self.owner = owner
        self.request = request
        self.delay = delay
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None  # run() is awaited in a task
        self.task: asyncio.Task[Any] = task
        self.running = True  # the first request is still being awaited
        self.cancelled = False  # a hedge won and cancelled the item's task
        # In the order sent, and each one's start (perf_counter seconds); None until the
        # first hedge (an item answered in time allocates no list)
        self.hedges: list[asyncio.Task[T]] | None = None
        self.sent_at: list[float] | None = None
        self.winner: asyncio.Task[T] | None = None
        self.timer = self.loop.call_later(delay, self.late)

    def late(self) -> None:
        """The delay passed with no answer: send a hedge if a token allows (and look again
        after a further delay while fewer than ``HEDGE_MAX_PER_ITEM`` are out)."""
        if not self.running:
            return
        if self.owner._spend():
            if self.hedges is None or self.sent_at is None:
                self.hedges, self.sent_at = [], []
            self.sent_at.append(time.perf_counter())
            hedge = self.loop.create_task(self.request())
            hedge.add_done_callback(self.hedge_done)
            self.hedges.append(hedge)
        if len(self.hedges or ()) < HEDGE_MAX_PER_ITEM:
            self.timer = self.loop.call_later(self.delay, self.late)

    def hedge_done(self, task: Any) -> None:
        """A hedge answered while the first request runs: cancel it (``run`` takes over)."""
        if not task.cancelled() and task.exception() is None and self.running and self.winner is None:
            self.winner = task
            self.cancelled = True
            self.task.cancel()

    def took_over(self) -> bool:
        """True when a hedge won and its cancellation was the only one the item's task got.

        Raises:
            CancelledError: the item's task was cancelled from elsewhere too.
        """
        import asyncio

        if not self.cancelled:
            return False
        if self.task.uncancel() > 0:
            raise asyncio.CancelledError()
        return True

    def hedge_value(self) -> T:
        """The winning hedge's answer, counted and recorded as the item's."""
        assert self.winner is not None and self.hedges is not None and self.sent_at is not None
        self.owner.record(time.perf_counter() - self.sent_at[self.hedges.index(self.winner)])
        self.owner.won()
        return self.winner.result()

    async def hedge_or(self, failed: Exception) -> T:
        """The first hedge to answer, once the first request failed with ``failed``; when
        every hedge fails too, ``failed`` (the item's error without a hedge)."""
        import asyncio

        hedges = self.hedges or []
        pending = set(hedges)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for hedge in hedges:  # in the order sent: the same winner whichever loop turn
                if hedge in done and not hedge.cancelled() and hedge.exception() is None:
                    self.winner = hedge
                    return self.hedge_value()
        raise failed

    def end(self) -> None:
        """Stop the timer; cancel the hedges still running (their errors retrieved)."""
        self.running = False
        self.timer.cancel()
        for hedge in self.hedges or ():
            if not hedge.done():
                hedge.cancel()
            hedge.add_done_callback(_retrieve)


def _retrieve(task: Any) -> None:
    """A finished request's exception, retrieved (asyncio would log it as never retrieved)."""
    if not task.cancelled():
        task.exception()
