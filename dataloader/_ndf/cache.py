"""``CachedDataset``: a dataset's transformed items written to an `.ndf` file while an epoch
runs, and read back from it (at the file's native gather speed) once it is complete.

Writing: the rows of a shuffled epoch arrive in the sampler's order, from several worker
threads; they are written **by index for a preallocated file** (``_ndf/slots.RowSlots``:
a batch's rows copied to their places, in memory for a file up to 64 MiB, else in the file's
mapping; the claimed flags under a lock), so row ``i`` of the file is item ``i`` and the
finished file is a plain `.ndf` file (an ``NdfDataset`` reads it).
The file appears under ``path`` only when every row is written (temporary name, a partial
magic, fsync, atomic rename; ``RowSlots``' docstring), unless another dataset's cache was
completed there meanwhile (``_ndf/cache_path``).  Item forms and shapes:
``_ndf/cache_items.ItemSchema``; the key: ``_ndf/fingerprint.fingerprint``.
"""

from __future__ import annotations

import operator
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from dataloader._context import swap_index
from dataloader._datasets.base import Dataset, IterableDataset
from dataloader._datasets.rows import BatchRows
from dataloader._indices import as_index_array
from dataloader._ndf.cache_items import CACHE_FORMAT, CACHE_KEY, ItemSchema
from dataloader._ndf.cache_path import PathGuard
from dataloader._ndf.fingerprint import fingerprint as dataset_fingerprint
from dataloader._ndf.format import Layout
from dataloader._ndf.read import ACCESS_MODES, NdfDataset, NdfFile
from dataloader._ndf.slots import RowSlots

__all__ = ["CachedDataset"]


