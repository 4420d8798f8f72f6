"""``ItemSchema``: how ``CachedDataset`` turns items into `.ndf` rows and rows back into items.

An item is cached as one row of the file, in one of two forms, fixed by the first item written:

* ``"array"``: one array-like (a NumPy array, a NumPy or Python number, a list of numbers) of
  shape ``x_shape``; the row's x is its ``d = prod(x_shape)`` elements, and l = 0;
* ``"pair"``: a ``tuple`` ``(x, y)`` of two array-likes, e.g. ``(features, label)``; x as
  above, y of shape ``y_shape`` (``()`` for a scalar label) in the row's l labels.

Every item must have the first item's shapes; values are converted to the file's dtypes as
``astype(casting="same_kind")`` does (float64 -> float32 is allowed, float -> int is not).  Items
read back are NumPy arrays of ``x_shape`` / ``y_shape`` in the file's dtypes (a NumPy scalar for
shape ``()``), and items of the first epoch are given in that same form, so every epoch sees the
same items.  The file's metadata records the schema under ``CACHE_KEY``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dataloader._datasets.batched import BatchedItems
from dataloader._ndf.format import DTYPES, as_dtype

__all__ = ["CACHE_FORMAT", "CACHE_KEY", "ItemSchema"]

CACHE_KEY = "dataloader.cache"  # the metadata key of a cache's record
CACHE_FORMAT = 1  # bumped when what a cache file means changes: older caches are rebuilt


@dataclass(frozen=True, slots=True)
class ItemSchema:
    """The form, shapes and dtypes of a cache's items (see the module docstring).

    Attributes:
        pair: items are ``(x, y)`` tuples (else one array).
        x_shape, y_shape: one item's shapes (``y_shape`` is ``(0,)`` when not ``pair``).
        x_dtype, y_dtype: the file's dtypes (``y_dtype`` unused when not ``pair``).
    """

    pair: bool
    x_shape: tuple[int, ...]
    y_shape: tuple[int, ...]
    x_dtype: np.dtype
    y_dtype: np.dtype

    @classmethod
    def of_first(cls, item: Any, index: int, x_dtype: Any, y_dtype: Any) -> ItemSchema:
        """The schema the first item written sets (``x_dtype``/``y_dtype``: None = the item's own).

        Raises:
            TypeError: a dict or a tuple of other than 2 values, non-numeric values, or a dtype
                an .ndf file cannot hold (named, with ``index``).
            ValueError: an x with no element (an .ndf row needs d >= 1).
        """
        pair = _is_pair(item, index)
        x = _as_numeric(item[0] if pair else item, index, "x")
        y = _as_numeric(item[1], index, "y") if pair else np.zeros(0)
        if x.size == 0:
            raise ValueError(f"CachedDataset: item {index}'s x has shape {x.shape}, no element to cache")
        return cls(pair, x.shape, y.shape, _file_dtype(x, x_dtype, index, "x"),
                   _file_dtype(y, y_dtype, index, "y") if pair else np.dtype(np.float64))

    @classmethod
    def from_record(cls, record: Any, x_dtype: np.dtype, y_dtype: np.dtype, d: int,
                    l: int) -> ItemSchema | None:  # noqa: E741
        """The schema a cache file's record describes, or None if it does not fit the file."""
        try:
            pair, xs, ys = bool(record["pair"]), tuple(record["x_shape"]), tuple(record["y_shape"])
        except (KeyError, TypeError):
            return None
        if not all(type(k) is int and k >= 0 for k in xs + ys):
            return None
        if math.prod(xs) != d or math.prod(ys) != l or (not pair and l):
            return None
        return cls(pair, xs, ys, x_dtype, y_dtype)

    def record(self) -> dict[str, Any]:
        """What the file's metadata keeps of the schema (JSON)."""
        return {"pair": self.pair, "x_shape": list(self.x_shape), "y_shape": list(self.y_shape)}

    @property
    def d(self) -> int:
        return math.prod(self.x_shape)

    @property
    def l(self) -> int:  # noqa: E743
        return math.prod(self.y_shape) if self.pair else 0

    def columns(self, items: Sequence[Any], indices: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The items as arrays X ``(k,) + x_shape`` and Y ``(k,) + y_shape`` (None when not a
        pair) of the file's dtypes.

        Raises:
            ValueError: an item of another shape (its index, its shape and the cache's named).
            TypeError: an item of another form or a value the dtype does not take (named).
        """
        if self.pair:
            if not all(type(it) is tuple and len(it) == 2 for it in items):
                j = next(j for j, it in enumerate(items) if not (type(it) is tuple and len(it) == 2))
                raise TypeError(f"CachedDataset: item {int(indices[j])} is a {_form(items[j])}; the cache "
                                "holds (x, y) tuples (set by the first item written)")
            xs, ys = [it[0] for it in items], [it[1] for it in items]
            return (_column(xs, self.x_shape, self.x_dtype, indices, "x"),
                    _column(ys, self.y_shape, self.y_dtype, indices, "y"))
        return _column(items, self.x_shape, self.x_dtype, indices, "x"), None

    def rows(self, x: np.ndarray, y: np.ndarray | None) -> np.ndarray:
        """The file's bytes of the rows of ``columns``' X and Y: uint8 ``(k, row_bytes)``."""
        k = x.shape[0]
        fields: list[tuple[str, Any, tuple[int]]] = [("x", self.x_dtype.newbyteorder("<"), (self.d,))]
        if self.l:
            fields.append(("y", self.y_dtype.newbyteorder("<"), (self.l,)))
        out = np.empty(k, np.dtype(fields))
        out["x"] = x.reshape(k, self.d)
        if self.l and y is not None:
            out["y"] = y.reshape(k, self.l)
        return out.view(np.uint8).reshape(k, out.dtype.itemsize)

    def batch(self, x: np.ndarray, y: np.ndarray | None) -> Any:
        """Items of X ``(k,) + x_shape`` and Y as the dataset's ``__getitems__`` gives them: a
        ``BatchedItems`` of (X, Y) for pairs (``default_collate`` takes its columns as they
        are), else (Y is None) the list of X's rows."""
        if y is not None:
            return BatchedItems((x, y))
        return list(x)

    def from_rows(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """X and Y of rows read from the file (x ``(k, d)``, y ``(k, l)``), reshaped (views)."""
        k = x.shape[0]
        return x.reshape((k,) + self.x_shape), (y.reshape((k,) + self.y_shape) if self.pair else None)


def _is_pair(item: Any, index: int) -> bool:
    if type(item) is tuple:
        if len(item) != 2:
            raise TypeError(f"CachedDataset: item {index} is a {_form(item)}; a cache holds one array or "
                            "an (x, y) tuple per item")
        return True
    if isinstance(item, dict):
        raise TypeError(f"CachedDataset: item {index} is a dict; a cache holds one array or an (x, y) "
                        "tuple per item (return (x, y) from the cached part)")
    return False


def _form(item: Any) -> str:
    return f"tuple of {len(item)}" if type(item) is tuple else type(item).__name__


def _as_numeric(value: Any, index: int, what: str) -> np.ndarray:
    try:
        a = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(f"CachedDataset: item {index}'s {what} is not fixed-shape: {exc}") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"CachedDataset: item {index}'s {what} has dtype {a.dtype}; a cache holds numbers")
    return a


def _file_dtype(a: np.ndarray, asked: Any, index: int, what: str) -> np.dtype:
    if asked is not None:
        return as_dtype(asked, f"{what}_dtype")
    if a.dtype.newbyteorder("=") in DTYPES:
        return a.dtype.newbyteorder("=")
    allowed = ", ".join(t.name for t in DTYPES)
    raise TypeError(f"CachedDataset: item {index}'s {what} has dtype {a.dtype}, which an .ndf file does not "
                    f"hold ({allowed}); pass {what}_dtype= to convert it")


def _column(values: Sequence[Any], shape: tuple[int, ...], dtype: np.dtype, indices: np.ndarray,
            what: str) -> np.ndarray:
    try:
        a = np.asarray(values)
    except ValueError:  # items of different shapes
        a = None
    if a is None or a.shape != (len(values),) + shape or not np.can_cast(a.dtype, dtype, "same_kind"):
        for j, value in enumerate(values):
            one = _as_numeric(value, int(indices[j]), what)
            if one.shape != shape:
                raise ValueError(f"CachedDataset: item {int(indices[j])}'s {what} has shape {one.shape}, but the "
                                 f"cache holds shape {shape} (set by the first item written): cached items must "
                                 "be fixed-shape")
            if not np.can_cast(one.dtype, dtype, "same_kind"):
                raise TypeError(f"CachedDataset: item {int(indices[j])}'s {what} has dtype {one.dtype}, which "
                                f"the cache's {dtype} does not take (same_kind casting)")
        raise ValueError(f"CachedDataset: items {indices.tolist()}' {what} do not stack to {shape}")
    return a.astype(dtype, copy=False)
