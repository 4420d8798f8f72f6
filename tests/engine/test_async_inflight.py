"""AsyncDataset requests in flight across batch boundaries: a worker starts the items of its
next batches as those of its current one end, within ``item_concurrency`` per worker and the
window's bound on batches, with order, errors, cancellation and resume as before."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import AsyncDataset, DataLoader

from tests._support import batches_as_lists, collect, loop_threads


class Timed(AsyncDataset):
    """Item i is i after ``delays[i]`` seconds (``hang``: never); records starts and ends."""

    def __init__(self, delays, fail=frozenset(), hang=frozenset()):
        self.delays, self.fail, self.hang = list(delays), frozenset(fail), frozenset(hang)
        self.lock = threading.Lock()
        self.in_flight = self.peak = self.cancelled = 0
        self.started: dict[int, float] = {}
        self.ended: dict[int, float] = {}
        self.tasks: list[asyncio.Task] = []

    def __len__(self):
        return len(self.delays)

    async def __getitem__(self, index):
        with self.lock:
            self.started[index] = time.monotonic()
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            self.tasks.append(asyncio.current_task())
        try:
            await asyncio.sleep(3600 if index in self.hang else self.delays[index])
            if index in self.fail:
                raise KeyError(index)
            return np.int64(index)
        except asyncio.CancelledError:
            with self.lock:
                self.cancelled += 1
            raise
        finally:
            with self.lock:
                self.in_flight -= 1
                self.ended[index] = time.monotonic()


def wait_until(condition, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.005)
    return condition()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 2])
def test_items_of_the_next_batch_start_before_a_slow_batch_is_collated(num_workers):
    # Batch 0 = items 0-3, item 3 slow; the workers' other slots go to the next batches at once.
    delays = [0.005] * 24
    delays[3] = 0.4
    ds = Timed(delays)
    collated: dict[int, float] = {}

    def collate(items):
        collated[int(items[0])] = time.monotonic()
        return [int(x) for x in items]

    with DataLoader(ds, batch_size=4, num_workers=num_workers, item_concurrency=4, prefetch_depth=4,
                    collate_fn=collate) as loader:
        assert [x for b in loader for x in b] == list(range(24))
    assert ds.started[4] < ds.ended[3] <= collated[0]  # batch 1 began while batch 0 waited on item 3
    assert ds.peak <= num_workers * 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("num_workers", "item_concurrency", "batch_size"), [(1, 16, 4), (2, 5, 3), (1, 3, 8)])
def test_in_flight_stays_within_workers_times_item_concurrency_and_crosses_batches(
    num_workers, item_concurrency, batch_size
):
    rng = np.random.default_rng(0)
    ds = Timed(rng.uniform(0.001, 0.01, 240).tolist())
    with DataLoader(ds, batch_size=batch_size, num_workers=num_workers, item_concurrency=item_concurrency,
                    prefetch_depth=8, collate_fn=list) as loader:
        assert [int(x) for b in loader for x in b] == list(range(240))
    assert ds.peak <= num_workers * item_concurrency
    # The slots of ended items went to later batches: a batch's items started before the last
    # item of the batch before it ended.
    batches = [range(i, min(i + batch_size, 240)) for i in range(0, 240, batch_size)]
    crossed = [min(ds.started[j] for j in b) < max(ds.ended[i] for i in a) for a, b in zip(batches, batches[1:])]
    assert sum(crossed) >= len(crossed) // 2


@pytest.mark.timeout(300)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    delays=st.lists(st.sampled_from([0.0, 0.001, 0.004, 0.012]), min_size=0, max_size=30),
    batch_size=st.integers(1, 6),
    fail=st.sets(st.integers(0, 29), max_size=3),
    num_workers=st.integers(1, 3),
    item_concurrency=st.integers(1, 10),
    prefetch_depth=st.integers(1, 4),
    with_transform=st.booleans(),
)
def test_random_item_delays_give_the_sequential_batches_and_errors(
    delays, batch_size, fail, num_workers, item_concurrency, prefetch_depth, with_transform
):
    transform = (lambda x: x * 2) if with_transform else None

    def run(**kw):
        with DataLoader(Timed(delays, fail), batch_size=batch_size, transform=transform, **kw) as loader:
            return batches_as_lists(collect(loader))

    assert run(num_workers=num_workers, item_concurrency=item_concurrency, prefetch_depth=prefetch_depth) == run()


@pytest.mark.timeout(60)
def test_an_error_of_a_later_batch_that_ends_first_is_raised_at_its_position():
    # Batch 0 waits on a slow item while batch 1 (claimed ahead) fails at once.
    delays = [0.005] * 16
    delays[2] = 0.3
    ds = Timed(delays, fail={5})
    with DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=8, collate_fn=list) as loader:
        got = collect(loader)
    assert [kind for kind, _ in got] == ["batch", "error", "batch", "batch"]
    assert got[1][1] == ("KeyError", (5,))
    assert [int(x) for x in got[0][1]] == [0, 1, 2, 3]
    assert ds.started[5] < ds.ended[2]  # batch 1 did run ahead


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["loader_close", "close", "drop"])
def test_ending_an_epoch_cancels_every_item_in_flight_of_every_batch(how):
    # Batch 0: three quick items and one that hangs; the worker's other slots start batch 1,
    # whose items hang too: requests of two batches are in flight when the epoch ends.
    delays = [0.001] * 400
    ds = Timed(delays, hang={3} | set(range(4, 400)))
    loader = DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=8, prefetch_depth=3)
    it = iter(loader)
    assert wait_until(lambda: ds.in_flight == 5)  # item 3 and batch 1's four
    assert any(i >= 4 for i in ds.started)
    if how == "close":
        it.close()
    elif how == "drop":
        del it
    else:
        loader.close()
    assert wait_until(lambda: ds.in_flight == 0)
    assert ds.cancelled == 5 and all(t.done() for t in ds.tasks)  # no task left behind
    started = len(ds.started)
    time.sleep(0.1)
    assert len(ds.started) == started  # nothing starts after the epoch ended
    loader.close()
    assert not loop_threads()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 2])
def test_resume_mid_epoch_gives_the_rest_of_the_epoch(num_workers):
    rng = np.random.default_rng(1)
    delays = rng.uniform(0.0, 0.006, 60).tolist()

    def loader():
        return DataLoader(Timed(delays), batch_size=4, shuffle=True, seed=7, num_workers=num_workers,
                          item_concurrency=6, prefetch_depth=3, collate_fn=lambda b: [int(x) for x in b])

    with loader() as full:
        whole = list(full)
    first = loader()
    it = iter(first)
    head = [next(it) for _ in range(5)]
    state = first.state_dict()
    first.close()
    with loader() as again:
        again.load_state_dict(state)
        assert head + list(again) == whole
