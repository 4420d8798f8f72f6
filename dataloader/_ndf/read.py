"""Reading `.ndf` files: ``NdfFile`` / ``open_ndf`` (native gather) and ``NdfDataset``.

Public through :mod:`dataloader.ndf`; its docstring describes the access paths.
"""

from __future__ import annotations

import errno
import operator
import os
import stat
import sys
from typing import Any

import numpy as np

from dataloader._datasets.base import Dataset
from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.rows import BatchRows
from dataloader._indices import as_index_array
from dataloader._native._gather import ADVICE, Reader
from dataloader._ndf.format import MMAP_AUTO_MAX_BYTES, read_layout

__all__ = ["ACCESS_MODES", "NdfDataset", "NdfFile", "open_ndf"]

ACCESS_MODES = ("auto", "mmap", "pread")
_BIG_ENDIAN = sys.byteorder == "big"


class NdfFile:
    """An open `.ndf` file; reads rows by index from any number of threads.

    Args:
        path: the file.
        access: "auto" (default), "mmap" or "pread"; see the module
            docstring.  "auto" maps files up to MMAP_AUTO_MAX_BYTES.
        advice: "normal" (default), "random" or "sequential": passed to
            madvise (mmap) or posix_fadvise (pread) as a read-ahead hint.
            "random" saves I/O on cold files read in shuffled order.

    Attributes:
        path (str), n (rows), d (features per row), l (labels per row),
        access ("mmap" or "pread": the path actually used),
        x_dtype, y_dtype (numpy dtypes of the features and labels, native byte
        order: float64 for a version-1 file), feature_names, label_names
        (tuples of d and l column names, or None where the file has none),
        version (1 or 2, see ``dataloader.ndf``), data_offset (byte offset of
        row 0: 28 in a version-1 file), metadata (a version-2 header's JSON
        object: the names and any other keys; ``{}`` for version 1).

    Thread-safety: every method may be called from many threads at once.
    Reads do not share a file position; ``close()`` while other threads
    read is safe (the descriptor is released when the last read in flight
    ends) and reads that start afterwards raise ValueError.  The file is
    also closed when the last reference is dropped.  Do not truncate the
    file while it is open: reads past the new end raise OSError (with
    "mmap", rows on the last page past the end read as zeros).

    Pickling, ``copy.copy`` and ``copy.deepcopy`` reopen the file by its
    absolute path with the same access and advice (a new descriptor, closed
    independently); the copy checks that n, d, l and the dtypes are unchanged.

    Raises:
        ValueError: not an .ndf file (wrong magic), a header shorter than its
            version's, d == 0, a dtype or metadata version 2 does not allow,
            sizes overflowing 63 bits or not matching the file size, not a
            regular file (FIFO, device), or a bad access/advice value.
        OSError: the file cannot be opened, read or mapped.
    """

    def __init__(self, path: str | os.PathLike[str], *, access: str = "auto",
                 advice: str = "normal") -> None:
        if access not in ACCESS_MODES:
            raise ValueError(f"{access=} must be one of {ACCESS_MODES}")
        if advice not in ADVICE:
            raise ValueError(f"{advice=} must be one of {ADVICE}")
        self.path = os.fspath(path)
        self.advice = advice
        self._abspath = os.path.abspath(self.path)  # what a pickled copy reopens
        # O_NONBLOCK: opening a FIFO must not wait for a writer.
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), self.path)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"{self.path!r} is not a regular file")
            os.set_blocking(fd, True)
            file_bytes = st.st_size
            layout = read_layout(fd, file_bytes, self.path)
        except BaseException:
            os.close(fd)
            raise
        self.n, self.d, self.l = layout.n, layout.d, layout.l
        self.x_dtype, self.y_dtype = layout.x_dtype, layout.y_dtype
        self.feature_names, self.label_names = layout.feature_names, layout.label_names
        self.version, self.data_offset = layout.version, layout.data_offset
        self.metadata = layout.metadata
        if access == "auto":
            access = "mmap" if file_bytes <= MMAP_AUTO_MAX_BYTES else "pread"
        self.access = access
        # The Reader owns fd from here on, also if it raises.
        self._reader = Reader(fd, self.path, self.n, self.d, self.l, layout.data_offset,
                              access == "mmap", ADVICE.index(advice), self.x_dtype, self.y_dtype)

    def __len__(self) -> int:
        return self.n

    @property
    def closed(self) -> bool:
        """True once close() was called."""
        return self._reader.closed

    def close(self) -> None:
        """Close the file (idempotent; safe while other threads read)."""
        self._reader.close()

    def __enter__(self) -> NdfFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read_row(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Row ``index`` as (x of shape (d,) x_dtype, y of shape (l,) y_dtype).

        Raises:
            TypeError: index not an integer.
            IndexError: index outside [0, n) (negative indices are errors).
            ValueError: the file is closed.
        """
        index = operator.index(index)
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} is out of range for {self.n} rows in {self.path!r}")
        x = np.empty(self.d, self.x_dtype)
        y = np.empty(self.l, self.y_dtype)
        self._reader.gather_one(index, x, y)
        if _BIG_ENDIAN:
            x.byteswap(inplace=True)
            y.byteswap(inplace=True)
        return x, y

    def read_rows(self, indices: Any, out_x: np.ndarray | None = None,
                  out_y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Gather rows ``indices`` into (x of shape (B, d), y of shape (B, l)).

        One native call without the GIL: a memcpy per row from the mapping
        ("mmap") or a preadv per run of consecutive indices ("pread").

        Args:
            indices: B row indices, a sequence of ints or a 1-D integer array
                (int64 is used without conversion).  Duplicates are fine.
            out_x: optional C-contiguous writeable array of shape (B, d) and
                dtype x_dtype to fill; a fresh one when None.
            out_y: likewise of shape (B, l) (B x 0 when l == 0), y_dtype.

        Returns:
            (out_x, out_y).

        Raises:
            IndexError: an index outside [0, n), named in the message;
                nothing is read then.
            TypeError: non-integer indices, or out arrays that are not
                ndarrays of x_dtype / y_dtype.
            ValueError: indices not 1-D, out arrays of the wrong shape or not
                C-contiguous/writeable, or the file is closed.
            OSError: the read failed; or ``out_x``/``out_y`` maps a file truncated
                while mapped and a row lands past its new end (EIO, naming that file).
        """
        idx = as_index_array(indices)
        count = idx.shape[0]
        if count and not self.n:  # before allocating: d may be huge when n == 0
            raise IndexError(f"index {idx[0]} is out of range for 0 rows in {self.path!r}")
        if out_x is None:
            out_x = np.empty((count, self.d), self.x_dtype)
        if out_y is None:
            out_y = np.empty((count, self.l), self.y_dtype)
        self._reader.gather(idx, out_x, out_y)  # checks out_x / out_y (_native/_out.pyx)
        if _BIG_ENDIAN:
            out_x.byteswap(inplace=True)
            out_y.byteswap(inplace=True)
        return out_x, out_y

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.access
        dtypes = "" if self.version == 1 else f", x_dtype={self.x_dtype}, y_dtype={self.y_dtype}"
        return f"NdfFile({self.path!r}, n={self.n}, d={self.d}, l={self.l}{dtypes}, {state})"

    def _shape(self) -> tuple[Any, ...]:
        """What a pickled copy checks: (n, d, l, x_dtype, y_dtype) as ints and dtype strings."""
        return (self.n, self.d, self.l, self.x_dtype.str, self.y_dtype.str)

    def _reopen_args(self) -> tuple[str, str, str, tuple[Any, ...]]:
        """What a copy needs to reopen this file (raises ValueError when it is closed)."""
        if self.closed:
            raise ValueError(f"cannot pickle or copy the closed .ndf file {self.path!r}")
        return self._abspath, self.access, self.advice, self._shape()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen_file, self._reopen_args())


