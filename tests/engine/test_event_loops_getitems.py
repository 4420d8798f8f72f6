"""``event_loops`` with an ``async def __getitems__`` (one coroutine a batch): batch ``k`` of
the epoch runs on loop ``k % n`` (``dataloader._engine.async_spread.split``), so batches whose
size is a multiple of ``n`` still use every loop; outputs are those of one loop.  Every wait
is bounded."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from dataloader import DataLoader
from tests.engine.test_async_dataset import Sleepy
from tests.engine.test_event_loops import all_loop_threads, loop_name, run

pytestmark = pytest.mark.timeout(60)


class BatchPlaced(Sleepy):
    """A ``__getitems__`` dataset that records the thread and event loop of each call, by
    its batch's first index."""

    def __init__(self, n, **kw):
        super().__init__(n, **kw)
        self.where: dict[int, tuple[str, int]] = {}

    async def __getitems__(self, indices):
        start = (threading.current_thread().name, id(asyncio.get_running_loop()))
        await asyncio.sleep(0.001)
        with self.lock:
            self.where[int(indices[0])] = start
        return [np.int64(i) * 3 for i in indices]


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("n", [2, 3])
def test_getitems_batch_k_runs_on_loop_k_mod_n(num_workers, n):
    ds = BatchPlaced(64)
    with DataLoader(ds, batch_size=8, num_workers=num_workers, event_loops=n) as loader:
        out = [b.tolist() for b in loader]
    assert out == [[3 * i for i in range(s, s + 8)] for s in range(0, 64, 8)]
    assert {first: name for first, (name, _) in ds.where.items()} == {8 * k: loop_name(k, n) for k in range(8)}
    assert len({loop for _, loop in ds.where.values()}) == n  # every loop ran batches
    assert not all_loop_threads()


def test_getitems_batches_of_a_multiple_of_the_loop_count_use_both_loops_with_one_loop_output():
    opts = dict(batch_size=8, num_workers=2, shuffle=True, seed=5)
    ds = BatchPlaced(80)
    assert run(ds, event_loops=2, **opts) == run(BatchPlaced(80), **opts)
    assert len(ds.where) == 10
    assert {name for name, _ in ds.where.values()} == {loop_name(0, 2), loop_name(1, 2)}
    assert len({loop for _, loop in ds.where.values()}) == 2
