"""PyTorch's generic collation (``collate``, ``default_collate``, ``default_convert``) over NumPy.

Public through :mod:`dataloader.collate`; its docstring is the table of rules.
"""

from __future__ import annotations

import collections.abc
import copy
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dataloader._collation.errors import ERR_FORMAT, describe, mark, push_field
from dataloader._datasets.batched import BatchedItems

__all__ = [
    "CollateFnMap",
    "collate",
    "collate_float_fn",
    "collate_int_fn",
    "collate_numpy_array_fn",
    "collate_numpy_scalar_fn",
    "collate_str_fn",
    "default_collate",
    "default_collate_err_msg_format",
    "default_collate_fn_map",
    "default_convert",
]

default_collate_err_msg_format = ERR_FORMAT
_REFUSED_KINDS = "OSU"  # object, bytes, str: PyTorch's [SaUO] dtype pattern
_FAST_KINDS = "biufc"  # 1-D columns of these yield NumPy scalars that collate to the same dtype
_NP_SCALARS = (np.bool_, np.number, np.object_)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
CollateFnMap = dict[type | tuple[type, ...], Callable[..., Any]]


def _not_all(batch: Sequence[Any], types: type | tuple[type, ...]) -> BaseException | None:
    """A marked TypeError naming the first element of ``batch`` that is not a ``types``, or None.

    Called only once collation has failed or produced an object array, so the normal path pays
    nothing; it is what turns a ``None`` in a batch of numbers into a TypeError naming
    ``NoneType`` (NumPy would make it NaN, or an object array).
    """
    for j, x in enumerate(batch):
        if not isinstance(x, types):
            return mark(TypeError(f"{ERR_FORMAT.format(type(x))} at element {j} of the batch"))
    return None


def _field(batch: Sequence[Any], fmap: CollateFnMap | None, key: str) -> Any:
    try:
        return _collate(batch, fmap)
    except Exception as e:
        push_field(e, key)
        raise


def _collate(batch: Sequence[Any], fmap: CollateFnMap | None) -> Any:
    elem = batch[0]
    elem_type = type(elem)
    if fmap is not None:
        fn = fmap.get(elem_type)
        if fn is not None:
            return fn(batch, collate_fn_map=fmap)
        for key, fn in fmap.items():
            if isinstance(elem, key):
                return fn(batch, collate_fn_map=fmap)
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(batch, fmap)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        try:
            transposed = zip(*batch, strict=False)  # PyTorch does not check namedtuple lengths
        except TypeError:  # an element is not iterable (None...)
            raise _not_all(batch, tuple) or mark(TypeError(ERR_FORMAT.format(elem_type))) from None
        fields = [
            _field(s, fmap, f".{name}") for name, s in zip(elem._fields, transposed, strict=False)
        ]
        return elem_type(*fields)
    if isinstance(elem, collections.abc.Sequence):
        return _collate_sequence(batch, fmap)
    torch = sys.modules.get("torch")  # a tensor exists only if torch is imported: never import it
    if torch is not None and isinstance(elem, torch.Tensor):
        return _collate_tensors(torch, batch)
    raise mark(TypeError(ERR_FORMAT.format(elem_type)))


def _collate_tensors(torch: Any, batch: Sequence[Any]) -> Any:
    """``torch.stack(batch, 0)``: torch tensors stay torch tensors (shape ``(B, ...)``, dtype kept)."""
    first = batch[0].shape
    for j, t in enumerate(batch):
        if isinstance(t, torch.Tensor) and t.shape != first:
            raise mark(
                RuntimeError(
                    "stack expects each tensor to be equal size, but got "
                    f"{list(first)} at entry 0 and {list(t.shape)} at entry {j}"
                )
            )
    return torch.stack(list(batch), 0)


def _collate_mapping(batch: Sequence[Any], fmap: CollateFnMap | None) -> Any:
    elem = batch[0]
    values = {}
    for key in elem:
        try:
            samples = [d[key] for d in batch]
        except TypeError:  # an element is not a mapping (None...)
            error = _not_all(batch, collections.abc.Mapping)
            if error is None:
                raise
            raise error from None
        except KeyError:
            j = next(j for j, d in enumerate(batch) if key not in d)
            raise mark(
                KeyError(f"default_collate: key {key!r} is missing from element {j} of the batch")
            ) from None
        values[key] = _field(samples, fmap, f"[{key!r}]")
    return _rebuild_mapping(elem, values)


