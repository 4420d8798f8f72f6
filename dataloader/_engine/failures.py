"""What the error policy reports: ``FailureRecord``, ``TooManyFailures`` and one epoch's ``FailureLog``.

A batch built under ``on_error="skip"`` or ``"replace"`` comes to the consumer as a
``Recovered`` (``dataloader._engine.recover``): the batch (or ``SKIPPED``), how many items
it was built from and the records of its failed items.  The consumer adds it to the epoch's
``FailureLog`` when ``next()`` takes it (``dataloader._engine.policed``), so records come in
epoch order whatever thread built the batch and whenever it finished, and the counts at any
``next()`` are those of the batches returned so far: what ``state_dict()`` saves.
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from dataloader._engine.error_policy import ErrorPolicy
from dataloader._sampling.state import check_state
from dataloader._validate import check_int

__all__ = [
    "COUNT_KEYS", "MAX_FAILURE_RECORDS", "MESSAGE_CHARS", "FailureLog", "FailureRecord", "TooManyFailures",
    "check_counts", "location_of", "message_of", "record", "spread_counts",
]

COUNT_KEYS = ("seen", "failed", "skipped", "replaced")  # FailureLog.counts(), a state's "failures"

# Records kept per epoch (loader.failures); the counts stay exact beyond.  1000 records of a
# path or URL and a message of at most MESSAGE_CHARS each: a few hundred KiB at most.
MAX_FAILURE_RECORDS = 1000
MESSAGE_CHARS = 300


class FailureRecord(NamedTuple):
    """One item that failed under ``on_error="skip"`` or ``"replace"`` (``DataLoader.failures``).

    Attributes:
        epoch: the epoch number (0 for the first ``iter(loader)``).
        index: the item's index in the dataset (a substitute's own index when a substitute
            failed too); for a stream that reports its own bad units (``set_failure_sink``,
            ``dataloader._engine.stream_policy``) the unit's number (``TarShardDataset``: the
            shard's place in the epoch's shard order), or -1 where it has none.
        location: where the item is (a file path, a URL with its credentials redacted, an
            object key) when the dataset tells (``dataset.location(index) -> str | None``; a
            stream: what it reported, a ``TarShardDataset`` its shard), else None.
        exc_type: the exception's class.
        message: ``str()`` of the exception, cut to 300 characters.
    """

    epoch: int
    index: Any
    location: str | None
    exc_type: type[BaseException]
    message: str


class TooManyFailures(RuntimeError):
    """More items of one epoch failed than ``max_failures`` allows; raised by ``next()``.

    The batch that passed the limit is not returned and the epoch ends (the next ``next()``
    raises ``StopIteration``).  It is not consumed either: ``DataLoader.state_dict()`` then
    saves the position before it (and the failure counts before it), so a loader resumed from
    that state (with a higher limit, or the items fixed) builds it again.  Raise the limit with ``DataLoader(..., max_failures=N)`` (a
    count) or a fraction in ``(0, 1)``, or fix the items the report names.

    Attributes:
        epoch: the epoch number.
        failed: items that failed in the epoch so far (failed substitutes included).
        seen: items tried in the epoch so far: the batches' items, and under ``"replace"``
            every substitute fetched (failed or not), so ``failed <= seen``.
        records: the epoch's ``FailureRecord`` s (at most 1000, in epoch order).
    """

    def __init__(self, message: str, epoch: int, failed: int, seen: int, records: list[FailureRecord]) -> None:
        super().__init__(message)
        self.epoch = epoch
        self.failed = failed
        self.seen = seen
        self.records = records

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.args[0], self.epoch, self.failed, self.seen, self.records)


def location_of(dataset: Any, index: Any) -> str | None:
    """``dataset.location(index)`` (the optional location protocol), or None where the dataset
    has no ``location`` or it fails: a report never raises."""
    method = getattr(dataset, "location", None)
    if method is None or not callable(method):
        return None
    try:
        loc = method(index)
    except Exception:
        return None
    return loc if isinstance(loc, str) else None


def message_of(exc: BaseException) -> str:
    """``str(exc)`` cut to ``MESSAGE_CHARS``, or a note where its ``__str__`` fails: a report never raises."""
    try:
        return str(exc)[:MESSAGE_CHARS]
    except Exception as err:
        return f"<str() of the {type(exc).__name__} raised {type(err).__name__}>"


def record(epoch: int, dataset: Any, index: Any, exc: BaseException) -> FailureRecord:
    """The ``FailureRecord`` of ``index``'s ``exc`` (on the thread that built the batch)."""
    return FailureRecord(epoch, index, location_of(dataset, index), type(exc), message_of(exc))


