"""``TorchEpoch``: an epoch of ``dataloader.torch.DataLoader`` with workers, which holds torch's
worker-info bridge (``dataloader.torch._worker_info``) until it ends, closes or is collected."""

from __future__ import annotations

import weakref
from typing import Any, NoReturn

from dataloader.torch import _worker_info

__all__ = ["TorchEpoch"]


class TorchEpoch:
    """One epoch of ours with the worker-info bridge held until it closes (or is collected).

    Args:
        inner: the engine's epoch iterator (``engine_epoch``), whose attributes it shows.

    Thread-safety: as the engine's epoch (one consumer); ``close`` from any thread.
    """

    __slots__ = ("engine_epoch", "_release", "__weakref__")

    def __init__(self, inner: Any) -> None:
        self.engine_epoch = inner
        self._release = weakref.finalize(self, _worker_info.release)

    def __iter__(self) -> TorchEpoch:
        return self

    def __next__(self) -> Any:
        try:
            return next(self.engine_epoch)
        except StopIteration:
            self._release()
            raise
        except BaseException:
            self.release_if_closed()  # e.g. a failed start: the epoch is over
            raise

    def release_if_closed(self) -> None:
        """Let go of the bridge if the engine's epoch is closed (ended or failed)."""
        if self.engine_epoch.closed:
            self._release()

    def __len__(self) -> int:
        return len(self.engine_epoch)

    def __copy__(self) -> NoReturn:
        raise TypeError("a DataLoader epoch iterator cannot be copied; start another with iter(loader)")

    def close(self, timeout_s: float | None = None) -> None:
        """The epoch's ``close(timeout_s)`` (``dataloader._engine.iterator.EpochIterator.close``),
        then the worker-info bridge is let go."""
        self.engine_epoch.close(timeout_s)
        self._release()

    def __enter__(self) -> TorchEpoch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine_epoch, name)
