"""``event_loops``: how many event loops run an ``AsyncDataset``'s item coroutines.

One event loop runs on one thread, so it runs one coroutine step at a time: on 3.13t,
aiohttp's pure-Python HTTP parser costs ~310 us of CPU per request, so one loop saturates
near 3,000 requests/s whatever ``num_workers`` is (docs/benchmarks.md).  With
``event_loops=n`` the loader runs ``n`` loops, each on its own thread, and spreads the
items over them by index (``async_spread``); what an item is never depends on its loop,
so outputs are identical for every ``n``.

``"auto"``: 1 on a build with the GIL (threads take turns holding it: a second loop only
adds hand-offs), else ``min(CPUs this process may use, ceil(in-flight / 64))``, where
in-flight is ``max(num_workers, 1) * item_concurrency`` (the most item coroutines an epoch
keeps running): a loop is worth a thread once it has ~64 requests to parse, and never more
loops than cores.  This module imports nothing asynchronous.
"""

from __future__ import annotations

import os
import sys

from dataloader._validate import check_int

__all__ = ["AUTO_ITEMS_PER_LOOP", "MAX_EVENT_LOOPS", "auto_event_loops", "resolve_event_loops"]

AUTO_ITEMS_PER_LOOP = 64  # in-flight item coroutines per loop under "auto" (one loop parses ~3,000 req/s on 3.13t)
MAX_EVENT_LOOPS = 256  # threads; more is a mistake (a loop per request costs more than it parses)


def _cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def auto_event_loops(in_flight: int, gil: bool | None = None, cpus: int | None = None) -> int:
    """``"auto"``'s rule (see the module) for ``in_flight`` item coroutines at most.

    Args:
        in_flight: the most item coroutines an epoch runs at once (>= 1).
        gil: the build has the GIL (None: this interpreter's, ``sys._is_gil_enabled()``).
        cpus: CPUs this process may use (None: its affinity mask).
    """
    if gil is None:
        is_enabled = getattr(sys, "_is_gil_enabled", None)
        gil = True if is_enabled is None else bool(is_enabled())
    if gil:
        return 1
    per_loop = -(-max(1, in_flight) // AUTO_ITEMS_PER_LOOP)
    return max(1, min(_cpus() if cpus is None else cpus, per_loop))


def resolve_event_loops(event_loops: object, is_async: bool, in_flight: int) -> int:
    """The number of event loops of a loader (``DataLoader(event_loops=...)``).

    Args:
        event_loops: ``"auto"`` or an int in ``[1, MAX_EVENT_LOOPS]``.
        is_async: the dataset is an ``AsyncDataset`` (anything else runs no event loop).
        in_flight: ``max(num_workers, 1) * item_concurrency``.

    Raises:
        TypeError: ``event_loops`` is neither ``"auto"`` nor an int (a bool is refused).
        ValueError: an int out of range, another string, or more than 1 for a dataset that
            is not an ``AsyncDataset``.
    """
    if isinstance(event_loops, str):
        if event_loops != "auto":
            raise ValueError(f"event_loops must be 'auto' or an int from 1 to {MAX_EVENT_LOOPS}, got {event_loops!r}")
        return auto_event_loops(in_flight) if is_async else 1
    n = check_int(event_loops, "event_loops", minimum=1, maximum=MAX_EVENT_LOOPS)
    if n > 1 and not is_async:
        raise ValueError(
            f"event_loops={n} runs the item coroutines of an AsyncDataset; this dataset's items are not "
            "coroutines (it runs on threads: use num_workers / item_concurrency), leave event_loops=1"
        )
    return n
