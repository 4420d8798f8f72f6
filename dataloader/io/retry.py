"""``Retry``: when a built-in dataset tries an item again.

Each dataset classifies its own failures as transient or final (``FileDataset``:
some errno values; ``HttpDataset``: statuses 408/429/500/502/503/504 and
transport errors; both: the per-attempt time-out).  ``run``/``run_async`` try a
transient failure again after an exponential backoff with "full jitter" (a
uniform draw in ``[0, backoff]``), as in "Exponential Backoff And Jitter" (AWS
Architecture Blog, 2015); a failure that says how long to wait (HTTP ``Retry-After``
on 429/503, ``retry_after_s``) waits at least that long, capped by ``max_backoff_s``
so that a server cannot stall an item for longer than the retry allows.  ``ObjectStoreDataset`` does not loop here: it turns
its ``Retry`` into the store client's own retry configuration (``store_config``).

Defaults and where they came from:

- ``max_attempts=3``: the AWS SDKs' "standard" retry mode (3 attempts in all).
- ``initial_backoff_s=0.1``, ``max_backoff_s=15.0``, ``multiplier=2.0``: the
  Rust ``object_store`` crate's ``BackoffConfig::default()`` (100 ms, 15 s, base 2),
  which ``ObjectStoreDataset`` runs on.
- ``attempt_timeout_s=30.0``: ``object_store``'s default request time-out
  (``ClientOptions``, 30 s).
"""

from __future__ import annotations

import math
import numbers
import random
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np

__all__ = ["AttemptTimeout", "Retry", "seconds_delta"]

T = TypeVar("T")
# The longest span a datetime.timedelta holds, minus a margin (timedelta(seconds=...) raises
# OverflowError past it): obstore's durations are clamped to it (about 2,700 years).
_MAX_DELTA_S = timedelta.max.total_seconds() / 1000
_MAX_RETRIES = (1 << 63) - 1  # object_store counts retries in a Rust usize: larger is OverflowError


def seconds_delta(seconds: float) -> timedelta:
    """``timedelta(seconds=seconds)``, clamped to what a ``timedelta`` holds (no OverflowError)."""
    return timedelta(seconds=min(float(seconds), _MAX_DELTA_S))


def _as_float(name: str, value: Any) -> float:
    """``float(value)``; an int past a float's range (about 1.8e308) is a ``ValueError``.

    Raises:
        ValueError: ``value`` is an int too large for a float, naming ``name`` and its size
            (not its digits: ``str`` of an int over 4,300 digits raises by itself).
    """
    try:
        return float(value)
    except OverflowError:  # only an int overflows
        digits = int(abs(int(value)).bit_length() * math.log10(2)) + 1
        raise ValueError(
            f"{name} is an int of about {digits} digits, past a float's range (about 1.8e308): "
            "it must be a number a float holds"
        ) from None


def _is_bool(value: Any) -> bool:
    """True for ``bool`` and NumPy's ``bool_`` (neither counts as a number here)."""
    return isinstance(value, (bool, np.bool_))


def _check_asked(value: object) -> float:
    """A server's asked wait (``retry_after_s``) as seconds >= 0 (``inf`` is capped later).

    Raises:
        TypeError: not a number (a bool or a string is none), naming the value.
        ValueError: nan or below 0, naming the value; an int past a float's range.
    """
    if _is_bool(value) or not isinstance(value, numbers.Real):
        raise TypeError(f"retry_after_s must be a number of seconds or None, got {value!r} ({type(value).__name__})")
    seconds = _as_float("retry_after_s", value)
    if not seconds >= 0:  # nan fails too
        raise ValueError(f"retry_after_s={value!r} must be >= 0 (seconds)")
    return seconds


class AttemptTimeout(TimeoutError):
    """One attempt ran past ``Retry.attempt_timeout_s`` (transient)."""


