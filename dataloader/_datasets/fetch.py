"""Fetching a batch of items from a dataset: ``__getitems__`` where it has one, and the checks
that it returned one item per index and no awaitable in place of an item."""

from __future__ import annotations

import reprlib
import types
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._indices import as_index_array
from dataloader._native._awaitable import first_awaitable, is_awaitable

__all__ = ["awaitable_item_error", "check_item_count", "check_items_not_awaitable", "fetch_items"]


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


def awaitable_item_error(dataset: Any, value: Any, method: str, key: Any, index: Any = None) -> TypeError:
    """The error for a plain dataset's ``method(key)`` that returned the awaitable ``value``
    (with ``index``: as the item of that index, in ``__getitems__``'s list).

    Closes ``value`` when it is a coroutine, so that no "coroutine ... was never awaited"
    ``RuntimeWarning`` follows the error.
    """
    _close(value)
    name = type(dataset).__name__
    what = ", not an item" if index is None else f" as the item of index {index!r}"
    return TypeError(
        f"{name}.{method}({reprlib.repr(key)}) returned a {type(value).__name__}{what}: make {name} an "
        f"AsyncDataset (subclass dataloader.AsyncDataset, with async def {method}) for the loader to await it"
    )


def check_items_not_awaitable(dataset: Any, items: Sequence[Any], indices: Sequence[Any]) -> Sequence[Any]:
    """Return ``__getitems__``'s ``items`` after checking that none is awaitable.

    Only a list or tuple of items is checked: other sequences (``BatchedItems``, arrays)
    hold columns, not item objects, and reading them item by item would build every row.

    Raises:
        TypeError: ``awaitable_item_error`` naming the index of the first awaitable item
            (every coroutine among the items is closed).
    """
    if type(items) is list:
        pos = first_awaitable(items)
    elif type(items) is tuple:
        pos = first_awaitable(list(items))
    else:
        return items
    if pos >= 0:
        for item in items:
            _close(item)
        raise awaitable_item_error(dataset, items[pos], "__getitems__", indices, indices[pos])
    return items


def _close(value: Any) -> None:
    if isinstance(value, (types.CoroutineType, types.GeneratorType)) and is_awaitable(value):
        value.close()
