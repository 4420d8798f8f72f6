"""Exception types the loader raises itself."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = [
    "INTERRUPTS", "ItemCancelledError", "LoaderTimeoutError", "reported_length", "timeout_error", "warn_past_length",
]


INTERRUPTS = (KeyboardInterrupt, SystemExit, GeneratorExit)
"""Exceptions that are never a batch's own error, wherever they are raised (the sampler,
``__getitem__``, a transform, ``collate_fn``, a worker, a wait): ``next()`` raises them without
counting the batch as yielded and the epoch ends, so ``DataLoader.state_dict()`` taken after
one resumes at that batch (``dataloader._engine.resume``)."""


class LoaderTimeoutError(TimeoutError, RuntimeError):
    """A batch took longer than the loader's ``timeout`` seconds.

    It is a ``TimeoutError`` and also a ``RuntimeError``, which is what
    ``torch.utils.data.DataLoader`` raises on a timeout, so ``except`` clauses
    written for either keep working.  The iterator stays usable: the next
    ``next()`` waits for the same batch again.
    """


class ItemCancelledError(RuntimeError):
    """An ``AsyncDataset`` item's coroutine ended cancelled although the loader did not cancel it.

    ``asyncio.CancelledError`` is not an error the loader can pass on as it is: it is a
    ``BaseException`` that asyncio code treats as "this task was cancelled", and the loader
    cancels an epoch's coroutines itself when the epoch ends.  So a coroutine that ends
    cancelled by anything else (it awaited a shared request that another task cancelled, or
    cancelled itself) fails its batch with this error, as any exception of its item does: the
    first error by position, raised by ``next()`` for that batch, and the epoch goes on.

    Attributes:
        index: the item's index; for an ``async def __getitems__`` the list of the batch's
            indices (its one coroutine fetches them all).

    The ``asyncio.CancelledError`` is its ``__cause__``.  It is a ``RuntimeError``, so
    ``except Exception`` catches it (a ``CancelledError`` it would not).
    """

    def __init__(self, message: str, index: Any) -> None:
        super().__init__(message)
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.args[0], self.index)


def timeout_error(timeout_s: float, detail: str) -> LoaderTimeoutError:
    """The error for a batch not ready within ``timeout_s`` seconds.

    The message leads with PyTorch's wording (``DataLoader timed out after N
    seconds``) so code and people matching torch's message keep working, then
    says which batch (``detail``, e.g. ``"batch 3 was not ready"``) and the
    option that set the limit.
    """
    seconds = f"{timeout_s:g}"  # torch prints the user's number: timeout=1 -> "1 seconds"
    return LoaderTimeoutError(
        f"DataLoader timed out after {seconds} seconds: {detail} (timeout={seconds} s)"
    )


def reported_length(dataset: Any) -> int | None:
    """``len(dataset)``, or None when it has no length (then nothing is checked)."""
    try:
        return len(dataset)
    except TypeError:
        return None


def warn_past_length(dataset: Any, length: int | None, yielded: int, num_workers: int) -> None:
    """PyTorch's ``UserWarning`` when an epoch over an ``IterableDataset`` yields more
    batches than ``len(dataset)`` (``length``) said it has items.

    PyTorch's rule compares batches yielded with the dataset's length (items), so
    a sharded dataset whose workers each cut a short last batch does not warn.
    Call it with the count of batches yielded so far; it warns when the count first
    passes ``length`` (once per epoch; never when ``length`` is None).
    """
    if length is None or yielded != length + 1:
        return
    msg = (
        f"Length of IterableDataset {dataset} was reported to be {length} (len(dataset)), "
        f"but {yielded} batches have been fetched. "
    )
    if num_workers > 0:
        msg += (
            "With worker threads, this could be caused by not sharding the IterableDataset "
            "with get_worker_info() in each worker (each worker iterates the whole dataset)."
        )
    warnings.warn(msg, UserWarning, stacklevel=3)