@dataclass(frozen=True, slots=True)
class Retry:
    """How often and how patiently to try an item again.

    Args:
        max_attempts: attempts in all, the first included (>= 1; 1 = no retry).
        initial_backoff_s: backoff before the second attempt, seconds (>= 0, finite).
        max_backoff_s: the most any backoff waits, seconds (>= initial_backoff_s, finite);
            also the cap on a wait a server asks for with HTTP ``Retry-After``.
        multiplier: growth of the backoff per attempt (>= 1, finite).  The backoff reaches
            ``max_backoff_s`` and stays there, for any number of attempts.
        jitter: wait a uniform random time in ``[0, backoff]`` instead of ``backoff``
            (spreads the retries of many items that failed together).
        attempt_timeout_s: seconds one attempt may take (connect, headers and the
            whole body; a tar shard streamed at its reader's pace bounds each connect and
            each blocking read instead); None for no limit.  A time-out is transient; after the last
            attempt the item fails with ``TimeoutError``.  ``FileDataset`` cannot
            interrupt a blocking read and ignores it.

    Thread-safety: immutable; one ``Retry`` may serve any number of datasets.

    Raises:
        TypeError: an argument of the wrong type, naming it and the value: ``max_attempts`` not
            an int, a seconds or ``multiplier`` field not a number (a bool is none), ``jitter``
            not a bool (``jitter="no"`` is refused, not taken as true).
        ValueError: an argument out of range, naming it: below its bound, or not finite
            (``nan`` or ``inf`` in any float field, ``attempt_timeout_s`` included: None is its
            "no limit"), or an int past a float's range (e.g. ``10**400``).
    """

    max_attempts: int = 3
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 15.0
    multiplier: float = 2.0
    jitter: bool = True
    attempt_timeout_s: float | None = 30.0

    def __post_init__(self) -> None:
        if _is_bool(self.max_attempts) or not isinstance(self.max_attempts, numbers.Integral):
            raise TypeError(f"max_attempts must be an int, got {self.max_attempts!r} ({type(self.max_attempts).__name__})")
        object.__setattr__(self, "max_attempts", int(self.max_attempts))  # a NumPy int is kept as an int
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts={self.max_attempts} must be >= 1")
        if not _is_bool(self.jitter):  # "no" or 0 would pass as truthy or falsy silently
            raise TypeError(f"jitter must be a bool, got {self.jitter!r} ({type(self.jitter).__name__})")
        object.__setattr__(self, "jitter", bool(self.jitter))  # numpy.True_ is kept as True
        for name in ("initial_backoff_s", "max_backoff_s", "multiplier"):
            value = getattr(self, name)
            if _is_bool(value) or not isinstance(value, numbers.Real):
                raise TypeError(f"{name} must be a number, got {value!r}")
            if not math.isfinite(_as_float(name, value)):  # nan and inf alike
                raise ValueError(f"{name}={value!r} must be finite")
        if self.initial_backoff_s < 0:
            raise ValueError(f"initial_backoff_s={self.initial_backoff_s} must be >= 0")
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(f"max_backoff_s={self.max_backoff_s} must be >= initial_backoff_s={self.initial_backoff_s}")
        if self.multiplier < 1:
            raise ValueError(f"multiplier={self.multiplier} must be >= 1")
        t = self.attempt_timeout_s
        if t is not None:  # a huge int is refused before the message prints its digits
            if _is_bool(t) or not isinstance(t, numbers.Real):
                raise TypeError(f"attempt_timeout_s must be a number or None, got {t!r}")
            if not math.isfinite(_as_float("attempt_timeout_s", t)):  # a socket refuses inf: None is "no limit"
                raise ValueError(f"attempt_timeout_s={t!r} must be finite (None: no limit)")
            if not t > 0:
                raise ValueError(f"attempt_timeout_s={t!r} must be > 0 or None")

    def backoff_s(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failed attempt (1 for the first):
        ``min(max_backoff_s, initial_backoff_s * multiplier ** (failures - 1))``, or a uniform
        draw below it with ``jitter``.  Any ``failures`` works: the cap is applied before the
        power, which is never computed past it (``2.0 ** 1024`` overflows)."""
        cap = self._undrawn_backoff_s(max(0, failures - 1))
        return random.uniform(0.0, cap) if self.jitter else cap

    def _undrawn_backoff_s(self, n: int) -> float:
        initial, top, base = float(self.initial_backoff_s), float(self.max_backoff_s), float(self.multiplier)
        if n == 0 or initial == 0.0 or base == 1.0:
            return min(top, initial)
        # initial * base ** n >= top exactly when n >= log(top / initial) / log(base): cap there.
        if n >= (math.log(top) - math.log(initial)) / math.log(base):
            return top
        try:
            return min(top, initial * base**n)
        except OverflowError:  # base ** n alone overflows, times a tiny initial it does not
            return min(top, math.exp(math.log(initial) + n * math.log(base)))

    def wait_s(self, failures: int, exc: BaseException | None = None, *, retry_after_s: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failure, ``exc``.

        ``backoff_s(failures)``, or longer when the server asked for a wait (seconds: HTTP
        ``Retry-After`` on a 429 or 503): at least that wait, but never more than
        ``max_backoff_s``.  The wait asked is ``retry_after_s`` when given, else
        ``exc.retry_after_s`` where ``exc`` has one (``HttpDataset``'s errors carry it), else none.

        Raises:
            TypeError: ``retry_after_s`` not a number (a bool or a string is none).
            ValueError: ``retry_after_s`` nan or below 0 (``inf`` is taken: capped).
        """
        wait = self.backoff_s(failures)
        if retry_after_s is not None:
            asked: float | None = _check_asked(retry_after_s)
        else:
            asked = getattr(exc, "retry_after_s", None)
        if asked is not None:
            wait = max(wait, min(float(asked), self.max_backoff_s))
        return wait

    def run(self, attempt: Callable[[], T], transient: Callable[[BaseException], bool]) -> T:
        """Call ``attempt()`` until it returns, or fails finally or for the last time.

        Raises:
            The last attempt's exception (a final one at once).
        """
        failures = 0
        while True:
            try:
                return attempt()
            except Exception as exc:
                failures += 1
                if failures >= self.max_attempts or not transient(exc):
                    raise
                wait = self.wait_s(failures, exc)
            time.sleep(min(wait, threading.TIMEOUT_MAX))  # time.sleep overflows past ~292 years

    async def run_async(
        self,
        attempt: Callable[[], Awaitable[T]],
        transient: Callable[[BaseException], bool],
        what: str | Callable[[], str],
        deadline: float | None = None,
    ) -> T:
        """``run`` for a coroutine, each attempt bounded by ``attempt_timeout_s``.

        ``what`` names the item in a time-out's message: a string, or a function that
        makes it (called only then).  ``deadline``: the running loop's time (``loop.time()``,
        seconds) by which every attempt and backoff must have ended, or None (no bound
        beyond ``attempt_timeout_s``).  An attempt is bounded by the earlier of the two with
        one timer (an ``asyncio.timeout`` around the call costs a second timer per item).

        Raises:
            TimeoutError: ``deadline`` passed (no message: the caller names its own bound;
                final, not retried); or the last attempt timed out (``AttemptTimeout``,
                naming ``what``).
            The last attempt's exception otherwise (a final one at once).
        """
        import asyncio

        loop = asyncio.get_running_loop()
        per_attempt = self.attempt_timeout_s
        failures = 0
        while True:
            expired = False  # the deadline, not attempt_timeout_s, ended the attempt
            try:
                ends = None if per_attempt is None else loop.time() + per_attempt
                at_deadline = deadline is not None and (ends is None or deadline <= ends)
                timer = asyncio.timeout_at(deadline if at_deadline else ends)
                try:
                    async with timer:
                        return await attempt()
                except TimeoutError:
                    expired = at_deadline and timer.expired()  # not an attempt's own TimeoutError
                    if expired:
                        raise TimeoutError() from None
                    name = what() if callable(what) else what
                    raise AttemptTimeout(
                        f"{name}: attempt {failures + 1} of {self.max_attempts} timed out "
                        f"after {self.attempt_timeout_s} s (attempt_timeout_s)"
                    ) from None
            except Exception as exc:
                failures += 1
                if expired or failures >= self.max_attempts or not (isinstance(exc, AttemptTimeout) or transient(exc)):
                    raise
                wait = self.wait_s(failures, exc)
            if deadline is not None and loop.time() + wait >= deadline:
                await asyncio.sleep(max(0.0, deadline - loop.time()))
                raise TimeoutError()
            await asyncio.sleep(wait)

    def store_config(self) -> dict[str, Any]:
        """This retry as ``object_store``'s ``RetryConfig`` (obstore's ``retry_config``).

        ``max_retries`` is ``max_attempts - 1`` (at most ``2**63 - 1``); the backoff is the
        same (the crate applies its own jitter); ``retry_timeout`` bounds all retries together:
        here the sum of every attempt's time-out and backoff.  Durations past what a
        ``timedelta`` holds are clamped to about 2,700 years.
        """
        per_attempt = self.attempt_timeout_s if self.attempt_timeout_s is not None else 300.0
        attempts = float(min(self.max_attempts, 1 << 53))  # an int past a float's range overflows
        total = per_attempt * attempts + self.max_backoff_s * (attempts - 1)
        return {
            "max_retries": min(self.max_attempts - 1, _MAX_RETRIES),
            "backoff": {
                "init_backoff": seconds_delta(self.initial_backoff_s),
                "max_backoff": seconds_delta(max(self.max_backoff_s, 1e-3)),
                "base": float(max(self.multiplier, 1.0 + 1e-9)),
            },
            "retry_timeout": seconds_delta(total),
        }
