"""``event_loops``: an ``AsyncDataset``'s item coroutines on N event loops, spread by index
(``dataloader._engine.async_spread``: a feed per loop).  Outputs, errors (what they are, where they come and
what they name), error policies, ``timeout``, resume, early break, close and fork are those of
one loop; item ``i`` really runs on loop ``i % n``; no loop thread outlives the loader.
Every wait is bounded."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import AsyncDataset, DataLoader
from dataloader._engine.async_loop import ASYNC_THREAD_NAME
from dataloader._engine.errors import ItemCancelledError, LoaderTimeoutError
from tests._fork import fork_and_wait
from tests._support import batches_as_lists, collect, json_roundtrip
from tests.engine._policy_data import N, as_list
from tests.engine.test_async_dataset import Sleepy
from tests.engine.test_error_policy_async import Counted, SyncBroken

pytestmark = pytest.mark.timeout(60)


def all_loop_threads() -> list[threading.Thread]:
    """Every live event-loop thread of a loader: ``dataloader-asyncio`` and its peers."""
    return [t for t in threading.enumerate() if t.name.startswith(ASYNC_THREAD_NAME)]


def loop_name(index: int, n: int) -> str:
    """The thread that runs item ``index``'s coroutine with ``n`` loops."""
    j = index % n
    return ASYNC_THREAD_NAME if j == 0 else f"{ASYNC_THREAD_NAME}-{j}"


class Placed(Sleepy):
    """``Sleepy`` that records the thread and loop each item ran on (and checks that one
    coroutine stays on one thread from its start to its end)."""

    def __init__(self, n, **kw):
        super().__init__(n, **kw)
        self.where: dict[int, tuple[str, int]] = {}

    async def __getitem__(self, index):
        start = (threading.current_thread().name, id(asyncio.get_running_loop()))
        value = await super().__getitem__(index)
        assert (threading.current_thread().name, id(asyncio.get_running_loop())) == start
        with self.lock:
            self.where[int(index)] = start
        return value


def run(ds, **kw):
    with DataLoader(ds, **kw) as loader:
        return batches_as_lists(collect(loader))


@pytest.mark.parametrize("item_concurrency", [1, 4])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_outputs_and_errors_are_identical_for_one_two_and_three_loops(num_workers, item_concurrency):
    def transform(x):
        if int(x) == 41:
            raise ValueError("transform 41")
        return x * 10

    opts = dict(batch_size=6, shuffle=True, seed=3, num_workers=num_workers, item_concurrency=item_concurrency,
                transform=transform)
    expected = run(Sleepy(60, fail={7, 8, 30}, delay_s=0.001), **opts)
    assert [kind for kind, _ in expected].count("error") >= 3
    for n in (2, 3):
        assert run(Sleepy(60, fail={7, 8, 30}, delay_s=0.001), event_loops=n, **opts) == expected
    assert not all_loop_threads()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 30), batch_size=st.integers(1, 6), fail=st.sets(st.integers(0, 29), max_size=4),
    num_workers=st.integers(0, 3), item_concurrency=st.integers(1, 6), loops=st.integers(2, 4),
    seed=st.integers(0, 2**16),
)
def test_any_loop_count_gives_the_one_loop_output(n, batch_size, fail, num_workers, item_concurrency, loops, seed):
    opts = dict(batch_size=batch_size, shuffle=True, seed=seed, num_workers=num_workers,
                item_concurrency=item_concurrency)
    expected = run(Sleepy(n, fail=fail, delay_s=0.0002), **opts)
    assert run(Sleepy(n, fail=fail, delay_s=0.0002), event_loops=loops, **opts) == expected


@pytest.mark.parametrize("num_workers", [0, 2])
def test_async_getitems_batches_are_identical_on_several_loops(num_workers):
    class Batched(Sleepy):
        async def __getitems__(self, indices):
            await asyncio.sleep(0.001)
            if 13 in indices:
                raise KeyError(13)
            return [np.int64(i) for i in indices]

    expected = run(Batched(30), batch_size=4, num_workers=num_workers)
    assert run(Batched(30), batch_size=4, num_workers=num_workers, event_loops=3) == expected
    assert ("error", ("KeyError", (13,))) in expected


