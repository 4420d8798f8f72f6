"""A thread-aware ``torch.utils.data.get_worker_info``, installed while a loader of ours runs.

torch keeps one worker-info per process (``torch.utils.data._utils.worker._worker_info``, set
in each worker process).  Our workers are threads of one process, so code written for torch,
such as PyTorch's documented ``IterableDataset`` example that shards itself with
``torch.utils.data.get_worker_info()``, would see ``None`` in every worker and yield every
item once per worker.

While at least one epoch of ``dataloader.torch.DataLoader`` with ``num_workers > 0`` is open,
this module replaces the attribute ``get_worker_info`` in exactly three torch modules, the
places torch's own code and users look it up:

* ``torch.utils.data.get_worker_info`` (what user code calls; also read by torch's
  ``collate_tensor_fn``),
* ``torch.utils.data.dataloader.get_worker_info`` (an alias torch keeps there),
* ``torch.utils.data._utils.worker.get_worker_info`` (the definition).

The replacement returns the calling thread's :class:`dataloader.WorkerInfo` inside our
worker threads and otherwise calls torch's original function (so a torch DataLoader's worker
processes, and the main thread, see what they always saw).  Nothing else in torch changes:
the global ``_worker_info`` is never written.  Installation is reference-counted under a
lock: the first open epoch installs, the last one to close restores the originals (only
where the attribute is still ours, so a later patch by someone else is left alone).

Limit: code that bound the function before the first epoch started
(``from torch.utils.data import get_worker_info`` at import time) keeps torch's original,
which returns None in our threads; call it as ``torch.utils.data.get_worker_info()``, or use
``dataloader.torch.get_worker_info`` / ``dataloader.get_worker_info``.

Thread-safety: ``acquire``/``release`` may be called from any thread.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any

from dataloader import _context

__all__ = ["acquire", "get_worker_info", "installed", "release"]

_MODULES = ("torch.utils.data", "torch.utils.data.dataloader", "torch.utils.data._utils.worker")

_lock = threading.Lock()
_count = 0
_originals: dict[str, Callable[[], Any]] = {}
_torch_original: Callable[[], Any] | None = None


def get_worker_info() -> Any:
    """This thread's worker info: ours inside our worker threads, else torch's (or None).

    Returns:
        A :class:`dataloader.WorkerInfo` (``id``, ``num_workers``, ``seed``, ``dataset``) in a
        worker thread of ours; torch's ``WorkerInfo`` in a torch worker process; else None.
    """
    info = _context.get_worker_info()
    if info is not None:
        return info
    original = _torch_original
    if original is None:
        original = importlib.import_module("torch.utils.data._utils.worker").get_worker_info
    return original()


def acquire() -> None:
    """One more open epoch: install the thread-aware function (first one installs)."""
    global _count, _torch_original
    with _lock:
        _count += 1
        if _count > 1:
            return
        for name in _MODULES:
            module = importlib.import_module(name)
            current = getattr(module, "get_worker_info")
            if current is not get_worker_info:
                _originals[name] = current
            setattr(module, "get_worker_info", get_worker_info)
        _torch_original = _originals.get("torch.utils.data._utils.worker")


def release() -> None:
    """One epoch fewer: the last one restores torch's functions."""
    global _count
    with _lock:
        if _count == 0:
            return
        _count -= 1
        if _count:
            return
        for name, original in _originals.items():
            module = importlib.import_module(name)
            if getattr(module, "get_worker_info") is get_worker_info:
                setattr(module, "get_worker_info", original)
        _originals.clear()


def installed() -> bool:
    """Whether the thread-aware function is installed now (for tests and diagnostics)."""
    with _lock:
        return _count > 0
