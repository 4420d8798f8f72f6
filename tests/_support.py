"""Shared fakes and helpers of the test suite: ``from tests._support import ...``.

A module of the ``tests`` package, not ``conftest.py``: ``tests/torch`` has a conftest of its
own, so ``from conftest import`` would name whichever conftest was imported first.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dataloader import IterableDataset
from dataloader._engine.async_loop import ASYNC_THREAD_NAME

REPO = Path(__file__).resolve().parents[1]


class RecordingDataset:
    """A map-style dataset whose items are their index (as int64 arrays) and which records calls.

    ``fail`` is a set of indices that raise ``KeyError(index)``; ``delay_s`` maps an index
    to a sleep in seconds (a slow item).  Thread-safe.
    """

    def __init__(self, n: int, fail: set[int] | frozenset[int] = frozenset(), delay_s: dict[int, float] | None = None):
        self.n = n
        self.fail = frozenset(fail)
        self.delay_s = delay_s or {}
        self.lock = threading.Lock()
        self.calls: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.threads: set[str] = set()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> Any:
        with self.lock:
            self.calls.append(int(index))
            self.threads.add(threading.current_thread().name)
        if index in self.delay_s:
            time.sleep(self.delay_s[index])
        if index in self.fail:
            raise KeyError(index)
        return np.array([index, index * 2], dtype=np.int64)


class RangeStream(IterableDataset):
    """An ``IterableDataset`` of the ints ``0 .. n - 1``, not sharded: every worker's copy yields
    all of them.  No ``__len__`` (see ``SizedRangeStream``)."""

    def __init__(self, n: int):
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n))


class SizedRangeStream(RangeStream):
    """``RangeStream`` with ``__len__`` (``n``), as PyTorch's length warning needs."""

    def __len__(self) -> int:
        return self.n


class SleepyDataset:
    """A map-style dataset of ``n`` items: item ``i`` is ``i`` after sleeping ``delay_s`` seconds."""

    def __init__(self, n: int, delay_s: float):
        self.n = n
        self.delay_s = delay_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        time.sleep(self.delay_s)
        return i


def shard(start: int, end: int, info: Any) -> tuple[int, int]:
    """This worker's contiguous part ``[lo, hi)`` of ``range(start, end)``, as in PyTorch's
    ``IterableDataset`` documentation (``info``: ``get_worker_info()``; None: all of it)."""
    if info is None:
        return start, end
    per_worker = math.ceil((end - start) / info.num_workers)
    lo = start + info.id * per_worker
    return lo, min(lo + per_worker, end)


def collect(loader: Any) -> list[tuple[str, Any]]:
    """Iterate one epoch, recording each batch or the type and args of its exception."""
    out: list[tuple[str, Any]] = []
    it = iter(loader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return out
        except Exception as exc:  # noqa: BLE001 - the test compares errors too
            out.append(("error", (type(exc).__name__, exc.args)))
        else:
            out.append(("batch", batch))


def batches_as_lists(out: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``collect()`` output with each batch (a NumPy array) as a list."""
    return [(kind, v.tolist() if kind == "batch" else v) for kind, v in out]


def json_roundtrip(state: Any) -> Any:
    """``state`` through JSON and back (what a checkpoint file keeps of a state_dict)."""
    return json.loads(json.dumps(state))


def loop_threads() -> list[threading.Thread]:
    """The live asyncio event-loop threads of loaders (named ``ASYNC_THREAD_NAME``)."""
    return [t for t in threading.enumerate() if t.name == ASYNC_THREAD_NAME]


def fetch_each(ds: Any) -> list[Any]:
    """``await ds[i]`` for every index on one event loop, then ``ds.aclose()`` where it has one:
    each item's value or the exception it raised."""

    async def run() -> list[Any]:
        out: list[Any] = []
        for i in range(len(ds)):
            try:
                out.append(await ds[i])
            except Exception as exc:  # noqa: BLE001 - the test looks at each
                out.append(exc)
        if hasattr(ds, "aclose"):
            await ds.aclose()
        return out

    return asyncio.run(run())


def run_python(
    *args: str, timeout: float = 120, cwd: Path = REPO
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh interpreter that imports this source tree's ``dataloader``."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_threads(
    work: Callable[[int], object], n: int, timeout_s: float = 50
) -> list[BaseException]:
    """Run ``work(0) ... work(n - 1)`` on ``n`` threads at once; return what they raised.

    Fails the test when a thread is still running ``timeout_s`` seconds after the joins begin.
    """
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # carried to the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,), name=f"test-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    return errors
