"""The loader's error policy (``on_error``, ``max_failures``): checked once, carried on the plan.

``on_error="raise"`` (the default) is the engine as it always was: an item's exception fails
its batch and ``next()`` raises it; nothing of this module runs per batch.  ``"skip"`` and
``"replace"`` wrap the epoch's builder (``dataloader._engine.recover.PolicyBuilder``) and its
iterator (``dataloader._engine.policed``); the failures of an epoch are counted and recorded
on the consumer thread, in epoch order (``dataloader._engine.failures.FailureLog``).

``max_failures`` bounds the failures of one epoch: an int is a count, a float ``f`` in
``(0, 1)`` a fraction of the items seen so far in the epoch.  A fraction is judged only once
``FRACTION_MIN_FAILURES`` items have failed, so that one unlucky failure among the first
items does not stop a run (1 failure in the first batch of 64 is 1.6%).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MAX_FAILURE_FRACTION", "FRACTION_MIN_FAILURES", "MAX_REPLACE_ATTEMPTS", "ON_ERROR", "ErrorPolicy",
    "error_policy",
]

ON_ERROR = ("raise", "skip", "replace")

# The default limit under "skip" and "replace": 10% of the items seen in the epoch.  Data
# with one item in ten broken is a wrong path, a dead server or a bad export, not a few corrupt
# files: stopping early then saves the rest of a wasted epoch, while a dataset's usual rot
# (well under 1% in ImageNet-style folders and web crawls) never comes near it.
DEFAULT_MAX_FAILURE_FRACTION = 0.1

# A fraction is not judged before this many failures (see the module).
FRACTION_MIN_FAILURES = 10

# "replace": substitutes tried for one failing item before its batch fails (each a new
# deterministic draw); with 1% bad items, 16 bad draws in a row happen with p = 1e-32.
MAX_REPLACE_ATTEMPTS = 16


@dataclass(frozen=True, slots=True)
class ErrorPolicy:
    """``on_error`` and its limit, checked.

    Attributes:
        on_error: ``"skip"`` or ``"replace"`` (a loader with ``"raise"`` has no policy).
        max_count: most failures an epoch may have (an int ``max_failures``), or None.
        max_fraction: most failures as a fraction of the items seen, or None.
    """

    on_error: str
    max_count: int | None
    max_fraction: float | None

    def exceeded(self, failed: int, seen: int) -> bool:
        """Whether ``failed`` failures among ``seen`` items pass the limit."""
        if self.max_count is not None:
            return failed > self.max_count
        if self.max_fraction is not None:
            return failed >= FRACTION_MIN_FAILURES and failed > self.max_fraction * seen
        return False

    def describe(self) -> str:
        """The limit as the user gave it, e.g. ``max_failures=0.1``."""
        if self.max_count is not None:
            return f"max_failures={self.max_count}"
        fraction = self.max_fraction if self.max_fraction is not None else 0.0
        return f"max_failures={fraction:.6g}"  # np.float32(0.2) reads 0.2, not 0.20000000298023224


def error_policy(
    on_error: object, max_failures: object, iterable: bool, skips_own: bool = False
) -> ErrorPolicy | None:
    """``on_error`` and ``max_failures`` checked: None for ``"raise"`` (no policy: the engine
    as it always was), else the ``ErrorPolicy``.  ``skips_own``: the ``IterableDataset``
    declares the failure-sink protocol (``dataloader._engine.stream_policy``), so it takes
    ``"skip"``.

    Raises:
        TypeError: ``on_error`` is not a str; ``max_failures`` is not None, an int or a float
            (a bool is refused).
        ValueError: ``on_error`` is not one of ``ON_ERROR``; ``max_failures`` is a negative int,
            a float outside ``(0, 1)``, or given with ``on_error="raise"``; ``"skip"`` or
            ``"replace"`` with an ``IterableDataset`` (its items have no index to narrow to),
            but ``"skip"`` with one that ``skips_own``.
    """
    if not isinstance(on_error, str):
        raise TypeError(f"on_error must be one of {ON_ERROR}, got {type(on_error).__name__} {on_error!r}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got on_error={on_error!r}")
    count, fraction = _limit(max_failures)
    if on_error == "raise":
        if max_failures is not None:
            raise ValueError(f"max_failures={max_failures!r} needs on_error='skip' or 'replace' "
                             "(with on_error='raise' the first failure is raised)")
        return None
    if iterable and on_error == "replace":
        raise ValueError("on_error='replace' needs a map-style dataset: a stream's items have no index to "
                         "draw a substitute from, so its batches could not keep their size; use on_error='skip' "
                         "with a stream that skips its own bad units (set_failure_sink: TarShardDataset)")
    if iterable and not skips_own:
        raise ValueError(f"on_error={on_error!r} needs a map-style dataset or an IterableDataset that skips its "
                         "own bad units (a method set_failure_sink, as TarShardDataset has): this one's items "
                         "have no index to skip; handle its errors inside its __iter__")
    if max_failures is None:
        fraction = DEFAULT_MAX_FAILURE_FRACTION
    return ErrorPolicy(on_error, count, fraction)


def _limit(max_failures: object) -> tuple[int | None, float | None]:
    if max_failures is None:
        return None, None
    if isinstance(max_failures, bool) or not isinstance(max_failures, (numbers.Integral, numbers.Real)):
        raise TypeError(f"max_failures must be None, an int (a count) or a float in (0, 1) (a fraction), "
                        f"got {type(max_failures).__name__} {max_failures!r}")
    if isinstance(max_failures, numbers.Integral):
        if max_failures < 0:
            raise ValueError(f"max_failures must be >= 0 as a count, got max_failures={max_failures}")
        return int(max_failures), None
    max_failures = float(max_failures)  # a NumPy float (np.float32(0.05)) is a fraction too
    if math.isnan(max_failures) or not 0 < max_failures < 1:
        raise ValueError(f"max_failures as a fraction must be in (0, 1), got max_failures={max_failures!r} "
                         "(give an int for a count)")
    return None, float(max_failures)
