"""Free-threading: importing every module keeps the GIL off on 3.13t, and worker threads run
pure-Python items in parallel there."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import subprocess
import sys
import threading

import pytest

import dataloader
from dataloader.loader import DataLoader

FREE_THREADED = hasattr(sys, "_is_gil_enabled") and not sys._is_gil_enabled()
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_ft = pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded (3.13t) interpreter")


def _all_modules() -> list[str]:
    names = ["dataloader"]
    for info in pkgutil.walk_packages(dataloader.__path__, "dataloader."):
        if info.name.endswith("__main__"):
            continue
        if info.name.split(".")[:2] == ["dataloader", "torch"] and not HAS_TORCH:
            continue  # dataloader.torch imports torch (optional; absent on 3.13t)
        names.append(info.name)
    return names


@pytest.mark.thread_unsafe(reason="first imports; pkgutil.walk_packages is not thread-safe")
def test_every_module_imports():
    for name in _all_modules():
        importlib.import_module(name)
    assert "dataloader._native._ring" in _all_modules()


@pytest.mark.thread_unsafe(reason="first imports; pkgutil.walk_packages is not thread-safe")
@needs_ft
def test_importing_every_module_keeps_the_gil_disabled():
    code = (
        "import importlib, sys; "
        f"[importlib.import_module(m) for m in {_all_modules()!r}]; "
        "print(sys._is_gil_enabled())"
    )
    out = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


class OverlapDataset:
    """CPU-bound pure-Python items; records whether two ran at the same time."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.lock = threading.Lock()
        self.running = 0
        self.max_running = 0
        self.both_running = threading.Barrier(2, timeout=30)
        self.met = False

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        with self.lock:
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            if i < 2:  # the first two items (one per worker's first batch) must meet
                self.both_running.wait()
                self.met = True
            total = 0
            for k in range(20_000):  # pure-Python work that holds the interpreter
                total += k * k
            return total
        finally:
            with self.lock:
                self.running -= 1


@pytest.mark.timeout(120)
def test_cpu_bound_items_overlap_on_two_worker_threads():
    ds = OverlapDataset(64)
    loader = DataLoader(ds, batch_size=1, num_workers=2)
    assert len(list(loader)) == 64
    loader.close()
    assert ds.met and ds.max_running == 2
