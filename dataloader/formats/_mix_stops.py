"""How long a map-style mix is under ``stop_on="first_exhausted"`` / ``"all_exhausted"``.

With the stratified blocks of ``dataloader.formats._mix_plan``, source ``s`` has given
``T_s(b)`` draws after ``b`` whole blocks, a non-decreasing closed form, so the block where a
source runs out is found by bisection (no scan of the positions).  The mix then ends with a
partial block of ``r`` positions whose per-source counts ``c_s(r)`` are apportioned by the
weights:

- ``first_exhausted``: ``K`` = the first block some source cannot fill from its remaining items;
  ``r`` = the largest with ``c_s(r) <= len_s - T_s(K)`` for every source: no item twice;
- ``all_exhausted``: ``K`` = the block where the last source gives its last item; ``r`` = the
  smallest with ``c_s(r) >= len_s - T_s(K)`` for every source (else one more whole block).

The length is ``K·B + r``: a function of the lengths, the weights and the rule only.
"""

from __future__ import annotations

import numpy as np

from dataloader._validate import check_int
from dataloader.formats._mix_plan import MixPlan

__all__ = ["STOP_RULES", "check_stop", "stop_plan"]

STOP_RULES = ("first_exhausted", "all_exhausted", "never")


def check_stop(stop_on: object, num_samples: object) -> tuple[str, int | None]:
    """``stop_on`` and ``num_samples`` of a mix (map-style or stream) checked.

    Raises:
        ValueError: ``stop_on`` is not one of ``STOP_RULES``; ``num_samples`` with another rule
            than ``"never"``, or below 0.
        TypeError: ``num_samples`` is not an int.
    """
    if stop_on not in STOP_RULES:
        raise ValueError(f"stop_on must be one of {STOP_RULES}, got {stop_on!r}")
    if num_samples is not None and stop_on != "never":
        raise ValueError(f"num_samples={num_samples!r} is only for stop_on='never' (got {stop_on!r})")
    return str(stop_on), None if num_samples is None else check_int(num_samples, "num_samples", minimum=0)


def _first_block(plan: MixPlan, s: int, target: int, strict: bool) -> int:
    """The smallest block ``b`` with ``T_s(b + 1) > target`` (strict) or ``>= target``."""
    share = int(plan.shares[s])
    lo, hi = 0, ((target + 2) << 32) // (share << plan.bits) + 2
    while lo < hi:
        mid = (lo + hi) // 2
        got = int(plan.drawn_before(mid + 1)[s])
        if got > target or (not strict and got >= target):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _counts_table(plan: MixPlan, top: int) -> np.ndarray:
    """``c_s(r)`` for ``r = 0 .. top`` (shape ``(top + 1, S)``, int64)."""
    r = np.arange(top + 1, dtype=np.uint64)
    g = ((plan.cum[None, :] * r[:, None]) >> np.uint64(32)).astype(np.int64)
    return np.diff(g, axis=1, prepend=np.int64(0))


def stop_plan(shares: np.ndarray, seed: int, lengths: np.ndarray, stop_on: str) -> tuple[MixPlan, int]:
    """The plan (with its final partial block) and the length of a mix under ``stop_on``."""
    probe = MixPlan(shares, seed)
    live = [s for s in range(len(shares)) if shares[s] > 0]
    first = stop_on == "first_exhausted"
    blocks = [_first_block(probe, s, int(lengths[s]), strict=first) for s in live]
    k = min(blocks) if first else max(blocks)
    need = lengths - probe.drawn_before(k)
    table = _counts_table(probe, 1 << probe.bits)
    active = shares > 0
    if first:
        ok = np.all((table <= need[None, :]) | ~active[None, :], axis=1)
        r = int(np.flatnonzero(ok).max())
    else:
        ok = np.all((table >= need[None, :]) | ~active[None, :], axis=1)
        hits = np.flatnonzero(ok)
        if hits.size == 0:
            k, r = k + 1, 0
        else:
            r = int(hits.min())
    counts = table[r] if r else np.zeros(len(shares), dtype=np.int64)
    length = (k << probe.bits) + r
    return MixPlan(shares, seed, (k, counts), length), length
