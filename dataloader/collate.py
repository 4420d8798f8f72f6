"""``default_collate`` / ``default_convert``: PyTorch's collation rules, producing NumPy arrays.

Where PyTorch makes a ``torch.Tensor`` we make a C-contiguous ``numpy.ndarray`` with the dtype
torch would pick:

==========================  ==================================================================
batch of ...                ``default_collate`` gives
==========================  ==================================================================
arrays ``(...)``            ``np.stack``: shape ``(B, ...)``, dtype kept (float32 stays float32)
NumPy scalars               array of their dtype, shape ``(B,)``
``float``                   float64 array
``int``                     int64 array (all ``bool``: bool array; mixed with floats: float32,
                            torch's default dtype); beyond int64 -> ``ValueError`` as in torch
``str`` / ``bytes``         left as they are (the batch list; a tuple for a field of tuples)
``Mapping``                 same mapping type, each key collated (``KeyError`` if one is missing)
``namedtuple``              same namedtuple type, each field collated
``tuple``                   ``list`` of collated fields (PyTorch's backwards-compatibility rule)
other ``Sequence``          same type where it can be rebuilt (else ``list``), fields collated
:class:`BatchedItems`       ``list(columns)``, with no per-row work (fast path; equal result)
``torch.Tensor``            ``torch.stack``: a ``torch.Tensor`` of shape ``(B, ...)``, dtype kept
                            (torch is never imported here: a tensor means torch already is)
==========================  ==================================================================

Errors follow PyTorch's types and say where they happened (``field sample[1]['x']``):
sequences of unequal length and arrays of unequal shape raise ``RuntimeError``; ``None``,
object / string arrays and other types raise ``TypeError`` ("default_collate: batch must
contain tensors, numpy arrays, numbers, dicts or lists; found <class 'NoneType'> at element 3
of the batch [in field sample['x']]").  A ``None`` among numbers or arrays is such an error
wherever it is (never a NaN, as ``np.array([1.5, None], dtype=float)`` would make it); among
strings it is kept, as in PyTorch.

Unlike PyTorch, arrays of dtypes torch lacks (datetime64, structured) are stacked, not refused.
The extension point is PyTorch's: ``collate(batch, collate_fn_map=...)`` and the dict
``default_collate_fn_map`` (``{type or tuple of types: fn(batch, *, collate_fn_map)}``).

Thread-safety: pure functions of their input; safe on any thread.
"""

from __future__ import annotations

from dataloader._collation.default import (
    collate,
    collate_float_fn,
    collate_int_fn,
    collate_numpy_array_fn,
    collate_numpy_scalar_fn,
    collate_str_fn,
    default_collate,
    default_collate_err_msg_format,
    default_collate_fn_map,
    default_convert,
)

__all__ = [
    "collate",
    "default_collate",
    "default_collate_err_msg_format",
    "default_collate_fn_map",
    "default_convert",
]

# Defined in a private module; shown (and pickled) under their public home.
for _fn in (collate, collate_float_fn, collate_int_fn, collate_numpy_array_fn,
            collate_numpy_scalar_fn, collate_str_fn, default_collate, default_convert):
    _fn.__module__ = __name__
del _fn
