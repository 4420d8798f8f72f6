"""``BatchRows``: what a dataset gives the loader to build its batches with no Python.

A map-style dataset opts in to native batches with one method, ``__batch_rows__(self) ->
BatchRows | None`` (the protocol; docs/usage.md, "Native batches").  The loader calls it
once an epoch, and only where its batches would be ``default_collate`` of the dataset's
items with nothing in between (``batch_size`` or ``batch_sampler`` set, no ``transform``,
the default ``collate_fn``, ``item_concurrency=1``); it then gathers each batch's rows
itself (``dataloader._engine.native``) instead of calling ``__getitem__`` / ``__getitems__``.
"""

from __future__ import annotations

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
        """Raises: ValueError: ``y_shape`` given with arrays (it applies to a ``Reader`` only)."""
        if not isinstance(self.source, Reader):
            object.__setattr__(self, "source", tuple(self.source))
            if self.y_shape is not None:
                raise ValueError("BatchRows.y_shape applies to a Reader's rows only, not to arrays")

    @property
    def n(self) -> int:
        """Rows (``len`` of the dataset): ``N`` of the arrays, or the file's row count."""
        source = self.source
        if isinstance(source, Reader):
            return int(source.n)
        return int(source[0].shape[0]) if source else 0
