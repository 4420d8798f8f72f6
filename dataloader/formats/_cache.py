"""``PartCache``: the bounded, thread-safe cache of decoded row groups (or record batches)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["PartCache"]


class PartCache:
    """The last ``capacity`` parts (row groups) used, least recently used out first.

    Args:
        capacity: parts kept (>= 1); each holds one row group's projected NumPy columns.

    Thread-safety: one lock guards the map and the counter; a part missing from the cache is
    loaded outside the lock (two threads may both load it; the second result is dropped), so
    a slow read never blocks the threads whose parts are cached.
    """

    __slots__ = ("_capacity", "_lock", "_parts", "_loads")

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._parts: OrderedDict[int, Any] = OrderedDict()
        self._loads = 0

    @property
    def loads(self) -> int:
        """Parts loaded (read and decoded) so far: the cost a shuffled epoch pays in reads."""
        with self._lock:
            return self._loads

    def get(self, key: int, load: Callable[[int], Any]) -> Any:
        """The part ``key``, from the cache or ``load(key)`` (then cached).

        Raises: whatever ``load`` raises (nothing is cached then).
        """
        with self._lock:
            value = self._parts.get(key)
            if value is not None:
                self._parts.move_to_end(key)
                return value
        value = load(key)
        with self._lock:
            self._loads += 1
            kept = self._parts.setdefault(key, value)
            self._parts.move_to_end(key)
            while len(self._parts) > self._capacity:
                self._parts.popitem(last=False)
        return kept

    def clear(self) -> None:
        """Drop every cached part (the counter stays)."""
        with self._lock:
            self._parts.clear()
