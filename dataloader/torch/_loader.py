"""``dataloader.torch.DataLoader``: our engine with torch's argument list and torch batches."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from dataloader.loader import DataLoader as _NumpyLoader
from dataloader.torch import _worker_info
from dataloader.torch._threads import limit_this_thread
from dataloader.torch._pin import PinnedCollate, pinning_available
from dataloader.torch.collate import default_collate, default_convert

__all__ = ["DataLoader"]


class DataLoader(_NumpyLoader):
    """``torch.utils.data.DataLoader``'s signature on our thread engine; batches are tensors.

    The one-line swap: ``from dataloader.torch import DataLoader``.  Arguments mean what they
    mean in torch and in :class:`dataloader.DataLoader` (which documents the keyword-only
    extras ``prefetch_depth``, ``item_concurrency``, ``transform`` and ``seed``).  Differences:

    * ``collate_fn=None`` uses :func:`dataloader.torch.default_collate` (torch's rules, torch
      tensors) or, with ``batch_size=None``, torch's ``default_convert``.
    * ``generator`` may be a ``torch.Generator`` (the base seed is drawn from it once, at
      construction) or a ``numpy.random.Generator``.
    * ``pin_memory=True`` pins each batch on its worker when CUDA is available, else it is a
      no-op; ``pin_memory_device`` is accepted (torch's deprecated argument).
    * ``multiprocessing_context`` is accepted and ignored (workers are threads); like torch,
      it needs ``num_workers > 0``.
    * While an epoch with ``num_workers > 0`` is open, ``torch.utils.data.get_worker_info()``
      answers inside our worker threads (see ``dataloader.torch._worker_info`` for exactly
      what is replaced in torch's modules, and when it is restored).
    * Each worker thread gets one intra-op thread before ``worker_init_fn``, as torch's
      worker processes do (that thread's OpenMP count only: torch's process-wide default, the
      main thread's pool and later threads' are unchanged).
    * Workers are threads: they share torch's one global RNG; ``torch.initial_seed()`` is
      the process's.  Seed per-worker generators from
      ``get_worker_info().seed`` or use ``dataloader.item_rng()``.

    Thread-safety: as :class:`dataloader.DataLoader`.

    Raises:
        ValueError, TypeError: invalid arguments (torch's messages where torch has one).
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Iterable[Any] | None = None,
        batch_sampler: Iterable[Any] | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[Any], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: Any = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
        **extras: Any,
    ) -> None:
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError(
                "multiprocessing_context can only be used with multi-process loading "
                f"(num_workers > 0), but got num_workers={num_workers}"
            )
        if collate_fn is None:
            auto_collation = batch_sampler is not None or batch_size is not None
            collate_fn = default_collate if auto_collation else default_convert
        self.pin_memory_device = pin_memory_device
        self.multiprocessing_context = multiprocessing_context
        self._epochs: weakref.WeakSet[_TorchEpoch] = weakref.WeakSet()  # open epochs with workers
        self._epochs_lock = threading.Lock()
        if pin_memory and pinning_available():
            collate_fn = PinnedCollate(collate_fn, pin_memory_device)
        worker_init_fn = _TorchWorkerInit(worker_init_fn)
        super().__init__(
            dataset, batch_size, bool(shuffle), sampler, batch_sampler, num_workers, collate_fn,
            bool(pin_memory), drop_last, timeout, worker_init_fn, generator,
            prefetch_factor=prefetch_factor, persistent_workers=persistent_workers,
            in_order=in_order, **extras,
        )

    def __iter__(self) -> Any:
        """Start an epoch; with workers, ``torch.utils.data.get_worker_info()`` answers in them.

        The bridge is held until the epoch ends, is closed (also by ``close()`` or a new
        epoch closing it), or is garbage-collected.
        """
        if self.num_workers == 0:
            return super().__iter__()
        for old in self._open_epochs():
            old._release_if_closed()
        _worker_info.acquire()
        try:
            inner = super().__iter__()
        except BaseException:
            _worker_info.release()
            raise
        epoch = _TorchEpoch(inner)
        with self._epochs_lock:
            self._epochs.add(epoch)
        return epoch

    def _open_epochs(self) -> list[_TorchEpoch]:
        with self._epochs_lock:  # close() may run on another thread
            return list(self._epochs)

    def close(self) -> None:
        """As :meth:`dataloader.DataLoader.close`; also lets go of torch's worker-info bridge."""
        super().close()
        for epoch in self._open_epochs():
            epoch.close()


class _TorchWorkerInit:
    """Each worker thread first sets one intra-op thread for itself, as torch's workers do.

    Only the worker thread's own OpenMP count is set (``dataloader.torch._threads``):
    ``torch.set_num_threads(1)`` would also change torch's process-wide default, which the main
    thread (before its first torch op) and every later thread pick up.  Measured: 2 worker
    threads running torch ops were 1.5-1.8x faster than with the default pool
    (benchmarks/torch_intraop_threads.py).  The user's ``worker_init_fn`` runs after it and may
    set another size.
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[int], None] | None) -> None:
        if fn is not None and not callable(fn):
            raise TypeError(f"worker_init_fn must be callable or None, got {type(fn).__name__}")
        self.fn = fn

    @property
    def per_thread_only(self) -> bool:
        """True without a user function: only the worker thread's own set-up, which batches
        built on the consumer thread need not run (``num_workers="auto"`` may build inline)."""
        return self.fn is None

    def __call__(self, worker_id: int) -> None:
        limit_this_thread(1)
        if self.fn is not None:
            self.fn(worker_id)


class _TorchEpoch:
    """One epoch of ours with the worker-info bridge held until it closes (or is collected)."""

    __slots__ = ("_inner", "_release", "__weakref__")

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._release = weakref.finalize(self, _worker_info.release)

    def __iter__(self) -> _TorchEpoch:
        return self

    def __next__(self) -> Any:
        try:
            return next(self._inner)
        except StopIteration:
            self._release()
            raise
        except BaseException:
            self._release_if_closed()  # e.g. a failed start: the epoch is over
            raise

    def _release_if_closed(self) -> None:
        if getattr(self._inner, "_closed", False):
            self._release()

    def __len__(self) -> int:
        return len(self._inner)

    def close(self) -> None:
        self._inner.close()
        self._release()

    def __enter__(self) -> _TorchEpoch:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
