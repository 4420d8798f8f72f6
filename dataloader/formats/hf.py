"""``HFDataset``: a Hugging Face ``datasets.Dataset`` (map-style, Arrow-backed) read one Arrow
``take`` per batch, and ``from_hf``: the rule that makes the loaders accept HF datasets as is.

A batch of ``B`` indices is read as the dataset's own ``__getitems__`` reads it, without its
per-row work: the indices go through the dataset's indices mapping (``select``, ``shuffle``,
``train_test_split`` make one; it is kept, not flattened), then one ``pyarrow.Table.take`` of
the rows on the Arrow table, then the columns are formatted by the dataset's format:

================  ==========================================================================
format            columns of the batch (``BatchedItems`` with names: rows are dicts)
================  ==========================================================================
none (python)     ``Value`` columns of ints / floats / bools without nulls: NumPy ``int64`` /
                  ``float64`` / ``bool`` ``(B,)`` (the dtypes collating HF's Python values gives);
                  strings / binaries: ``object`` arrays of ``str`` / ``bytes``; any other column
                  (lists, structs, ``Image``, nulls): ``object`` arrays of HF's Python values
"arrow"           the ``dataloader.formats`` rule (``ArrowDataset``'s dtypes: ``float32``
                  stays ``float32``; nulls as its ``nulls`` argument says)
"numpy", "torch", HF's own formatter on the taken rows (``format_batch``): what
others            ``dataset[indices]`` returns (its dtypes, e.g. ``float32`` for floats), a
                  NumPy ``str_`` / ``bytes_`` column as an ``object`` array of ``str`` / ``bytes``
================  ==========================================================================

Collation then gives a dict of columns (``{name: (B, ...) array or tensor}``, strings as a
list), as collating HF's dict rows would, with no per-row work where the columns are numeric.
The format's ``columns`` and ``output_all_columns`` are kept as HF applies them.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.batched import BatchedItems
from dataloader._indices import as_index_array
from dataloader.formats._columns import NULLS, to_numpy
from dataloader.formats._parts import arrow

__all__ = ["HFDataset", "from_hf", "is_hf_object"]

# Formats whose batch is a dict of columns (the rest: HF's own __getitems__).
_DICT_FORMATS = (None, "python", "arrow", "numpy", "torch", "custom")
_PYTHON_DTYPES = (("is_integer", np.int64), ("is_floating", np.float64), ("is_boolean", np.bool_))


def is_hf_object(obj: Any) -> bool:
    """True when ``obj``'s type comes from the ``datasets`` package (read from its module name:
    ``datasets`` is never imported to answer)."""
    return type(obj).__module__.partition(".")[0] == "datasets"


def from_hf(dataset: Any) -> Any:
    """``dataset`` as the loader reads it: an ``HFDataset`` for a ``datasets.Dataset``, an
    ``HFIterableDataset`` for a ``datasets.IterableDataset``, anything else unchanged.

    ``datasets`` is imported only when ``dataset``'s type comes from it (``is_hf_object``).
    """
    if not is_hf_object(dataset):
        return dataset
    import datasets  # lazy: only for an object of its own (its import costs ~1 s)

    if isinstance(dataset, datasets.Dataset):
        return HFDataset(dataset)
    if isinstance(dataset, datasets.IterableDataset):
        from dataloader.formats.hf_stream import HFIterableDataset  # lazy: with the stream kind only

        return HFIterableDataset(dataset)
    return dataset


class HFDataset(Dataset):
    """A ``datasets.Dataset`` read one Arrow ``take`` per batch (module docstring: the columns).

    Args:
        dataset: a ``datasets.Dataset`` (any format, indices mapping, column selection).  It is
            kept, not copied: a later ``set_format`` on it is not seen (the format is read here).
        nulls: ``"error"`` or ``"object"``: the null rule of the ``"arrow"`` format (as
            ``ArrowDataset``'s); other formats keep nulls as HF does.

    ``len`` is ``len(dataset)``; ``self[i]`` is ``dataset[i]`` (HF's row, for any format);
    ``__getitems__(indices)`` is one ``BatchedItems`` whose rows are ``dataset[i]``'s values
    (NumPy scalars where the column is numeric).

    Raises:
        TypeError: ``dataset`` is not a ``datasets.Dataset``.
        ValueError: ``nulls`` is not one of ``("error", "object")``.

    Thread-safety: immutable after construction; the Arrow table is read-only, so any number of
    threads may read batches at once.
    """

    accepts_index_arrays = True

    def __init__(self, dataset: Any, *, nulls: str = "error") -> None:
        if not is_hf_object(dataset) or type(dataset).__name__ != "Dataset":
            raise TypeError(f"HFDataset takes a datasets.Dataset, got {type(dataset).__name__}")
        if nulls not in NULLS:
            raise ValueError(f"nulls must be one of {NULLS}, got {nulls!r}")
        self.dataset = dataset
        self.nulls = nulls
        fmt = dataset.format
        self.format_type: str | None = fmt["type"]
        names = list(dataset.column_names)
        if fmt["columns"] is not None and not fmt["output_all_columns"]:
            names = [c for c in names if c in set(fmt["columns"])]
        self.columns: tuple[str, ...] = tuple(names)
        self._table = dataset.data.table.select(names)
        self._features = dataset.features  # a deep copy on every read of the property: read once
        # Columns HF gives as plain Python scalars / str (no decoding): the NumPy fast path.
        self._plain = frozenset(n for n in names if type(self._features[n]).__name__ in ("Value", "ClassLabel"))
        self._formatter: Any = None
        if self.format_type not in (None, "python", "arrow") and self.format_type in _DICT_FORMATS:
            import datasets.formatting as hf_formatting  # lazy: the dataset's own formatter

            self._formatter = hf_formatting.get_formatter(self.format_type, features=self._features, **fmt["format_kwargs"])
        # HF's indices mapping (select / shuffle / split): no public accessor; one uint64 column.
        mapping = getattr(dataset, "_indices", None)
        self._mapping = None if mapping is None else mapping.column(0)

    def __repr__(self) -> str:
        return f"HFDataset({len(self)} rows, columns={list(self.columns)}, format={self.format_type!r})"

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        """``dataset[index]``: HF's row (a dict, formatted by the dataset's format).

        Raises:
            IndexError: ``index`` out of range.  TypeError: not an integer.
        """
        return self.dataset[operator.index(index)]

    def __getitems__(self, indices: Any) -> Any:
        """Rows ``indices`` (any order, repeats allowed) as one ``BatchedItems`` named ``columns``
        (a custom ``set_transform``: named as its output; ``"pandas"``, ``"polars"``, ``"jax"``,
        ``"tensorflow"``: HF's own ``__getitems__``, a list of rows).

        Args:
            indices: 1-D ints (a list or an int64 array), each in ``[-len, len)``.

        Raises:
            IndexError: an index out of range (named).
        """
        idx = as_index_array(indices)
        n = len(self.dataset)
        if idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
            bad = idx[(idx < -n) | (idx >= n)][0]
            raise IndexError(f"HFDataset index {bad} out of range for length {n}")
        idx = np.where(idx < 0, idx + n, idx)
        pa = arrow()
        rows: Any = pa.array(idx, type=pa.int64())
        if self._mapping is not None:
            rows = self._mapping.take(rows)
        kind = self.format_type
        if kind not in _DICT_FORMATS:
            return self.dataset.__getitems__(idx.tolist())
        taken = self._table.take(rows)
        if kind in (None, "python"):
            return BatchedItems(tuple(self._python_column(pa, taken, name) for name in self.columns), self.columns)
        if kind == "arrow":
            where = "<datasets.Dataset>"
            return BatchedItems(
                tuple(to_numpy(pa, taken.column(name), name, where, self.nulls) for name in self.columns), self.columns
            )
        import datasets.formatting as hf_formatting  # lazy: the dataset's own formatter

        fmt = self.dataset.format
        batch = hf_formatting.format_table(
            taken, idx.tolist(), formatter=self._formatter, format_columns=fmt["columns"],
            output_all_columns=fmt["output_all_columns"],
        )
        return BatchedItems(tuple(_text_objects(c) for c in batch.values()), tuple(batch))

    def _python_column(self, pa: Any, taken: Any, name: str) -> np.ndarray:
        column = taken.column(name)
        t = column.type
        if name in self._plain and not column.null_count:
            for test, dtype in _PYTHON_DTYPES:
                if getattr(pa.types, test)(t) and not pa.types.is_uint64(t):
                    return np.asarray(column.to_numpy(), dtype=dtype)
            if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
                return column.to_numpy(zero_copy_only=False)
        import datasets.formatting as hf_formatting  # lazy: HF's Python values (decoded features)

        values = hf_formatting.PythonFormatter(features=self._features).format_batch(taken.select([name]))[name]
        out = np.empty(len(values), dtype=object)
        for i, value in enumerate(values):  # item by item: a list value stays one item
            out[i] = value
        return out


def _text_objects(column: Any) -> Any:
    """A NumPy ``str_`` / ``bytes_`` column (HF's ``"numpy"`` strings) as an ``object`` array of
    ``str`` / ``bytes``, which collates column-wise into a list (rows of ``np.str_`` would be
    collated one by one into an equal list); any other column unchanged."""
    if isinstance(column, np.ndarray) and column.ndim == 1 and column.dtype.kind in "US":
        return column.astype(object)
    return column