def _reopen_file(path: str, access: str, advice: str, shape: tuple[Any, ...]) -> NdfFile:
    """Reopen a pickled / copied NdfFile; its (n, d, l) and dtypes must be the same.

    Raises:
        ValueError: the file now has another shape (or is no longer a valid .ndf file).
        OSError: it cannot be opened any more.
    """
    return _same_shape(NdfFile(path, access=access, advice=advice), shape)


def _same_shape(file: NdfFile, shape: tuple[Any, ...]) -> NdfFile:
    """``file`` if its ``_shape()`` is ``shape``; else close it and raise ValueError."""
    now = file._shape()
    if now[: len(shape)] != shape:
        file.close()
        names = ("n", "d", "l", "x_dtype", "y_dtype")
        has = ", ".join(f"{k}={v}" for k, v in zip(names, now))
        expected = ", ".join(f"{k}={v}" for k, v in zip(names, shape))
        raise ValueError(
            f"{file.path!r} changed since it was pickled or copied: it has {has}, "
            f"the copy expected {expected}"
        )
    return file


def open_ndf(path: str | os.PathLike[str], *, access: str = "auto",
             advice: str = "normal") -> NdfFile:
    """Open and validate an `.ndf` file; see NdfFile for arguments and errors."""
    return NdfFile(path, access=access, advice=advice)


