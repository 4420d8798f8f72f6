"""A ``MixStream`` state's checks and changes (see ``dataloader.formats.mix_stream``).

A state is ``{"epoch", "position", "segment", "shares", "drawn", "passes", "done", "dropped",
"sources"}``; ``dropped`` (one bool per source: the source yielded nothing in a whole pass of
this iterator, so it is left out of its mix until the epoch ends) is optional on load, so a
state saved before it existed still resumes (nothing dropped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from dataloader.formats._mix_plan import shares_of

__all__ = ["STATE_KEYS", "checked_state", "mixed_shares", "reweighted"]

STATE_KEYS = ("epoch", "position", "segment", "shares", "drawn", "passes", "done", "sources")


def reweighted(state: dict[str, Any], shares: np.ndarray) -> dict[str, Any]:
    """``state`` continued with ``shares``: a new segment of positions from its position when
    they differ from its own (else ``state`` as it is: an exact resume)."""
    if [int(x) for x in state["shares"]] == shares.tolist():
        return state
    return dict(state, shares=shares.tolist(), segment=state["position"])


def mixed_shares(shares: np.ndarray, dropped: list[bool]) -> np.ndarray | None:
    """The shares an iterator mixes by: ``shares`` (the user's) with the dropped sources' set to
    0 and the rest renormalised to ``2**32`` (``shares`` itself when none is dropped; ``None``
    when no source with a positive share is left)."""
    if not any(dropped):
        return shares
    kept = np.where(np.array(dropped, dtype=bool), 0.0, shares.astype(np.float64))
    if not kept.any():
        return None
    return shares_of(kept, len(shares))


def _check_dropped(dropped: Any, done: Any, n: int) -> None:
    """``dropped`` is a list of ``n`` bools, each ``True`` only where ``done`` is (a source is
    dropped when its pass ends empty): anything else would resume into an endless or empty epoch.

    Raises:
        ValueError: what is wrong, named.
    """
    if not isinstance(dropped, (list, tuple)) or len(dropped) != n:
        raise ValueError(f"state's 'dropped' must be a list of {n} bools (one per source), got {dropped!r}")
    if not all(isinstance(d, (bool, np.bool_)) for d in dropped):
        raise ValueError(f"state's 'dropped' must hold bools (true/false), got {dropped!r}")
    if isinstance(done, (list, tuple)) and len(done) == n and any(d and not e for d, e in zip(dropped, done)):
        raise ValueError(f"state's 'dropped' ({dropped!r}) marks a source that is not 'done' ({done!r}): "
                         "a source is dropped only when its pass has ended")


def checked_state(state: Any, n: int) -> dict[str, Any]:
    """``state`` as a dict, once it has a ``MixStream`` state's keys, one entry per source in
    each list and shares summing to ``2**32``; ``dropped`` filled in (all ``False``) when absent.

    Raises:
        ValueError: what is wrong, named.
    """
    if not isinstance(state, Mapping):
        raise ValueError(f"not a MixStream state: a dict with the keys {list(STATE_KEYS)}, got {type(state).__name__}")
    if "drawn" in state and len(state["drawn"]) != n:
        raise ValueError(f"state has {len(state['drawn'])} sources, this mix has {n}")
    missing = [k for k in STATE_KEYS if k not in state]
    if missing:
        raise ValueError(f"not a MixStream state: the keys {missing} are missing (it has {sorted(state)})")
    out = dict(state)
    out.setdefault("dropped", [False] * n)
    _check_dropped(out["dropped"], out["done"], n)
    for key in (*STATE_KEYS[3:], "dropped"):
        if len(out[key]) != n:
            raise ValueError(f"state has {len(out[key])} sources in {key!r}, this mix has {n}")
    if sum(int(x) for x in state["shares"]) != 1 << 32 or min(int(x) for x in state["shares"]) < 0:
        raise ValueError(f"state's shares must be >= 0 and sum to 2**32, got {state['shares']!r}")
    _check_counters(out)
    return out


def _is_count(x: Any, bits: int = 63) -> bool:
    """An int in ``[0, 2**bits)`` (positions are int64 in the plan, an epoch uint64 in its key)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) and bool(0 <= x < 1 << bits)


def _check_counters(state: dict[str, Any]) -> None:
    """The counters are ints >= 0 (``segment <= position``; ``epoch`` may be None: not yet
    started) and ``done`` bools: a negative position or count, a segment past the position or a
    string resumed into a wrong mix, or failed deep in NumPy.

    Raises:
        ValueError: what is wrong, named.
    """
    epoch, position, segment = state["epoch"], state["position"], state["segment"]
    if epoch is not None and not _is_count(epoch, 64):
        raise ValueError(f"state's 'epoch' must be an int in [0, 2**64) or None, got {epoch!r}")
    for key, value in (("position", position), ("segment", segment)):
        if not _is_count(value):
            raise ValueError(f"state's {key!r} must be an int in [0, 2**63), got {value!r}")
    if segment > position:
        raise ValueError(f"state's 'segment' ({segment}) must be <= its 'position' ({position})")
    for key in ("drawn", "passes"):
        if not all(_is_count(x) for x in state[key]):
            raise ValueError(f"state's {key!r} must hold ints in [0, 2**63), got {state[key]!r}")
    if not all(isinstance(x, (bool, np.bool_)) for x in state["done"]):
        raise ValueError(f"state's 'done' must hold bools (true/false), got {state['done']!r}")
