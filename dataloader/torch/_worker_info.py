"""A thread-aware ``torch.utils.data.get_worker_info``, installed while a loader of ours runs.

torch keeps one worker-info per process (``torch.utils.data._utils.worker._worker_info``, set
in each worker process).  Our workers are threads of one process, so code written for torch,
such as PyTorch's documented ``IterableDataset`` example that shards itself with
``torch.utils.data.get_worker_info()``, would see ``None`` in every worker and yield every
item once per worker.

While at least one epoch of ``dataloader.torch.DataLoader`` with ``num_workers > 0`` is open,
torch's function itself (the one object that ``torch.utils.data.get_worker_info``,
``torch.utils.data.dataloader.get_worker_info`` and ``torch.utils.data._utils.worker``'s
definition all name) runs a thread-aware body: its ``__code__`` is swapped for that of
:data:`_THREAD_AWARE` (``_SOURCE`` below), which returns the calling thread's :class:`dataloader.WorkerInfo`
inside our worker threads and otherwise torch's ``_worker_info`` (what the original returns: the
main thread gets ``None``, a torch worker process its torch ``WorkerInfo``).  Swapping the code,
not the module attributes, reaches every reference to the function, also one bound before the
epoch started (``from torch.utils.data import get_worker_info`` at import time).  The function
object, its name and docstring stay torch's; torch's global ``_worker_info`` is never written.
The one name the new body needs is added to torch's worker module
(``_dataloader_thread_worker_info``, our ``dataloader._context.get_worker_info``).

Installation is reference-counted under a lock: the first open epoch installs, the last one to
close restores the original code (only where the function still runs our body, so a later
change by someone else is left alone).

Thread-safety: ``acquire``/``release`` may be called from any thread; a thread already running
torch's function while the code is swapped finishes the body it started.
"""

from __future__ import annotations

import importlib
import threading
import types
from typing import Any

from dataloader import _context

__all__ = ["acquire", "get_worker_info", "installed", "release"]

_WORKER_MODULE = "torch.utils.data._utils.worker"

_lock = threading.Lock()
_count = 0
_original_code: Any = None  # torch's function's own __code__ while ours is installed


# The thread-aware body: compiled here, run as torch's function, so its globals are torch's
# worker module's (``_worker_info``, and the name acquire() adds there).
_SOURCE = """
def get_worker_info():
    info = _dataloader_thread_worker_info()
    return _worker_info if info is None else info
"""


def _compile_body() -> types.CodeType:
    namespace: dict[str, Any] = {}
    exec(compile(_SOURCE, __file__, "exec"), namespace)  # noqa: S102 - a constant source
    code: types.CodeType = namespace["get_worker_info"].__code__
    return code


_THREAD_AWARE = _compile_body()


def get_worker_info() -> Any:
    """This thread's worker info: ours inside our worker threads, else torch's (or None).

    Returns:
        A :class:`dataloader.WorkerInfo` (``id``, ``num_workers``, ``seed``, ``dataset``) in a
        worker thread of ours; torch's ``WorkerInfo`` in a torch worker process; else None.
    """
    info = _context.get_worker_info()
    if info is not None:
        return info
    return getattr(importlib.import_module(_WORKER_MODULE), "_worker_info")


def acquire() -> None:
    """One more open epoch: install the thread-aware body (the first one installs)."""
    global _count, _original_code
    with _lock:
        _count += 1
        if _count > 1:
            return
        module = importlib.import_module(_WORKER_MODULE)
        setattr(module, "_dataloader_thread_worker_info", _context.get_worker_info)
        fn = module.get_worker_info
        if fn.__code__ is not _THREAD_AWARE:
            _original_code = fn.__code__
            fn.__code__ = _THREAD_AWARE


def release() -> None:
    """One epoch fewer: the last one restores torch's own body."""
    global _count, _original_code
    with _lock:
        if _count == 0:
            return
        _count -= 1
        if _count:
            return
        fn = importlib.import_module(_WORKER_MODULE).get_worker_info
        if _original_code is not None and fn.__code__ is _THREAD_AWARE:
            fn.__code__ = _original_code
        _original_code = None


def installed() -> bool:
    """Whether the thread-aware function is installed now (for tests and diagnostics)."""
    with _lock:
        return _count > 0