class CachedDataset(Dataset[Any]):
    """``dataset``'s items, cached in the `.ndf` file ``path`` by the first epoch that sees them all.

    Until the cache is complete, item ``i`` is ``dataset[i]`` (computed), written to row ``i``
    of a temporary file unless that row is written already; the item that writes the last
    missing row renames the file onto ``path``, and from then on items are read from it:
    ``__getitems__`` is one native gather a batch, and with no ``transform`` and items
    ``(x, y)`` with a 1-D x, ``__batch_rows__`` lets the loader build batches with no Python
    (its ``native_rows`` path, as for ``NdfDataset``).  A later ``CachedDataset`` over the same
    dataset (same fingerprint and length) reads ``path`` from the start.

    Items are one array or an ``(x, y)`` tuple of fixed shapes (``dataloader._ndf.cache_items``);
    every epoch, the first included, gets them as NumPy arrays in the file's dtypes.

    Only the deterministic part belongs in ``dataset``: a cache freezes whatever the first
    epoch drew.  Random augmentation goes in ``transform`` (or the loader's ``transform=``),
    run on every item after the cache, every epoch; draw from ``dataloader.item_rng()``.

    An epoch that does not see every index (``break``, a resumed epoch, ``drop_last``, a
    ``DistributedSampler`` rank, a subset sampler) leaves the cache incomplete: the next epoch
    computes its items again and writes the rows still missing, until every row is written.
    ``fill()`` writes the missing rows at once (e.g. on one rank before the others start).

    Memory while the cache is incomplete: a file of up to 64 MiB is built in memory (its
    size, freed when it is written, once, in order, at completion); a larger one is written
    in place through its mapping (one byte per item).

    Args:
        dataset: a map-style dataset (``__len__`` and ``__getitem__``; ``__getitems__`` is
            used when it has one) whose items are deterministic; ``len`` >= 1.
        path: the cache file; its directory must exist.  Replaced when stale (a file found
            when the build started); one path per dataset (see Raises).
        transform: ``transform(item) -> item`` applied after the cache, on every item of
            every epoch (random augmentation), or None.
        fingerprint: None (default): the key is computed from the dataset (its class, code,
            attributes, transforms and length; see ``dataloader._ndf.fingerprint`` for what
            it cannot see).  A string: that string is the key (change it to rebuild).
        x_dtype, y_dtype: the dtypes x and y are stored (and read back) as (one of the
            ``.ndf`` dtypes); None (default): the first item's own.
        access: how the complete file is read: "auto", "mmap" or "pread" (see
            ``dataloader.ndf``).

    Attributes:
        dataset, path, transform, key (``"<hex fingerprint>:<x_dtype>:<y_dtype>"``, or
        ``"user:<fingerprint>:<x_dtype>:<y_dtype>"`` for a key of yours: a change of
        ``x_dtype`` / ``y_dtype`` rebuilds the file either way),
        stale_reason (why ``path`` was not used at construction: ``"no file"``, ``"another
        fingerprint"``, ...; None when it was).

    Thread-safety: every method may be called from many worker threads at once.

    Raises:
        TypeError: ``dataset`` is not map-style, ``transform`` is not callable,
            ``fingerprint`` is not a str; on use (the first item computed), a bad
            ``x_dtype`` / ``y_dtype``, and an item of another form (named by its index).
        ValueError: an empty dataset, a bad ``access``; on use, an item whose shape differs
            from the first item's (its index and both shapes named).
        FileNotFoundError: ``path``'s directory does not exist.
        OSError: on use, the temporary file cannot be created or allocated whole (e.g. a
            full disk: ``posix_fallocate``).
        FileExistsError: on use (the item that completes the cache), another dataset's
            cache (another key) was completed at ``path`` while this one was being built:
            this one is not kept, ``path`` is left as it is (``_ndf/cache_path``).
        IsADirectoryError: ``path`` is a directory.
    """

    accepts_index_arrays = True

    def __init__(self, dataset: Any, path: str | os.PathLike[str], *,
                 transform: Callable[[Any], Any] | None = None, fingerprint: str | None = None,
                 x_dtype: Any = None, y_dtype: Any = None, access: str = "auto") -> None:
        _check_arguments(dataset, transform, fingerprint, access)
        source = dataset_fingerprint(dataset) if fingerprint is None else f"user:{fingerprint}"
        key = f"{source}:{x_dtype!s}:{y_dtype!s}"  # a dtype change rebuilds, whoever keys the data
        self._setup(dataset, path, transform, key, (x_dtype, y_dtype), access)

    def _setup(self, dataset: Any, path: str | os.PathLike[str], transform: Callable[[Any], Any] | None,
               key: str, dtypes: tuple[Any, Any], access: str) -> None:
        self.dataset, self.transform, self.access, self.key = dataset, transform, access, key
        self.path = os.fspath(path)
        self._n = len(dataset)
        if self._n < 1:
            raise ValueError(f"CachedDataset: the dataset {type(dataset).__name__} has no item (len 0)")
        folder = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"CachedDataset: the directory of {self.path!r} does not exist")
        if os.path.isdir(self.path):  # else found only at the rename, after a whole epoch
            raise IsADirectoryError(f"CachedDataset: path {self.path!r} is a directory; give the cache file's name "
                                    f"(e.g. {os.path.join(self.path, 'cache.ndf')!r})")
        self._dtypes = dtypes
        self._lock = threading.Lock()
        self._slots: RowSlots | None = None
        self._schema: ItemSchema | None = None
        self._reader: NdfDataset | None = None
        self._direct = False  # the complete file's items are its NdfDataset's (see _open)
        self.stale_reason: str | None = self._open()

    @property
    def complete(self) -> bool:
        """True once the cache file is complete (items are read from it)."""
        return self._reader is not None

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int) -> Any:
        i = operator.index(index)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"index {index} is out of range for {self._n} items")
        reader = self._reader
        if reader is not None:
            x, y = reader.file.read_row(i)
            xs, ys = self._ready().from_rows(x[None], y[None])
            item = self._ready().batch(xs, ys)[0]
        else:
            item = self._build(np.array([i], dtype=np.int64), [self.dataset[i]])[0]
        return item if self.transform is None else self.transform(item)

    def __getitems__(self, indices: Any) -> Any:
        """The items of ``indices`` (a sequence of ints or a 1-D int64 array): a
        ``BatchedItems`` of (X, Y) for ``(x, y)`` items, else a list; a list of transformed
        items with a ``transform``.  From the complete file: one native gather."""
        reader = self._reader
        if reader is not None and self.transform is None:  # the epochs after the first: lean
            try:
                if self._direct:  # NdfDataset's items are these: its very batch
                    return reader.__getitems__(indices)
                x, y = reader.file.read_rows(indices)
            except IndexError:
                x, y = reader.file.read_rows(_checked(as_index_array(indices), self._n))
            schema = self._ready()
            return schema.batch(*schema.from_rows(x, y))
        idx = as_index_array(indices)
        if reader is not None:
            try:
                x, y = reader.file.read_rows(idx)  # checks the indices (IndexError: nothing read)
            except IndexError:
                idx = _checked(idx, self._n)  # negative indices count from the end
                x, y = reader.file.read_rows(idx)
            items = self._ready().batch(*self._ready().from_rows(x, y))
        else:
            idx = _checked(idx, self._n)
            items = self._build(idx, self._fetch(idx))
        return items if self.transform is None else self._transform_all(idx, items)

    def __batch_rows__(self) -> BatchRows | None:
        """The complete file's rows for the loader's native batches: items ``(x, y)`` with a
        1-D x and no ``transform``; None otherwise (and while the cache is incomplete)."""
        reader = self._reader
        schema = self._schema
        if reader is None or schema is None or self.transform is not None or type(self) is not CachedDataset:
            return None
        if not schema.pair or len(schema.x_shape) != 1:
            return None
        rows = reader.__batch_rows__()
        return None if rows is None else BatchRows(rows.source, schema.y_shape)

    def fill(self) -> None:
        """Compute and write every row still missing (in index order, on this thread), so
        the cache is complete when it returns.  Nothing to do on a complete cache."""
        for start in range(0, self._n, 256):
            if self._reader is not None:
                return
            idx = np.arange(start, min(start + 256, self._n), dtype=np.int64)
            slots = self._slots
            if slots is not None:
                idx = slots.missing(idx)
            if idx.size:
                self._build(idx, self._fetch(idx))

    def close(self) -> None:
        """Close the cache file (a complete one) or give up the rows written (an incomplete one:
        its temporary file is removed, ``path`` untouched).  Using the dataset afterwards
        starts over (it reopens ``path``)."""
        with self._lock:
            slots, reader = self._slots, self._reader
            self._slots = self._reader = self._schema = None
        if slots is not None:
            slots.abort()
        if reader is not None:
            reader.close()
        self._open()

    def __getstate__(self) -> dict[str, Any]:
        """A copy or pickle is made anew from the same arguments and key (it reads ``path``
        if complete, else builds its own)."""
        return {"dataset": self.dataset, "path": self.path, "transform": self.transform,
                "key": self.key, "dtypes": self._dtypes, "access": self.access}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["dataset"], state["path"], state["transform"], state["key"], state["dtypes"],
                    state["access"])

    def __repr__(self) -> str:
        state = "complete" if self._reader is not None else "building"
        return f"CachedDataset({type(self.dataset).__name__}, {self.path!r}, {self._n} items, {state})"

    def _open(self) -> str | None:
        """Use ``path`` if it is this dataset's complete cache; else say why not."""
        try:
            file = NdfFile(self.path, access=self.access)
        except FileNotFoundError:
            return "no file"
        except (OSError, ValueError) as exc:
            return f"not a complete .ndf file ({exc})"
        record = file.metadata.get(CACHE_KEY)
        reason = _record_mismatch(record, self.key, self._n, file.n)
        schema = None if reason else ItemSchema.from_record(record, file.x_dtype, file.y_dtype, file.d, file.l)
        if schema is None:
            file.close()
            return reason or "a record that does not fit the file"
        # Items (x 1-D, y () or (l,)) are NdfDataset's own: its __getitems__ serves them as is.
        direct = schema.pair and len(schema.x_shape) == 1 and schema.y_shape in ((), (file.l,))
        with self._lock:
            self._direct = direct
            self._schema, self._slots = schema, None
            self._reader = NdfDataset(file, scalar_labels=direct and schema.y_shape == ())
        return None

    def _ready(self) -> ItemSchema:
        schema = self._schema
        assert schema is not None  # set before _reader
        return schema

    def _fetch(self, idx: np.ndarray) -> list[Any]:
        """The dataset's items of ``idx`` (its ``__getitems__`` when it has one)."""
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is None:
            return [self.dataset[i] for i in idx.tolist()]
        batch = getitems(idx if getattr(self.dataset, "accepts_index_arrays", False) else idx.tolist())
        return list(batch)

    def _build(self, idx: np.ndarray, items: list[Any]) -> Any:
        """``items`` (of ``idx``) converted to the cache's form; their missing rows written."""
        schema = self._schema or self._first(items[0], int(idx[0]))
        x, y = schema.columns(items, idx)
        slots = self._slots
        if slots is not None and self._write(slots, idx, schema.rows(x, y)):
            reason = self._open()  # this write completed the file
            if reason is not None:  # ``path`` replaced since the rename by a writer with no guard
                with self._lock:  # (``_ndf/cache_path``): build anew rather than never again
                    if self._slots is slots:
                        self._slots = self._schema = None
                self.stale_reason = reason
        return schema.batch(x, y)

    def _write(self, slots: RowSlots, idx: np.ndarray, rows: np.ndarray) -> bool:
        """``slots.write``; a finish that failed (``slots`` closed, its rows gone: the
        directory removed, the disk full at the rename) is forgotten, so the next batch
        starts a new file rather than every later epoch computing items it never keeps."""
        try:
            return slots.write(idx, rows)
        except OSError:
            if slots.closed:
                with self._lock:
                    if self._slots is slots:
                        self._slots = self._schema = None
            raise

    def _first(self, item: Any, index: int) -> ItemSchema:
        """Set the schema from the first item and start the file (once, under the lock)."""
        schema = ItemSchema.of_first(item, index, *self._dtypes)
        with self._lock:
            if self._schema is not None:
                return self._schema
            record = {"format": CACHE_FORMAT, "key": self.key, **schema.record()}
            layout = Layout(2, self._n, schema.d, schema.l, schema.x_dtype, schema.y_dtype,
                            extra={CACHE_KEY: record})
            self._slots = RowSlots(self.path, layout, PathGuard(self.path, self.key, self._n))
            self._schema = schema
        return schema

    def _transform_all(self, idx: np.ndarray, items: Any) -> list[Any]:
        """``transform`` of each item, with ``item_rng()`` seeded by the item's index."""
        out = []
        transform = self.transform
        assert transform is not None
        for i, item in zip(idx.tolist(), items):
            saved = swap_index(i)
            try:
                out.append(transform(item))
            finally:
                swap_index(saved)
        return out


