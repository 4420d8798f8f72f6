"""A feed per event loop (``dataloader._engine.async_spread``): each loop runs its share of a
builder's items and hands their results to the builder itself, never through the first
loop; the builder's ``item_concurrency`` budget is shared by its loops (a loop with nothing
to do gives its slots to the others); an error at position ``p`` still lets the items
before ``p`` on the other loops run, so the batch fails with its first error by position.
Every wait is bounded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from dataloader import DataLoader
from tests.engine.test_async_dataset import Sleepy
from tests.engine.test_event_loops import Placed, all_loop_threads, loop_name

pytestmark = pytest.mark.timeout(60)


class BlocksFirstLoop(Sleepy):
    """Item 0 (loop 0) blocks its loop's thread until item 1 (loop 1) was transformed by the
    builder: with results handed home through loop 0 that would never happen."""

    def __init__(self, n: int) -> None:
        super().__init__(n, delay_s=0.001)
        self.transformed = threading.Event()
        self.waited: bool | None = None

    async def __getitem__(self, index):
        if index == 0:
            await asyncio.sleep(0)
            self.waited = self.transformed.wait(10)  # blocks loop 0's thread, not a coroutine step
        return await super().__getitem__(index)


@pytest.mark.parametrize("num_workers", [0, 1])
def test_a_result_reaches_its_builder_while_the_first_loop_is_blocked(num_workers):
    ds = BlocksFirstLoop(4)

    def transform(x):
        if int(x) == 1:
            ds.transformed.set()
        return x

    with DataLoader(ds, batch_size=2, num_workers=num_workers, item_concurrency=2, event_loops=2,
                    transform=transform) as loader:
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    assert ds.waited is True
    assert not all_loop_threads()


@pytest.mark.parametrize(("num_workers", "item_concurrency", "loops"), [(0, 1, 3), (0, 5, 2), (2, 2, 4), (2, 6, 3)])
def test_in_flight_stays_within_the_budget_shared_by_every_loop(num_workers, item_concurrency, loops):
    ds = Placed(72, delay_s=0.001)
    with DataLoader(ds, batch_size=6, num_workers=num_workers, item_concurrency=item_concurrency,
                    event_loops=loops) as loader:
        assert [b.tolist() for b in loader] == [list(range(i, i + 6)) for i in range(0, 72, 6)]
    assert 1 <= ds.peak <= max(num_workers, 1) * item_concurrency
    assert {i: name for i, (name, _) in ds.where.items()} == {i: loop_name(i, loops) for i in range(72)}


def test_items_before_a_failure_on_other_loops_still_run_and_the_first_error_by_position_wins():
    class Ordered(Sleepy):
        """Item 2 (loop 0) fails at once; item 1 (loop 1) fails after a sleep; item 3 (loop 1)
        would fail too, but comes after a failure: it never starts."""

        def __init__(self):
            super().__init__(8, fail={1, 2, 3}, delay_s=0.001)
            self.ran: list[int] = []

        async def __getitem__(self, index):
            with self.lock:
                self.ran.append(int(index))
            if index == 2:
                raise KeyError(2)
            return await super().__getitem__(index)

    ds = Ordered()
    # One slot over both loops: whichever loop takes it first, item 1 runs (before or after
    # item 2 failed) and its error is the batch's; item 3 never starts.
    with DataLoader(ds, batch_size=4, item_concurrency=1, event_loops=2) as loader:
        it = iter(loader)
        with pytest.raises(KeyError) as info:
            next(it)
        assert info.value.args == (1,)
        assert next(it).tolist() == [4, 5, 6, 7]
    assert 1 in ds.ran and 3 not in ds.ran