class FailureLog:
    """One epoch's failures under a policy: exact counts and the first records.

    Args:
        policy: the loader's ``ErrorPolicy``.
        epoch: the epoch number.
        counts: the counts a resumed epoch starts from (``counts()`` of the saved run), or None.

    Thread-safety: ``add`` on the consumer thread (inside ``next()``); ``records``,
    ``counts`` from any thread (one lock).
    """

    __slots__ = ("_policy", "epoch", "_lock", "_records", "_counts", "_refused")

    def __init__(self, policy: ErrorPolicy, epoch: int, counts: dict[str, int] | None = None) -> None:
        self._policy = policy
        self.epoch = epoch
        self._lock = threading.Lock()
        self._records: list[FailureRecord] = []
        self._counts = {"seen": 0, "failed": 0, "skipped": 0, "replaced": 0}
        if counts is not None:
            self._counts.update({k: int(counts[k]) for k in self._counts})
        self._refused: dict[str, int] | None = None  # the counts before the batch that passed the limit

    def add(self, seen: int, failures: list[FailureRecord], skipped: int, replaced: int) -> None:
        """Count a batch taken by ``next()``: ``seen`` items, their ``failures``, the items
        ``skipped`` and ``replaced``.

        Raises:
            TooManyFailures: the epoch's failures now pass ``max_failures``.
        """
        with self._lock:
            c = self._counts
            c["seen"] += seen
            c["failed"] += len(failures)
            c["skipped"] += skipped
            c["replaced"] += replaced
            room = MAX_FAILURE_RECORDS - len(self._records)
            if room > 0:
                self._records.extend(failures[:room])
            failed, total = c["failed"], c["seen"]
            refused = bool(failures) and self._policy.exceeded(failed, total)
            if refused:  # the counts before this batch: the position state_dict() saves
                added = {"seen": seen, "failed": len(failures), "skipped": skipped, "replaced": replaced}
                self._refused = {k: c[k] - added[k] for k in c}
        if refused:
            raise self._too_many(failed, total)

    def _too_many(self, failed: int, seen: int) -> TooManyFailures:
        records = self.records()
        first = "; ".join(f"index {r.index}" + (f" ({r.location})" if r.location else "")
                          + f": {r.exc_type.__name__}: {r.message}" for r in records[:3])
        return TooManyFailures(
            f"{failed} of {seen} items failed in epoch {self.epoch}, more than {self._policy.describe()} allows "
            f"(on_error={self._policy.on_error!r}); first: {first}.  Raise the limit with "
            f"DataLoader(..., max_failures=N) (a count) or a fraction in (0, 1), or fix the items "
            f"listed in this exception's .records (and loader.failures)",
            self.epoch, failed, seen, records,
        )

    def records(self) -> list[FailureRecord]:
        """The epoch's records so far (a new list, in epoch order, at most ``MAX_FAILURE_RECORDS``)."""
        with self._lock:
            return list(self._records)

    def counts(self) -> dict[str, int]:
        """``{"seen", "failed", "skipped", "replaced"}`` so far, the batch refused by
        ``TooManyFailures`` included (a new dict; ``loader.stats``)."""
        with self._lock:
            return dict(self._counts)

    def position_counts(self) -> dict[str, int]:
        """``counts()`` at the consumer's position, which ``state_dict`` saves: after
        ``TooManyFailures``, those before the refused batch (a new dict)."""
        with self._lock:
            return dict(self._counts if self._refused is None else self._refused)


def check_counts(counts: object) -> dict[str, int]:
    """A saved ``"failures"`` (``FailureLog.counts``) checked: its four counts, each an int >= 0.

    Raises:
        TypeError, ValueError: not a dict, a missing or unknown key, or a bad count (naming it).
    """
    sd = check_state(counts, "DataLoader 'failures'", COUNT_KEYS)
    return {k: check_int(sd[k], f"DataLoader state 'failures' {k!r}", minimum=0) for k in COUNT_KEYS}


def spread_counts(states: list[dict[str, Any]], rank: int, world: int) -> dict[str, int] | None:
    """The failure counts new rank ``rank`` of ``world`` takes from the old ranks' ``states``
    (an elastic resume): old rank ``j``'s go to new rank ``j % world``, so their sum over the
    ranks is kept; None when none of those states has counts (saved at no failure policy).

    Raises:
        TypeError, ValueError: a malformed ``"failures"`` (``check_counts``).
    """
    mine = [check_counts(sd["failures"]) for j, sd in enumerate(states)
            if j % world == rank and sd.get("failures") is not None]
    if not mine:
        return None
    return {k: sum(c[k] for c in mine) for k in COUNT_KEYS}
