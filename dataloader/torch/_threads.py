"""One intra-op thread for each worker thread, without touching torch's process-wide default.

``torch.set_num_threads(n)`` does two things (ATen's OpenMP backend, ``ParallelOpenMP.cpp``):
it calls ``omp_set_num_threads(n)``, which sets the *calling thread's* OpenMP thread count, and
it stores ``n`` in a process-wide default that every thread applies at its first torch op
(``lazy_init_num_threads``, once per thread).  Called on a worker thread it would therefore
also give 1 intra-op thread to the main thread, if that thread had not run a torch op yet (a
script that iterates the loader before its first forward pass), and to every thread started
later.

So a worker thread instead (1) runs torch's per-thread initialisation
(``torch.get_num_threads()``, which applies the process-wide default to this thread now, so it
cannot override step 2 later) and (2) calls the OpenMP runtime's ``omp_set_num_threads(1)``
directly, through ``ctypes``, on the OpenMP library torch loaded: only this thread's count
changes; torch's stored default, the main thread and later threads keep theirs.

Where torch's parallel backend is not OpenMP, or its OpenMP library cannot be found (torch
builds other than Linux / macOS wheels), the worker threads keep torch's default count
(:func:`limit_this_thread` returns False): never the process-wide ``torch.set_num_threads``.

Thread-safety: :func:`limit_this_thread` may run on many threads at once (the library lookup
is done once, under a lock).
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from typing import Any

import torch

__all__ = ["limit_this_thread", "omp_library"]

_lock = threading.Lock()
_looked_up = False
_omp: Any = None  # the ctypes handle of torch's OpenMP runtime, or None


def _loaded_omp_paths() -> list[str]:
    """Paths of OpenMP runtimes mapped into this process (Linux), best candidates first."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.split()[-1] for line in maps if "omp" in line and ".so" in line}
    except OSError:
        return []
    names = ("libgomp", "libiomp5", "libomp")
    return sorted((p for p in paths if os.path.basename(p).startswith(names)), key=lambda p: "torch" not in p)


def _torch_omp_paths() -> list[str]:
    """OpenMP runtimes shipped in torch's ``lib`` folder (macOS wheels bundle ``libomp``)."""
    path: str | None = getattr(torch, "__file__", None)
    if path is None:
        return []
    lib = os.path.join(os.path.dirname(path), "lib")
    return sorted(glob.glob(os.path.join(lib, "lib*omp*")))


def omp_library() -> Any:
    """The ``ctypes`` handle of the OpenMP runtime torch runs on, or None (not OpenMP / not found)."""
    global _looked_up, _omp
    with _lock:
        if _looked_up:
            return _omp
        _looked_up = True
        if "OpenMP" not in torch.__config__.parallel_info().split("ATen parallel backend:")[-1]:
            return None
        for path in _loaded_omp_paths() + _torch_omp_paths():
            try:
                lib = ctypes.CDLL(path)
                lib.omp_set_num_threads.argtypes = [ctypes.c_int]
                lib.omp_set_num_threads.restype = None
            except (OSError, AttributeError):
                continue
            _omp = lib
            break
        return _omp


def limit_this_thread(n: int = 1) -> bool:
    """Give the calling thread ``n`` intra-op threads; torch's process-wide default is untouched.

    Returns:
        True when applied; False when torch does not run on a reachable OpenMP runtime (the
        thread then keeps torch's default).
    """
    lib = omp_library()
    if lib is None:
        return False
    torch.get_num_threads()  # torch's once-per-thread initialisation first (see module docstring)
    lib.omp_set_num_threads(n)
    return True