@pytest.mark.parametrize("n", [2, 3])
def test_item_i_runs_on_loop_i_mod_n_each_on_a_thread_and_loop_of_its_own(n):
    ds = Placed(48, delay_s=0.001)
    with DataLoader(ds, batch_size=8, num_workers=2, item_concurrency=8, event_loops=n) as loader:
        assert [b.tolist() for b in loader] == [list(range(i, i + 8)) for i in range(0, 48, 8)]
        assert len(all_loop_threads()) == n
    assert {i: name for i, (name, _) in ds.where.items()} == {i: loop_name(i, n) for i in range(48)}
    assert len({loop for _, loop in ds.where.values()}) == n  # n distinct event loops
    assert ds.aclosed == n  # aclose() awaited on each loop
    assert not all_loop_threads()


@pytest.mark.parametrize("policy", ["skip", "replace"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_error_policies_settle_batches_identically_on_several_loops(policy, num_workers):
    bad = {3, 4, 11, 20, 21, 22}
    opts = dict(batch_size=5, shuffle=True, seed=7, on_error=policy, max_failures=N, item_concurrency=4)

    def outcome(ds, **kw):
        with DataLoader(ds, **opts, **kw) as loader:
            return [as_list(b) for b in loader], [(r.index, r.exc_type, r.message) for r in loader.failures]

    expected = outcome(SyncBroken(bad))
    one, three = Counted(bad=bad, wait_s=0.001), Counted(bad=bad, wait_s=0.001)
    assert outcome(one, num_workers=num_workers) == expected
    assert outcome(three, num_workers=num_workers, event_loops=3) == expected
    assert three.calls == one.calls  # settled alike: each item requested as often as on one loop


@pytest.mark.parametrize("workers", [(0, 2), (2, 0)])
def test_a_resume_across_loop_counts_is_exact(workers):
    opts = dict(batch_size=4, shuffle=True, seed=5, item_concurrency=3)
    full = run(Sleepy(40, fail={9}, delay_s=0.0005), **opts)
    first = DataLoader(Sleepy(40, fail={9}, delay_s=0.0005), num_workers=workers[0], event_loops=2, **opts)
    it = iter(first)
    head = batches_as_lists([("batch", next(it)) for _ in range(2)])
    state = json_roundtrip(first.state_dict())
    it.close()
    first.close()
    second = DataLoader(Sleepy(40, fail={9}, delay_s=0.0005), num_workers=workers[1], event_loops=3, **opts)
    second.load_state_dict(state)
    with second:
        assert head + batches_as_lists(collect(second)) == full


def test_an_item_cancelled_on_another_loop_fails_with_item_cancelled_error_naming_it():
    class SelfCancelling(Sleepy):
        async def __getitem__(self, index):
            if index == 5:  # on loop 5 % 2 == 1: a peer
                asyncio.current_task().cancel()
                await asyncio.sleep(1)
            return await super().__getitem__(index)

    with DataLoader(SelfCancelling(8), batch_size=4, item_concurrency=4, event_loops=2) as loader:
        it = iter(loader)
        assert next(it).tolist() == [0, 1, 2, 3]
        with pytest.raises(ItemCancelledError, match=r"SelfCancelling.__getitem__\(5\)") as info:
            next(it)
        assert info.value.index == 5


def test_an_items_error_on_another_loop_keeps_its_own_traceback():
    ds = Sleepy(8, fail={3})  # item 3: loop 1 of 2
    with DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=4, event_loops=2) as loader:
        with pytest.raises(KeyError) as info:
            next(iter(loader))
    assert info.value.args == (3,)
    assert any(entry.name == "__getitem__" for entry in info.traceback)


def test_timeout_applies_to_an_item_hanging_on_another_loop():
    ds = Sleepy(8, hang={3})
    with DataLoader(ds, batch_size=2, num_workers=1, item_concurrency=2, timeout=0.2, event_loops=2) as loader:
        it = iter(loader)
        assert next(it).tolist() == [0, 1]
        with pytest.raises(LoaderTimeoutError):
            next(it)
    assert ds.in_flight == 0 and not all_loop_threads()


@pytest.mark.parametrize("num_workers", [1, 2])  # workers claim batches ahead: those hang
def test_breaking_early_cancels_items_on_every_loop_and_close_stops_every_thread(num_workers):
    ds = Sleepy(10_000, hang=set(range(8, 10_000)))
    before = threading.active_count()
    with DataLoader(ds, batch_size=4, num_workers=num_workers, item_concurrency=16, event_loops=3) as loader:
        for i, _ in enumerate(loader):
            if i == 1:
                deadline = time.monotonic() + 5
                while ds.in_flight < 4 and time.monotonic() < deadline:  # batch 2 (8..11: every loop) hangs
                    time.sleep(0.01)
                hung = ds.in_flight
                break
        deadline = time.monotonic() + 5
        while ds.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hung >= 4 and ds.in_flight == 0 and ds.cancelled >= hung
        started = ds.started
        time.sleep(0.1)
        assert ds.started == started
        assert len(all_loop_threads()) == 3  # kept for the loader's next epoch
    assert ds.aclosed == 3 and not all_loop_threads()
    assert threading.active_count() <= before


def test_a_collected_loader_stops_every_loop():
    ds = Sleepy(40)
    loader = DataLoader(ds, batch_size=4, num_workers=1, item_concurrency=4, event_loops=3)
    assert len(list(loader)) == 10 and len(all_loop_threads()) == 3
    del loader
    gc.collect()
    deadline = time.monotonic() + 10
    while all_loop_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not all_loop_threads() and ds.aclosed == 3


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_after_fork_a_child_runs_its_own_loops():
    loader = DataLoader(Sleepy(24), batch_size=4, num_workers=1, item_concurrency=4, event_loops=2)
    expected = [b.tolist() for b in loader]
    parents = set(all_loop_threads())

    def child():
        if [b.tolist() for b in loader] != expected:
            return 3
        mine = set(all_loop_threads())
        if len(mine) != 2 or mine & parents:
            return 4
        loader.close()
        return 5 if all_loop_threads() else 0

    assert fork_and_wait(child, 30) == 0
    assert [b.tolist() for b in loader] == expected
    loader.close()
    assert not all_loop_threads()


class Ints(AsyncDataset):
    def __len__(self):
        return 4

    async def __getitem__(self, index):
        return index


@pytest.mark.parametrize(("value", "error", "shown"), [
    (True, TypeError, "bool True"), (0, ValueError, "event_loops=0"), (-2, ValueError, "event_loops=-2"),
    (1.5, TypeError, "float 1.5"), ("many", ValueError, "'many'"), (None, TypeError, "NoneType None"),
])
def test_a_bad_event_loops_is_refused_naming_the_value(value, error, shown):
    with pytest.raises(error, match="event_loops") as info:
        DataLoader(Ints(), event_loops=value)
    assert shown in str(info.value)


def test_more_than_one_loop_is_refused_for_a_dataset_of_plain_items():
    with pytest.raises(ValueError, match=r"event_loops=2 .*AsyncDataset"):
        DataLoader(list(range(4)), event_loops=2)
    assert DataLoader(list(range(4)), event_loops="auto").event_loops == "auto"  # "auto": 1 there


def test_event_loops_is_kept_as_given_and_survives_a_copy():
    import copy

    loader = DataLoader(Ints(), batch_size=2, event_loops="auto")
    assert loader.event_loops == "auto"
    twin = copy.copy(loader)
    assert twin.event_loops == "auto" and [b.tolist() for b in twin] == [[0, 1], [2, 3]]
    twin.close()
    loader.close()
