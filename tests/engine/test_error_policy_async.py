"""An ``AsyncDataset`` with one ``__getitem__`` coroutine an item under ``on_error="skip"`` /
``"replace"``: each batch is fetched once, settled (a failing item cancels none of the others,
``dataloader._engine.async_pipe``), so every item is requested exactly once; workers claim
batches ahead as without a policy; output, failures and resume are those of any other
configuration; interrupts pass."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import DataLoader
from dataloader._engine.recover import substitute_index
from tests._support import json_roundtrip
from tests.engine._policy_data import N, AsyncItems, Items, as_list


class Counted(AsyncItems):
    """``AsyncItems`` whose ``bad`` indices raise ``OSError`` (``interrupt``: ``KeyboardInterrupt``)
    after a short wait; counts each index's ``__getitem__`` calls and the most coroutines
    running at once."""

    def __init__(self, bad=(), interrupt=None, wait_s=0.0):
        self.bad, self.interrupt, self.wait_s = frozenset(bad), interrupt, wait_s
        self.calls: dict[int, int] = {}
        self.running = self.most = 0
        self.starts: list[int] = []  # coroutines running as each call began (itself included)
        self.lock = threading.Lock()

    async def __getitem__(self, index):
        with self.lock:
            self.calls[index] = self.calls.get(index, 0) + 1
            self.running += 1
            self.most = max(self.most, self.running)
            self.starts.append(self.running)
        try:
            await asyncio.sleep(self.wait_s * (1 + index % 3))
            if index == self.interrupt:
                raise KeyboardInterrupt
            if index in self.bad:
                raise OSError(f"unreachable {index}")
            return await super().__getitem__(index)
        finally:
            with self.lock:
                self.running -= 1


class SyncBroken(Items):
    def __init__(self, bad):
        self.bad = frozenset(bad)

    def __getitem__(self, index):
        if index in self.bad:
            raise OSError(f"unreachable {index}")
        return super().__getitem__(index)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("item_concurrency", [1, 4])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_each_item_of_a_failing_async_batch_is_requested_once_under_skip(num_workers, item_concurrency):
    bad = {0, 5, 6, 17, 29}
    ds = Counted(bad=bad)
    with DataLoader(ds, batch_size=8, on_error="skip", num_workers=num_workers,
                    item_concurrency=item_concurrency) as loader:
        got = [as_list(b) for b in loader]
        failures = loader.failures
    assert sum(got, []) == [10 * i for i in range(N) if i not in bad]
    assert [r.index for r in failures] == sorted(bad)
    assert ds.calls == {i: 1 for i in range(N)}  # no narrowing: no item fetched twice


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_replace_fetches_each_item_once_and_the_substitutes_once_each(num_workers):
    bad = {3, 12}
    sync = DataLoader(SyncBroken(bad), batch_size=6, on_error="replace", seed=4)
    expected = [as_list(b) for b in sync], [(r.index, r.message) for r in sync.failures]
    ds = Counted(bad=bad)
    with DataLoader(ds, batch_size=6, on_error="replace", seed=4, num_workers=num_workers,
                    item_concurrency=3) as loader:
        assert ([as_list(b) for b in loader], [(r.index, r.message) for r in loader.failures]) == expected
    # each item once; then per failing item its substitutes, one request each, until one succeeds
    assert sum(ds.calls.values()) == N + len(expected[1])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("auto", [True, False])
def test_a_batchs_substitutes_are_fetched_concurrently(auto):
    ds = Counted(bad={0, 1, 2, 3}, wait_s=0.01)
    opts = dict(batch_sampler=[[0, 1, 2, 3]]) if auto else dict(batch_size=None, sampler=[0])
    with DataLoader(ds, on_error="replace", seed=1, item_concurrency=4, **opts) as loader:
        assert len(list(loader)) == 1
    originals = 4 if auto else 1
    # the originals all settled first; then one round of substitutes, all at once
    if auto:
        assert max(ds.starts[originals:]) >= 2
    assert len(ds.starts) == originals + len(loader.failures)


@pytest.mark.timeout(60)
def test_workers_under_a_policy_claim_batches_ahead():
    ds = Counted(bad={1}, wait_s=0.01)
    with DataLoader(ds, batch_size=2, on_error="skip", num_workers=1, item_concurrency=4) as loader:
        assert sum(map(len, loader)) == N - 1
    # one batch at a time would keep 2 coroutines running at most
    assert ds.most > 2


@pytest.mark.timeout(120)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bad=st.sets(st.integers(0, N - 1), max_size=8),
    batch_size=st.integers(1, 7),
    policy=st.sampled_from(["skip", "replace"]),
    num_workers=st.integers(1, 3),
    prefetch_depth=st.integers(1, 3),
    item_concurrency=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_async_output_and_failures_are_the_plain_datasets_for_any_configuration(
    bad, batch_size, policy, num_workers, prefetch_depth, item_concurrency, seed
):
    epoch = dict(batch_size=batch_size, shuffle=True, seed=seed, on_error=policy, max_failures=N)

    def run(ds, **kw):
        with DataLoader(ds, **epoch, **kw) as loader:
            return [as_list(b) for b in loader], [(r.index, r.exc_type, r.message) for r in loader.failures]

    expected = run(SyncBroken(bad))
    assert run(Counted(bad=bad)) == expected
    got = run(Counted(bad=bad), num_workers=num_workers, prefetch_depth=prefetch_depth,
              item_concurrency=item_concurrency)
    assert got == expected


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["skip", "replace"])
@pytest.mark.parametrize("workers", [(0, 2), (2, 0), (2, 3)])
def test_an_async_resume_mid_epoch_with_failures_is_exact(policy, workers):
    bad = {5, 6, 17, 20, 21, 22, 23, 24, 25}
    opts = dict(batch_size=5, shuffle=True, seed=11, on_error=policy, max_failures=N, item_concurrency=3)
    full_loader = DataLoader(Counted(bad=bad), **opts)
    full = [as_list(b) for b in full_loader]
    full_failures = full_loader.failures
    first = DataLoader(Counted(bad=bad), num_workers=workers[0], **opts)
    it = iter(first)
    head = [as_list(next(it)) for _ in range(2)]
    state = json_roundtrip(first.state_dict())
    it.close()
    second = DataLoader(Counted(bad=bad), num_workers=workers[1], **opts)
    second.load_state_dict(state)
    assert head + [as_list(b) for b in second] == full
    assert first.failures + second.failures == full_failures


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_an_async_items_interrupt_passes_through_the_policy(policy, num_workers):
    assert substitute_index(0, 0, 0, 1, 0, N) != 13  # item 1's substitute is not the interrupting item
    loader = DataLoader(Counted(bad={1}, interrupt=13), batch_size=4, num_workers=num_workers, on_error=policy,
                        item_concurrency=4, seed=0)
    it = iter(loader)
    next(it), next(it), next(it)
    with pytest.raises(KeyboardInterrupt):
        next(it)
    assert loader.state_dict()["yielded"] == 3
    it.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_async_batch_whose_substitutes_all_fail_fails_as_a_plain_datasets_does(num_workers):
    loader = DataLoader(Counted(bad=set(range(N))), batch_size=2, on_error="replace", max_failures=1000,
                        num_workers=num_workers, item_concurrency=2)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="batch 0 of epoch 0, place 0: 16 substitutes failed in a row") as info:
        next(it)
    assert isinstance(info.value.__cause__, OSError)
    # item 0 and its 16 substitutes (place 1's, fetched in the same rounds, are not its records)
    assert [r.index for r in loader.failures][0] == 0 and len(loader.failures) == 17
    it.close()