def _collate_sequence(batch: Sequence[Any], fmap: CollateFnMap | None) -> Any:
    elem = batch[0]
    size = len(elem)
    for j, other in enumerate(batch):
        try:
            other_size = len(other)
        except TypeError:  # None, a number...
            raise mark(
                TypeError(f"{ERR_FORMAT.format(type(other))} at element {j} of the batch")
            ) from None
        if other_size != size:
            raise mark(
                RuntimeError(
                    "each element in list of batch should be of equal size "
                    f"(element 0 has length {size}, element {j} has length {len(other)})"
                )
            )
    fields = [_field(s, fmap, f"[{i}]") for i, s in enumerate(zip(*batch, strict=False))]
    if isinstance(elem, (tuple, BatchedItems)):
        return fields  # Backwards compatibility (PyTorch): tuples collate into lists.
    return _rebuild_sequence(elem, fields)


def _rebuild_mapping(elem: Any, values: dict[Any, Any]) -> Any:
    """``values`` as a mapping of ``elem``'s type; a plain dict where that type cannot be made."""
    try:
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)  # keeps extra state, e.g. a defaultdict's factory
            clone.update(values)
            return clone
        return type(elem)(values)
    except TypeError:  # not copyable / not constructible from a dict
        return values


def _rebuild_sequence(elem: Any, items: list[Any]) -> Any:
    """``items`` as a sequence of ``elem``'s type; the list itself where that type can't be made."""
    try:
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(elem)(items)
    except TypeError:  # e.g. range
        return items


def collate_numpy_array_fn(
    batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None
) -> np.ndarray:
    """Stack arrays of equal shape into ``(B, ...)``; object / string dtypes -> TypeError."""
    elem = batch[0]
    if elem.dtype.kind in _REFUSED_KINDS:
        raise mark(TypeError(ERR_FORMAT.format(elem.dtype)))
    try:
        out = np.stack(batch)
    except ValueError:
        error = _not_all(batch, np.ndarray)
        if error is not None:
            raise error from None
        first = np.shape(elem)
        for j, b in enumerate(batch):
            if np.shape(b) != first:
                raise mark(
                    RuntimeError(
                        "stack expects each array to be equal size, but got "
                        f"{first} at entry 0 and {np.shape(b)} at entry {j}"
                    )
                ) from None
        raise
    if out.dtype.kind in _REFUSED_KINDS:
        raise _not_all(batch, np.ndarray) or mark(TypeError(ERR_FORMAT.format(out.dtype)))
    return out


def collate_numpy_scalar_fn(
    batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None
) -> np.ndarray:
    """NumPy scalars -> array of their (promoted) dtype, shape ``(B,)``."""
    out = np.array(batch)
    if out.dtype.kind in _REFUSED_KINDS:
        raise _not_all(batch, _NP_SCALARS) or mark(TypeError(ERR_FORMAT.format(out.dtype)))
    return out


def _numbers(batch: Sequence[Any]) -> np.ndarray:
    """``np.array(batch)`` of numbers; an object array only when some int is beyond 64 bits."""
    out = np.array(batch)
    if out.dtype.kind in "biufc":
        return out
    error = _not_all(batch, (int, float, complex, np.number, np.bool_))
    if error is not None:  # None (NumPy would make it NaN in a float array), a string...
        raise error
    if out.dtype.kind != "O":
        raise mark(TypeError(ERR_FORMAT.format(out.dtype)))
    return out


def collate_float_fn(
    batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None
) -> np.ndarray:
    """Python floats -> float64 array (``torch.tensor(batch, dtype=torch.float64)``)."""
    out = _numbers(batch)
    if out.dtype.kind == "c" or (out.dtype.kind == "O" and any(type(x) is complex for x in batch)):
        raise mark(TypeError(ERR_FORMAT.format(complex)))
    try:
        return out.astype(np.float64, copy=False)
    except OverflowError:
        raise mark(
            ValueError(f"default_collate: a number overflows float64 in {batch!r:.200}")
        ) from None


def collate_int_fn(
    batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None
) -> np.ndarray:
    """Python ints -> int64 array; all bools -> bool; mixed with floats -> float32 (torch)."""
    if all(isinstance(x, int) for x in batch):
        if all(isinstance(x, bool) for x in batch):
            return np.array(batch, dtype=np.bool_)
        try:
            return np.array(batch, dtype=np.int64)
        except OverflowError:
            bad = next(x for x in batch if not _INT64_MIN <= x <= _INT64_MAX)
            raise mark(
                ValueError(f"default_collate: integer {bad} does not fit in int64")
            ) from None
    out = _numbers(batch)
    kind = out.dtype.kind
    if kind == "O":
        big = [x for x in batch if isinstance(x, int) and not _INT64_MIN <= x <= _INT64_MAX]
        raise mark(ValueError(f"default_collate: integer {big[:1]} does not fit in int64"))
    if kind == "f":
        return out.astype(np.float32)  # torch.tensor infers its default dtype, float32
    if kind == "c":
        return out.astype(np.complex64)
    if kind == "u" and out.size and out.max() > _INT64_MAX:
        raise mark(ValueError(f"default_collate: integer {out.max()} does not fit in int64"))
    return out if kind == "b" else out.astype(np.int64, copy=False)


