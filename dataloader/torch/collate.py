"""``default_collate`` / ``default_convert`` for PyTorch users: torch's rules, torch tensors out.

``default_collate`` is ``torch.utils.data.default_collate``: it runs torch's own generic
``collate`` with torch's ``default_collate_fn_map`` (so dtypes, error types and messages are
torch's: NumPy arrays and Python numbers become tensors with torch's dtypes, ``str``/``bytes``
are kept, mappings / namedtuples / sequences are recursed), with two differences that do not
change any result:

* tensors are stacked with ``torch.stack`` into fresh memory.  torch's own
  ``collate_tensor_fn`` allocates the batch in shared memory when ``get_worker_info()`` is not
  None (to pass it between processes); our workers are threads, so that copy would be waste.
* a :class:`~dataloader.BatchedItems` of numeric NumPy columns (what ``ArrayDataset`` and
  ``.ndf`` datasets return from ``__getitems__``) becomes ``[torch.from_numpy(c) for c in
  columns]``: no per-row work and no copy (the tensors share memory with the columns, which
  the dataset made fresh for this batch).  Rows collated one by one give equal tensors.

``default_convert`` is ``torch.utils.data.default_convert`` itself.

Thread-safety: pure functions of their input; safe on any thread.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data._utils import collate as _torch_collate

from dataloader._datasets.batched import BatchedItems

__all__ = ["collate_tensor_fn", "default_collate", "default_collate_fn_map", "default_convert"]

default_convert = _torch_collate.default_convert

# dtypes torch.from_numpy takes whose rows torch's collate turns into the same dtype.
_FAST_DTYPES = frozenset(
    np.dtype(t) for t in (np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
                          np.float16, np.float32, np.float64, np.complex64, np.complex128)
)


def collate_tensor_fn(batch: Any, *, collate_fn_map: Any = None) -> torch.Tensor:
    """torch's ``collate_tensor_fn`` without its shared-memory branch: ``torch.stack(batch, 0)``.

    Raises:
        RuntimeError: nested or sparse tensors (torch's messages), or unequal shapes
            (``torch.stack``'s message).
    """
    elem = batch[0]
    if elem.is_nested:
        raise RuntimeError(
            "Batches of nested tensors are not currently supported by the default collate_fn; "
            "please provide a custom collate_fn to handle them appropriately."
        )
    if elem.layout in {torch.sparse_coo, torch.sparse_csr, torch.sparse_bsr, torch.sparse_csc, torch.sparse_bsc}:
        raise RuntimeError(
            "Batches of sparse tensors are not currently supported by the default collate_fn; "
            "please provide a custom collate_fn to handle them appropriately."
        )
    return torch.stack(batch, 0)


default_collate_fn_map: dict[Any, Any] = {
    **_torch_collate.default_collate_fn_map,
    torch.Tensor: collate_tensor_fn,
}


def _columns(batch: BatchedItems) -> list[torch.Tensor] | None:
    cols = batch.columns
    if not len(batch):
        return None
    for c in cols:
        if not isinstance(c, np.ndarray) or c.ndim < 1 or c.dtype not in _FAST_DTYPES:
            return None
    return [_tensor(c) for c in cols]


def _tensor(column: np.ndarray) -> torch.Tensor:
    # A read-only column (e.g. a view of a read-only mapping) is copied: torch tensors are
    # writable, and from_numpy on a read-only array warns.
    return torch.from_numpy(np.ascontiguousarray(column) if column.flags.writeable else np.array(column))


def _named_columns(batch: BatchedItems, names: tuple[str, ...]) -> dict[str, Any] | None:
    """torch's collation of the dict rows of a named ``BatchedItems``, column by column:
    a tensor per numeric column, ``list(column)`` for an object column (or a list) of only
    ``str`` or only ``bytes``, a tensor column as it is (contiguous: torch stacks its rows into
    an equal tensor); None where a column is none of these (the rows are collated then)."""
    if not len(batch):
        return None
    out: dict[str, Any] = {}
    for name, c in zip(names, batch.columns, strict=True):
        if isinstance(c, torch.Tensor) and c.ndim >= 1:
            out[name] = c.contiguous()
            continue
        if isinstance(c, list) and type(c[0]) in (str, bytes) and all(type(x) is type(c[0]) for x in c):
            out[name] = list(c)
            continue
        if not isinstance(c, np.ndarray) or c.ndim < 1:
            return None
        if c.dtype in _FAST_DTYPES:
            out[name] = _tensor(c)
        elif c.ndim == 1 and c.dtype.kind == "O" and type(c[0]) in (str, bytes) and all(
            type(x) is type(c[0]) for x in c
        ):
            out[name] = c.tolist()
        else:
            return None
    return out


def default_collate(batch: Any) -> Any:
    """Collate a batch into torch tensors, exactly as ``torch.utils.data.default_collate``.

    Args:
        batch: a non-empty sequence of samples (tensors, NumPy arrays, numbers, str/bytes,
            mappings, namedtuples, sequences, nested), or a ``BatchedItems``.

    Returns:
        torch's result: tensors of shape ``(B, ...)``; for a ``BatchedItems`` of numeric
        columns, ``list`` of one tensor per column (sharing memory with the columns); with
        ``names``, ``{name: tensor}`` (a column of ``str`` or of ``bytes``: a ``list``).

    Raises:
        TypeError, RuntimeError: torch's (``default_collate: batch must contain tensors, numpy
            arrays, numbers, dicts or lists; found ...``; unequal sizes).
    """
    if type(batch) is BatchedItems:
        names = batch.names
        cols = _columns(batch) if names is None else _named_columns(batch, names)
        if cols is not None:
            return cols
        batch = list(batch)
    return _torch_collate.collate(batch, collate_fn_map=default_collate_fn_map)
