"""``BatchRows``: what a dataset gives the loader to build its batches with no Python.

A map-style dataset opts in to native batches with one method, ``__batch_rows__(self) ->
BatchRows | None`` (the protocol; docs/usage.md, "Native batches").  The loader calls it
once an epoch, and only where its batches would be ``default_collate`` of the dataset's
items with nothing in between (``batch_size`` or ``batch_sampler`` set, no ``transform``,
the default ``collate_fn``, ``item_concurrency=1``); it then gathers each batch's rows
itself (``dataloader._engine.native``) instead of calling ``__getitem__`` / ``__getitems__``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dataloader._native._gather import Reader

__all__ = ["BatchRows"]


@dataclass(frozen=True, slots=True)
class BatchRows:
    """The rows of a dataset that opts in to native batches (``__batch_rows__``).

    Attributes:
        source: a tuple of arrays ``(N, ...)`` sharing ``N``: item ``i`` of the dataset is
            ``tuple(a[i] for a in source)`` and a batch ``[a[indices] for a in source]``
            (one C-contiguous array ``(B, ...)`` per column, the column's dtype); or the
            ``Reader`` of an ``.ndf`` file: item ``i`` is ``(x[i], y[i].reshape(y_shape))``
            and a batch ``[x (B, d), y (B,) + y_shape]``, in the file's dtypes.
        y_shape: (a ``Reader`` only) the shape of one row's y: ``(l,)`` when None, or any
            shape of ``l`` elements (``()`` for one label column).

    The dataset promises that its ``__getitem__`` / ``__getitems__`` give these very items:
    the loader uses either, whichever is cheaper, and batches must not depend on which.
    Arrays the native gather cannot read (not C-contiguous, Python objects, a structured
    dtype that does not collate) are not an error: those batches go through
    ``__getitems__`` (or ``__getitem__``) and ``default_collate`` as usual.

    Thread-safety: immutable; the arrays (or the file) are only read, by many threads at once.
    """

    source: tuple[Any, ...] | Reader
    y_shape: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        """Checks the rows once, where the dataset builds them (not per batch).

        Raises:
            TypeError: ``source`` is not a ``Reader``, nor a tuple or list of objects with a
                ``shape`` (one bare array would be split into its rows: wrap it, ``(a,)``).
            ValueError: no arrays, a 0-d array, arrays whose first dimensions differ, or
                ``y_shape`` given with arrays, or not a tuple of ints whose product is the
                ``Reader``'s label count ``l``.
        """
        source = self.source
        if isinstance(source, Reader):
            _check_y_shape(self.y_shape, int(source.l))
            return
        if not isinstance(source, (tuple, list)):
            raise TypeError(
                f"BatchRows.source must be a tuple of arrays or a Reader, got {type(source).__name__} "
                f"(one array is BatchRows((array,)))"
            )
        object.__setattr__(self, "source", _checked_arrays(tuple(source)))
        if self.y_shape is not None:
            raise ValueError("BatchRows.y_shape applies to a Reader's rows only, not to arrays")

    @property
    def n(self) -> int:
        """Rows (``len`` of the dataset): ``N`` of the arrays, or the file's row count."""
        source = self.source
        if isinstance(source, Reader):
            return int(source.n)
        return int(source[0].shape[0]) if source else 0


def _checked_arrays(arrays: tuple[Any, ...]) -> tuple[Any, ...]:
    """``arrays`` if they can be a dataset's columns: at least one, each with a first dimension,
    all of one length (the rules of ``ArrayDataset``).

    Raises:
        TypeError: an entry without ``shape``.
        ValueError: no arrays, a 0-d array, or first dimensions that differ.
    """
    if not arrays:
        raise ValueError("BatchRows needs at least one array")
    for k, a in enumerate(arrays):
        shape = getattr(a, "shape", None)
        if not isinstance(shape, tuple):
            raise TypeError(f"BatchRows array {k} is a {type(a).__name__}, not an array (no shape)")
        if len(shape) == 0:
            raise ValueError(f"BatchRows array {k} is 0-d (shape ()); arrays need a first dimension")
    sizes = [a.shape[0] for a in arrays]
    if any(size != sizes[0] for size in sizes):
        raise ValueError(f"BatchRows arrays have different first dimensions: {sizes}")
    return arrays


def _check_y_shape(y_shape: Any, l: int) -> None:
    """Raises ValueError unless ``y_shape`` is None or a tuple of ints >= 0 of ``l`` elements."""
    if y_shape is None:
        return
    if (type(y_shape) is not tuple or not all(type(k) is int and k >= 0 for k in y_shape)
            or math.prod(y_shape) != l):
        raise ValueError(f"BatchRows.y_shape must be a tuple of ints with {l} elements in all, got {y_shape!r}")
