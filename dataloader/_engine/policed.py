"""The epochs of a loader with an error policy: ``next()`` takes a ``Recovered`` batch apart.

Under ``on_error="skip"`` or ``"replace"`` every batch comes to the consumer as a
``Recovered`` (``dataloader._engine.recover``).  ``PolicedEpoch`` and ``PolicedSequentialEpoch``
are ``Epoch`` and ``SequentialEpoch`` whose ``_next`` adds it to the epoch's ``FailureLog``
(on the consumer thread, in epoch order) and returns its batch; a ``SKIPPED`` batch (every
item failed under ``"skip"``) is counted as a position (``state_dict`` resumes after it) and
``next()`` goes on with the next batch, so an epoch never ends short silently.  When the
failures pass ``max_failures``, ``next()`` raises ``TooManyFailures`` and the epoch ends; the
batch it refused is not a position (``state_dict`` resumes at it).
A loader without a policy never builds these classes: its ``next()`` is unchanged.
"""

from __future__ import annotations

from typing import Any

from dataloader._engine.epoch import Epoch
from dataloader._engine.failures import FailureLog, TooManyFailures
from dataloader._engine.iterator import SequentialEpoch
from dataloader._engine.outcome import Failure
from dataloader._engine.recover import SKIPPED, Recovered, SubstitutesFailed
from dataloader._engine.resume import Progress

__all__ = ["PolicedEpoch", "PolicedSequentialEpoch", "policed_next"]


def policed_next(it: Epoch | SequentialEpoch, log: FailureLog, next_batch: Any, progress: Progress) -> Any:
    """The next batch of ``it`` (``next_batch()``: its own ``_next``, which counted it in
    ``progress``), through ``log``.

    Raises:
        TooManyFailures: the epoch's failures passed ``max_failures`` (the epoch is closed, and
            the refused batch is not a position: ``progress`` goes back before it).
    """
    while True:
        out = next_batch()
        if type(out) is not Recovered:  # a Failure (collate_fn, an interrupt, a failed replace)
            if type(out) is Failure and type(out.exc) is SubstitutesFailed:  # its items' failures count
                _count(it, log, progress, out.exc.seen, out.exc.records, 0, 0)
            return out
        _count(it, log, progress, out.seen, out.failures, out.skipped, out.replaced)
        if out.batch is not SKIPPED:
            return out.batch  # a Failure (collate_fn after failed items) is raised by __next__


def _count(it: Epoch | SequentialEpoch, log: FailureLog, progress: Progress, seen: int, failures: list[Any],
           skipped: int, replaced: int) -> None:
    """``log.add`` of a batch; past ``max_failures`` the epoch is closed and ``TooManyFailures``
    raised, the batch not consumed (a resume builds it again; ``log.position_counts``)."""
    try:
        log.add(seen, failures, skipped, replaced)
    except TooManyFailures:
        progress.yielded -= 1  # next_batch() counted it; never returned, so not a position
        it.close()
        raise


class PolicedEpoch(Epoch):
    """``Epoch`` under an error policy (see the module).

    Args:
        failures: the epoch's ``FailureLog``; the rest as ``Epoch``.
    """

    def __init__(self, *, failures: FailureLog, **kwargs: Any) -> None:
        self._failures = failures
        super().__init__(**kwargs)

    def _next(self) -> Any:
        return policed_next(self, self._failures, super()._next, self._progress)


class PolicedSequentialEpoch(SequentialEpoch):
    """``SequentialEpoch`` under an error policy (see the module).

    Args:
        failures: the epoch's ``FailureLog``; the rest as ``SequentialEpoch``.
    """

    def __init__(self, *, failures: FailureLog, **kwargs: Any) -> None:
        self._failures = failures
        super().__init__(**kwargs)

    def _next(self) -> Any:
        return policed_next(self, self._failures, super()._next, self._progress)
