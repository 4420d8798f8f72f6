"""An epoch whose next() raised a batch's exception is freed by reference counting,
like one that did not raise: its worker threads end without the cyclic garbage collector.

On free-threaded builds an object is freed by the thread that created it (biased reference
counting); the exception was made on a worker that sleeps in claim() until the epoch is
finalized, so a traceback that held the epoch's frames kept both alive until gc ran.
Epoch.__next__ raises a carried exception from a frame that no longer holds the epoch.
"""
import gc
import threading
import time

import pytest

from dataloader import DataLoader


class _FailsFirst:
    def __len__(self):
        return 16

    def __getitem__(self, i):
        if i == 0:
            raise ValueError(i)
        return i


@pytest.mark.timeout(60)
def test_threads_end_without_gc_collect():
    before = threading.active_count()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(50):
            loader = DataLoader(_FailsFirst(), batch_size=2, num_workers=2)
            try:
                for _batch in loader:
                    pass
            except ValueError:
                pass
            del loader
        deadline = time.monotonic() + 5
        while threading.active_count() > before + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before + 2, f"{threading.active_count() - before} threads still alive"
    finally:
        if enabled:
            gc.enable()
        gc.collect()
