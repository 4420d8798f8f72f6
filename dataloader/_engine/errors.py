"""Exception types the loader raises itself."""

from __future__ import annotations

__all__ = ["LoaderTimeoutError"]


class LoaderTimeoutError(TimeoutError, RuntimeError):
    """A batch took longer than the loader's ``timeout`` seconds.

    It is a ``TimeoutError`` and also a ``RuntimeError``, which is what
    ``torch.utils.data.DataLoader`` raises on a timeout, so ``except`` clauses
    written for either keep working.  The iterator stays usable: the next
    ``next()`` waits for the same batch again.
    """