class NdfDataset(Dataset[tuple[np.ndarray, np.ndarray]]):
    """Map-style dataset over an `.ndf` file: item i is (x row (d,), y row (l,)).

    ``__getitems__(indices)`` gathers a whole batch with one native call and
    returns ``BatchedItems((x_batch, y_batch))`` (shapes (B, d) and (B, l),
    also when l == 0), which default_collate turns into ``[x_batch, y_batch]``
    without per-row work.  ``accepts_index_arrays = True``: the loader may
    pass a 1-D int64 array instead of a list.  The arrays have the file's
    dtypes (``file.x_dtype``, ``file.y_dtype``; float64 unless the file was
    written with others).

    Args:
        path_or_file: a path (opened here and closed by close()) or an open
            NdfFile (shared, not closed by this dataset).
        access, advice: passed to open_ndf when a path is given.
        scalar_labels: the file's one label column as a scalar: item i is
            (x row (d,), y[i] a NumPy scalar) and a batch's y has shape (B,),
            what ``torch.nn.CrossEntropyLoss`` takes as class ids (write the
            file with ``y_dtype=np.int64``).  False (default): y is (l,) / (B, l).

    Thread-safety: all reads may run from many worker threads at once.

    Pickling, ``copy.copy`` and ``copy.deepcopy`` give a dataset that reopens
    the file by path (see NdfFile) and owns its copy, whichever way the
    original was made; other attributes (of a subclass) are copied as usual.

    Raises:
        ValueError: ``scalar_labels`` with l != 1 (the file is not kept open);
            pickling or copying a closed dataset; on unpickling, the file
            changed shape since.
    """

    accepts_index_arrays = True

    def __init__(self, path_or_file: str | os.PathLike[str] | NdfFile, *,
                 access: str = "auto", advice: str = "normal",
                 scalar_labels: bool = False) -> None:
        if isinstance(path_or_file, NdfFile):
            self.file = path_or_file
            self._owns_file = False
        else:
            self.file = open_ndf(path_or_file, access=access, advice=advice)
            self._owns_file = True
        self.scalar_labels = bool(scalar_labels)
        if self.scalar_labels and self.file.l != 1:
            self.close()
            raise ValueError(
                f"scalar_labels=True needs one label column; {self.file.path!r} has l={self.file.l}"
            )

    def __len__(self) -> int:
        return self.file.n

    def __getitem__(self, index: int) -> tuple[np.ndarray, Any]:
        x, y = self.file.read_row(index)
        return (x, y[0]) if self.scalar_labels else (x, y)

    def __getitems__(self, indices: Any) -> Any:
        x, y = self.file.read_rows(indices)
        return BatchedItems((x, y.reshape(-1)) if self.scalar_labels else (x, y))

    def __batch_rows__(self) -> BatchRows | None:
        """The file's ``Reader``, for the loader's native batches (``BatchRows``: y of shape
        ``(B,)`` with ``scalar_labels``, else ``(B, l)``); None for a subclass, whose items may
        differ (it opts in by defining its own ``__batch_rows__``)."""
        if type(self) is not NdfDataset:
            return None
        return BatchRows(self.file._reader, () if self.scalar_labels else (self.file.l,))

    def close(self) -> None:
        """Close the file if this dataset opened it."""
        if self._owns_file:
            self.file.close()

    def __enter__(self) -> NdfDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        labels = ", scalar_labels=True" if self.scalar_labels else ""
        return f"NdfDataset({self.file!r}{labels})"

    def __reduce__(self) -> tuple[Any, ...]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("file", "_owns_file")}
        return (_reopen_dataset, (type(self), *self.file._reopen_args()), state or None)


def _reopen_dataset(
    cls: type[NdfDataset], path: str, access: str, advice: str, shape: tuple[Any, ...]
) -> NdfDataset:
    """Rebuild a pickled / copied NdfDataset (or subclass) around a reopened file it owns."""
    dataset = cls.__new__(cls)
    NdfDataset.__init__(dataset, path, access=access, advice=advice)
    _same_shape(dataset.file, shape)
    return dataset
