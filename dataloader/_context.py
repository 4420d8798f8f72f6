"""Per-thread context: which worker a thread is, and which item it is processing.

``get_worker_info()`` follows PyTorch: inside a worker thread it describes the
worker; on any other thread it returns ``None``.  ``item_rng()`` gives the
random generator of the item being processed, derived from (loader seed, epoch,
item index) so that random augmentation does not depend on which thread ran an
item, nor on ``num_workers`` or ``item_concurrency``.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

__all__ = ["WorkerInfo", "current_item_index", "epoch_seed", "get_worker_info", "item_rng"]


class _Local(threading.local):
    """This thread's loader context.  The class attributes are the defaults every thread
    starts with, so a read never misses (``getattr`` with a default raises and catches an
    ``AttributeError`` inside on a thread that never set the field)."""

    worker: WorkerInfo | None = None
    epoch_key: tuple[int, int] | None = None
    index: Any = None


_local = _Local()


class WorkerInfo:
    """What a worker thread knows about itself (PyTorch's ``WorkerInfo``).

    Attributes:
        id: the worker's number, ``0 <= id < num_workers``.
        num_workers: the loader's ``num_workers``.
        seed: this worker's seed for this epoch: the epoch's base seed plus ``id``
            (as in PyTorch); a non-negative int below ``2**63``.
        dataset: the dataset the loader reads (shared by every worker thread, not a
            copy: mutating it is visible to all workers).

    Read-only, as in PyTorch.  Thread-safety: immutable, so safe to share.

    Raises:
        RuntimeError: on assigning or deleting an attribute ("Cannot assign
            attributes to WorkerInfo objects", PyTorch's type and message).
    """

    __slots__ = ("id", "num_workers", "seed", "dataset")
    id: int
    num_workers: int
    seed: int
    dataset: Any

    def __init__(self, id: int, num_workers: int, seed: int, dataset: Any) -> None:  # noqa: A002
        for name, value in (("id", id), ("num_workers", num_workers), ("seed", seed), ("dataset", dataset)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __delattr__(self, name: str) -> None:
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WorkerInfo) or type(other) is not type(self):
            return NotImplemented
        return (self.id, self.num_workers, self.seed, self.dataset) == (
            other.id, other.num_workers, other.seed, other.dataset
        )

    def __hash__(self) -> int:
        return hash((self.id, self.num_workers, self.seed))

    def __repr__(self) -> str:
        return (
            f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
            f"dataset={self.dataset!r})"
        )


def get_worker_info() -> WorkerInfo | None:
    """Return the calling worker thread's ``WorkerInfo``, or ``None`` outside workers.

    Thread-safety: each thread sees its own value.
    """
    return _local.worker


def current_item_index() -> int | None:
    """The dataset index of the item the loader is processing on this thread, or None.

    Set by the loader around ``__getitem__`` and ``transform`` calls (not around a
    batched ``__getitems__``), so error messages can name the failing item.
    """
    return _local.index


def epoch_seed(base_seed: int, epoch: int) -> int:
    """The seed of one epoch: a pure function of ``(base_seed, epoch)``, in ``[0, 2**63)``."""
    state = np.random.SeedSequence([base_seed, epoch]).generate_state(1, np.uint64)
    return int(state[0]) >> 1


def item_rng(index: int | None = None) -> np.random.Generator:
    """A NumPy random generator for one item, seeded from (loader seed, epoch, index).

    Inside a loader (on a worker thread, a lane, or the consumer thread with
    ``num_workers=0``) the loader's base seed and the current epoch are used, so
    an item's random draws are the same whatever thread processes it and however
    many workers there are.  Use it in ``__getitem__`` or a ``transform`` instead
    of a global RNG.

    Args:
        index: the dataset index of the item.  ``None`` means the item the loader
            is processing on this thread right now.  Outside a loader an explicit
            index uses base seed 0 and epoch 0.

    Returns:
        A fresh ``numpy.random.Generator`` (PCG64); creating one costs a few µs.

    Raises:
        RuntimeError: ``index`` is None outside a loader's item processing.
        TypeError: ``index`` is not an int.
    """
    epoch_key = _local.epoch_key
    if index is None:
        index = _local.index
        if index is None or epoch_key is None:
            raise RuntimeError(
                "item_rng() without an index only works while a DataLoader processes an item; "
                "pass the item's index explicitly"
            )
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
        raise TypeError(f"index must be an int, got {type(index).__name__}")
    base_seed, epoch = epoch_key if epoch_key is not None else (0, 0)
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([base_seed, epoch, int(index)])))


# -- the package's own setters ---------------------------------------------------
#
# Internal to the dataloader package (not in ``__all__``, not part of the public API): the
# engine installs and clears a thread's context with these.  Each acts on the calling
# thread only, so none needs a lock.


def thread_state() -> _Local:
    """The calling thread's context record (fields ``worker``, ``epoch_key``, ``index``),
    for a loop that sets ``index`` once per item: one thread-local lookup for a whole batch
    instead of a call per item.  Read and write it only on the calling thread."""
    return _local


def set_worker(info: WorkerInfo | None) -> None:
    """Make ``info`` what ``get_worker_info()`` returns on this thread (None: not a worker)."""
    _local.worker = info


def set_epoch_key(key: tuple[int, int] | None) -> None:
    """Set this thread's ``(base_seed, epoch)`` for ``item_rng()`` (None: outside an epoch)."""
    _local.epoch_key = key


def set_index(index: int | None) -> None:
    """Set the dataset index of the item this thread processes (None: no item)."""
    _local.index = index


def swap_index(index: int | None) -> int | None:
    """Set this thread's current item index; return the previous one (to restore it)."""
    previous = _local.index
    _local.index = index
    return previous


def snapshot() -> tuple[WorkerInfo | None, tuple[int, int] | None]:
    """This thread's ``(worker, epoch_key)``, for ``restore()`` on this or another thread
    (an item lane runs its batch's items with the context of the thread that builds it)."""
    return _local.worker, _local.epoch_key


def restore(saved: tuple[WorkerInfo | None, tuple[int, int] | None]) -> None:
    """Install a ``snapshot()`` on this thread, with no current item index."""
    _local.worker, _local.epoch_key = saved
    _local.index = None
