"""Fetching a batch of items from a dataset: ``__getitems__`` where it has one, and the check
that it returned one item per index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._indices import as_index_array

__all__ = ["check_item_count", "fetch_items"]


def fetch_items(dataset: Any, keys: np.ndarray | list[Any]) -> Sequence[Any]:
    """Items ``keys`` of ``dataset``, via ``__getitems__`` where it has one.

    ``keys`` is a 1-D int64 array or a list; the dataset gets an array only when it declares
    ``accepts_index_arrays`` (and the keys are integers), else a list.
    """
    getitems = getattr(dataset, "__getitems__", None)
    if callable(getitems) and getattr(dataset, "accepts_index_arrays", False):
        if not isinstance(keys, np.ndarray):
            try:
                keys = as_index_array(keys)
            except TypeError:  # non-integer keys: the dataset gets the list
                return getitems(keys)
        return getitems(keys)
    if isinstance(keys, np.ndarray):
        keys = keys.tolist()
    if callable(getitems):
        return getitems(keys)
    return [dataset[k] for k in keys]


def check_item_count(items: Sequence[Any], n: int, who: str = "__getitems__") -> Sequence[Any]:
    """Return ``items`` after checking there are ``n`` of them (one per index asked for).

    Raises:
        ValueError: ``f"{who} returned {len(items)} items for {n} indices"``.
    """
    if len(items) != n:
        raise ValueError(f"{who} returned {len(items)} items for {n} indices")
    return items
