"""``ImageBatch``: a batch of images in one buffer, shared without copies.

Lifetime of a pooled buffer
---------------------------
An ``ImageBatch`` owns a ``_Buffer`` (the holder) and is the only object that
refers to it.  NumPy arrays made from the batch's ``__array_interface__`` have
the batch as their ``base``, views of those arrays keep that array alive, and
``__dlpack__`` exports such an array, so DLPack consumers (``torch.from_dlpack``,
``np.from_dlpack``) keep the batch alive too.  The holder is therefore freed only
once the batch and every view of it are gone, and only then does its finalizer
give the memory back to its ``BufferPool`` for a later batch.  No code path hands
out the pooled array itself, so a batch that is still referenced is never
overwritten.

On free-threaded CPython an object dropped by another thread than the one that
created it is freed later, by its creator, the next time that thread runs Python
code (biased reference counting).  A batch collated on a worker thread and
dropped by the consumer therefore returns its buffer when that worker next runs,
not at once; the pool allocates in the meantime.

The pool never makes anyone wait for a buffer: ``take`` allocates a new one when
none is free, so holding many batches costs memory, never a deadlock.  It keeps
at most ``capacity`` idle buffers.  Its lock is held only around list operations
and is re-entrant, because a finalizer can run on a thread that already holds it
(the garbage collector may run between any two bytecodes).  The finalizer skips
the pool during interpreter shutdown and waits at most ``BUFFER_RETURN_TIMEOUT_S``
for the lock (a daemon thread frozen at shutdown may hold it); in both cases the
buffer is simply freed.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

from dataloader._constants import BUFFER_RETURN_TIMEOUT_S

__all__ = ["ImageBatch"]

#: DLPack device type of CPU memory (``kDLCPU``).
_DL_CPU = 1


class BufferPool:
    """Thread-safe pool of up to ``capacity`` idle byte buffers (1-D ``uint8`` arrays)."""

    __slots__ = ("capacity", "allocations", "_free", "_lock")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        #: number of buffers allocated because none was free (for sizing and tests)
        self.allocations = 0
        self._free: list[np.ndarray] = []
        self._lock = threading.RLock()

    def take(self, nbytes: int) -> _Buffer:
        """Return a holder of at least ``nbytes`` bytes; never waits for a buffer."""
        array = None
        with self._lock:
            best = -1
            for i, candidate in enumerate(self._free):
                if candidate.nbytes >= nbytes and (
                    best < 0 or candidate.nbytes < self._free[best].nbytes
                ):
                    best = i
            if best >= 0:
                array = self._free.pop(best)
            self.allocations += array is None
        if array is None:
            array = np.empty(max(nbytes, 1), dtype=np.uint8)
        return _Buffer(array, self)

    def give_back(self, array: np.ndarray) -> None:
        """Keep ``array`` for reuse, or let it be freed when the pool is full."""
        if not self._lock.acquire(timeout=BUFFER_RETURN_TIMEOUT_S):
            return
        try:
            if len(self._free) < self.capacity:
                self._free.append(array)
            elif self._free:
                smallest = min(range(len(self._free)), key=lambda i: self._free[i].nbytes)
                if self._free[smallest].nbytes < array.nbytes:
                    self._free[smallest] = array
        finally:
            self._lock.release()

    def idle(self) -> int:
        """Number of buffers waiting in the pool."""
        with self._lock:
            return len(self._free)


class _Buffer:
    """Holds one buffer; gives it back to its pool when garbage-collected."""

    __slots__ = ("array", "address", "_pool")

    def __init__(self, array: np.ndarray, pool: BufferPool | None) -> None:
        self.array = array
        self.address: int = array.__array_interface__["data"][0]
        self._pool = pool

    def __reduce__(self) -> tuple[Any, ...]:
        # ``address`` is only valid for this holder's own array: a copy (deepcopy,
        # pickle) gets a private copy of the pixels, belongs to no pool and
        # recomputes its address.  (Without this, a deep copy kept the original's
        # address and read freed memory once the original was gone.)
        return (_Buffer, (self.array.copy(), None))

    def __del__(self, _finalizing: Any = sys.is_finalizing) -> None:
        pool = self._pool
        if pool is not None and not _finalizing():
            pool.give_back(self.array)


def fresh_buffer(nbytes: int) -> _Buffer:
    """A holder of a new buffer that belongs to no pool."""
    return _Buffer(np.empty(max(nbytes, 1), dtype=np.uint8), None)


class ImageBatch:
    """A batch of images in one C-contiguous, writable buffer.

    ``np.asarray(batch)`` is a view (no copy) whose ``base`` is the batch;
    ``np.from_dlpack(batch)`` and ``torch.from_dlpack(batch)`` share the memory
    too.  With ``ImageCollator(reuse_buffers=n)`` the buffer goes back to the
    collator's pool only when the batch and every view of it are gone.

    Attributes:
        shape: ``(B, C, H, W)`` (layout ``"NCHW"``) or ``(B, H, W, C)`` (``"NHWC"``).
        dtype: ``uint8`` or ``float32``.
        labels: ``int64`` array of shape ``(B,)`` when the items were
            ``(image, label)`` pairs, else ``None``.  ``ImageCollator`` returns
            such a batch as ``(images, labels)`` with this same array second.

    Thread-safety: the batch is immutable; its pixels are as thread-safe as any
    NumPy array's (concurrent writers need their own locking).
    """

    __slots__ = ("_buffer", "shape", "dtype", "labels", "__weakref__")

    def __init__(
        self,
        buffer: _Buffer,
        shape: tuple[int, ...],
        dtype: np.dtype,
        labels: np.ndarray | None = None,
    ) -> None:
        self._buffer = buffer
        self.shape = shape
        self.dtype = dtype
        self.labels = labels

    @property
    def __array_interface__(self) -> dict[str, Any]:
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self._buffer.address, False),
            "strides": None,
        }

    def numpy(self) -> np.ndarray:
        """Return ``np.asarray(self)``: a writable view that keeps the batch alive."""
        return np.asarray(self)

    def __dlpack__(self, **kwargs: Any) -> Any:
        """Export the pixels via DLPack (delegates to the NumPy view)."""
        return np.asarray(self).__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DL_CPU, 0)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        labels = "" if self.labels is None else ", labels"
        return f"ImageBatch(shape={self.shape}, dtype={self.dtype}{labels})"
