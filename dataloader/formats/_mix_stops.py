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

The length is ``K·B + r``: a function of the lengths, the weights and the rule only.  ``r`` is
searched without a table of the block's ``c_s(r)`` (16 Mi rows near the ``2**-24`` limit): only
a window where some ``c_s`` can still go either way is read, in chunks (``_final_count``), so a
plan is built in milliseconds and under 2 MiB for any valid weights.
"""

from __future__ import annotations

import numpy as np

from dataloader._validate import check_int
from dataloader.formats._mix_plan import MIN_BLOCK_BITS, MixPlan

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


SCAN_ELEMENTS = 1 << 19  # the final block's search reads at most this many counts (~15 ms) ...
_ALWAYS_SCANNED = (1 << MIN_BLOCK_BITS) + 2  # ... or this many positions: a 4096-block's whole window
_CHUNK_ELEMENTS = 1 << 16  # counts computed per NumPy call (~0.5 MB an array)


def _counts_at(plan: MixPlan, r: np.ndarray) -> np.ndarray:
    """``c_s(r)`` for each ``r`` (uint64, ``r <= 2**bits``): shape ``(len(r), S)``, int64."""
    g = ((plan.cum[None, :] * r[:, None]) >> np.uint64(32)).view(np.int64)
    g[:, 1:] -= g[:, :-1].copy()
    return g


def _scan(plan: MixPlan, need: np.ndarray, first: bool, lo: int, hi: int) -> tuple[int | None, bool]:
    """The largest (``first``) or smallest ``r`` in ``[lo, hi]`` whose counts pass the rule,
    scanned from that end in chunks; ``(r or None, whether all of [lo, hi] was read)``."""
    active = plan.shares > 0
    chunk = max(64, _CHUNK_ELEMENTS // len(need))
    budget = max(SCAN_ELEMENTS // len(need), _ALWAYS_SCANNED)
    while lo <= hi and budget > 0:
        size = min(chunk, hi - lo + 1)
        r = np.arange(hi - size + 1, hi + 1) if first else np.arange(lo, lo + size)
        c = _counts_at(plan, r.astype(np.uint64))
        ok = np.all(((c <= need) if first else (c >= need)) | ~active, axis=1)
        hits = np.flatnonzero(ok)
        if hits.size:
            return int(r[hits.max() if first else hits.min()]), True
        hi, lo, budget = (hi - size, lo, budget - size) if first else (hi, lo + size, budget - size)
    return None, lo > hi


def _final_count(plan: MixPlan, need: np.ndarray, first: bool) -> int | None:
    """The final block's ``r`` (``None``: ``all_exhausted`` needs one more whole block).

    ``c_s(r) = q_s(r) + carry`` with ``q_s(r) = floor(W_s·r/2**32)`` non-decreasing and a carry of
    0 or 1, so only the ``r`` where some ``q_s`` is within 1 of ``need_s`` can go either way:
    ``first``: every ``r`` below ``low`` passes, none above ``high``; ``all``: none below
    ``low``, every one from ``high``.  That window is at most one block long plus one, and is
    scanned whole from the end nearest the answer when that is at most ``SCAN_ELEMENTS`` counts
    (always with blocks of 4096, the block of every weight >= 1/4096; with larger blocks while
    ``(block + 2)·S <= 2**19``): then ``r`` is the one reading every ``r`` of the block would
    give.  Else, where nothing passed in the part scanned, the safe bound is taken (``low - 1``;
    ``high``): still no item twice (first) and every item (all), a shorter or longer final block
    than the extreme one (less than one block apart), and as deterministic.
    """
    one, block = 1 << 32, 1 << plan.bits
    live = [(int(w), int(n)) for w, n in zip(plan.shares.tolist(), need.tolist(), strict=True) if w > 0]
    if first:
        low = max(0, min(-(-n * one // w) for w, n in live))  # below it every q_s < need_s
        high = min(block, min(((n + 1) * one - 1) // w for w, n in live))  # above it some q_s > need_s
        r, _ = _scan(plan, need, True, low, high)
        return r if r is not None else max(0, low - 1)
    low = max(0, max(-(-(n - 1) * one // w) for w, n in live))  # below it some q_s <= need_s - 2
    high = max(0, max(-(-n * one // w) for w, n in live))  # from it every q_s >= need_s
    r, whole = _scan(plan, need, False, low, min(block, high))
    if r is not None:
        return r
    return high if not whole and high <= block else None


def stop_plan(shares: np.ndarray, seed: int, lengths: np.ndarray, stop_on: str) -> tuple[MixPlan, int]:
    """The plan (with its final partial block) and the length of a mix under ``stop_on``."""
    probe = MixPlan(shares, seed)
    live = [s for s in range(len(shares)) if shares[s] > 0]
    first = stop_on == "first_exhausted"
    blocks = [_first_block(probe, s, int(lengths[s]), strict=first) for s in live]
    k = min(blocks) if first else max(blocks)
    need = lengths - probe.drawn_before(k)
    final = _final_count(probe, need, first)
    if final is None:
        k, r = k + 1, 0
    else:
        r = final
    counts = _counts_at(probe, np.array([r], dtype=np.uint64))[0] if r else np.zeros(len(shares), dtype=np.int64)
    length = (k << probe.bits) + r
    return MixPlan(shares, seed, (k, counts), length), length