def collate_str_fn(
    batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None
) -> Any:
    """Strings and bytes are left as they are: the batch itself is returned."""
    return batch


default_collate_fn_map: CollateFnMap = {
    np.ndarray: collate_numpy_array_fn,
    _NP_SCALARS: collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}
_PRISTINE_MAP = dict(default_collate_fn_map)


def collate(batch: Sequence[Any], *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Collate ``batch`` (a non-empty sequence of samples) with PyTorch's generic algorithm.

    Args:
        batch: the samples of one batch.
        collate_fn_map: ``{type or tuple of types: fn(batch, *, collate_fn_map)}``; an exact
            type match wins, else the first ``isinstance`` match in insertion order; then
            mappings, namedtuples and sequences are recursed into.

    Raises:
        TypeError / RuntimeError / KeyError / ValueError: see the module docstring; the message
            (or, for errors raised by your own functions, a note) names the field.
        IndexError: ``batch`` is empty.
    """
    try:
        return _collate(batch, collate_fn_map)
    except Exception as e:
        describe(e)
        raise


def collate_columns(cols: Sequence[Any], n: int) -> list[np.ndarray] | None:
    """``default_collate(BatchedItems(cols))`` when it is ``list(cols)`` (``n`` > 0 rows, numeric
    NumPy columns, ``default_collate_fn_map`` as shipped), else None: collate the rows then.

    Internal: ``default_collate`` and the loader's native batch path share this one rule.
    """
    if not n or default_collate_fn_map != _PRISTINE_MAP:
        return None
    for c in cols:
        if not isinstance(c, np.ndarray) or c.ndim < 1 or c.dtype.kind not in _FAST_KINDS:
            return None
    return [np.ascontiguousarray(c) for c in cols]


def default_collate(batch: Sequence[Any]) -> Any:
    """Collate a batch (a sequence of samples) into NumPy arrays, by PyTorch's rules.

    Args:
        batch: non-empty sequence of samples (arrays, numbers, strings, mappings, namedtuples,
            sequences, nested), or a :class:`BatchedItems`.

    Returns:
        The samples with an outer batch dimension added; see the module docstring's table.
        For a ``BatchedItems`` of numeric columns: ``list(columns)`` (C-contiguous; they may
        share memory with the columns); with ``names``, ``{name: column}`` (an object column
        of ``str`` or of ``bytes`` as a ``list``, as its rows collate).

    Raises:
        TypeError, RuntimeError, KeyError, ValueError, IndexError: see :func:`collate`.
    """
    if type(batch) is BatchedItems:
        if batch.names is not None:
            named = _named_columns(batch)
            if named is not None:
                return named
        else:
            cols = collate_columns(batch.columns, len(batch))
            if cols is not None:
                return cols
    return collate(batch, collate_fn_map=default_collate_fn_map)


def _named_columns(batch: BatchedItems) -> dict[str, Any] | None:
    """``default_collate`` of a ``BatchedItems`` with names (rows are dicts) without its rows:
    ``{name: column}`` for numeric columns, ``list(column)`` for an object column of only
    ``str`` or only ``bytes`` (what collating its rows gives); None where a column is neither."""
    names = batch.names
    if names is None or not len(batch) or default_collate_fn_map != _PRISTINE_MAP:
        return None
    out: dict[str, Any] = {}
    for name, c in zip(names, batch.columns, strict=True):
        if not isinstance(c, np.ndarray) or c.ndim < 1:
            return None
        if c.dtype.kind in _FAST_KINDS:
            out[name] = np.ascontiguousarray(c)
        elif c.ndim == 1 and c.dtype.kind == "O" and _all_text(c):
            out[name] = c.tolist()
        else:
            return None
    return out


def _all_text(column: np.ndarray) -> bool:
    """True when ``column`` (1-D, object) holds only ``str`` or only ``bytes``."""
    kind = type(column[0])
    return kind in (str, bytes) and all(type(x) is kind for x in column)


def default_convert(data: Any) -> Any:
    """Convert one sample (``batch_size=None``): NumPy scalars -> 0-d arrays, containers recursed.

    Arrays and Python numbers / strings pass through unchanged; mappings keep their type (else
    ``dict``), namedtuples their type, tuples become lists and other sequences keep their type
    where they can be rebuilt (else ``list``), as in PyTorch's ``default_convert``.
    """
    if isinstance(data, (np.ndarray, BatchedItems)):
        return data
    if isinstance(data, np.generic) and not isinstance(data, (np.str_, np.bytes_)):
        return np.asarray(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data