def _check_arguments(dataset: Any, transform: Any, fingerprint: Any, access: str) -> None:
    if isinstance(dataset, IterableDataset) or not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
        raise TypeError(f"CachedDataset needs a map-style dataset (__len__ and __getitem__), got "
                        f"{type(dataset).__name__}")
    if transform is not None and not callable(transform):
        raise TypeError(f"transform must be callable or None, got {type(transform).__name__}")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise TypeError(f"fingerprint must be a str or None, got {type(fingerprint).__name__}")
    if access not in ACCESS_MODES:
        raise ValueError(f"{access=} must be one of {ACCESS_MODES}")


def _record_mismatch(record: Any, key: str, n: int, file_n: int) -> str | None:
    """Why a file's cache record is not this dataset's cache, or None when it is."""
    if not isinstance(record, dict):
        return "not a CachedDataset file"
    if record.get("format") != CACHE_FORMAT:
        return f"cache format {record.get('format')!r}, not {CACHE_FORMAT}"
    if record.get("key") != key:
        return "another fingerprint"
    if file_n != n:
        return f"{file_n} rows for {n} items"
    return None


def _checked(idx: np.ndarray, n: int) -> np.ndarray:
    """``idx`` with negative indices counted from the end; IndexError for one out of range."""
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        if idx.min() < 0:
            idx = np.where(idx < 0, idx + n, idx)
        bad = idx[(idx < 0) | (idx >= n)]
        if bad.size:
            raise IndexError(f"index {int(bad[0])} is out of range for {n} items")
    return idx
