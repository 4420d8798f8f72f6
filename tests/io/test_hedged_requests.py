"""Hedged GETs seen from the server: a slow request gets a second one, the first answer
wins and the other is cancelled (its connection closed); never a duplicate or a missing
item; the budget bounds the extra requests; hedging off sends exactly one request per
item.  aiohttp (the ``remote`` extra) is needed: skipped without it."""

from __future__ import annotations

import itertools
import time

import pytest

pytest.importorskip("aiohttp")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests._hedge_server import SlowServer  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.io import HttpDataset, Retry  # noqa: E402
from dataloader.io.hedge import HEDGE_MAX_PER_ITEM  # noqa: E402

FAST = Retry(max_attempts=1, attempt_timeout_s=10.0)
# A delay no fast request reaches, even on a loaded 2-core machine, where the exact counts matter.
SLOW_S = 0.5
EXAMPLES = itertools.count()


@pytest.fixture(scope="module")
def server():
    s = SlowServer()
    yield s
    s.close()


def keys(tag: str, n: int) -> list[str]:
    return [f"{tag}-{i}" for i in range(n)]


def load(ds, **kw):
    kw.setdefault("batch_size", 4)
    with DataLoader(ds, collate_fn=list, **kw) as loader:
        batches = list(loader)
        return [x for b in batches for x in b], loader.stats


def wait_until(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


@pytest.mark.timeout(60)
def test_a_slow_request_is_hedged_the_hedge_wins_and_the_slow_one_is_cancelled(server):
    names = keys("win", 8)
    server.slow[names[3]] = (1, 15.0)  # its first request would take 15 s
    ds = HttpDataset([server.url(k) for k in names], retry=FAST, hedge_delay=SLOW_S, hedge_budget=1.0)
    items, stats = load(ds, num_workers=1, item_concurrency=4)
    assert items == [k.encode() for k in names]
    assert [server.counts[k] for k in names] == [1, 1, 1, 2, 1, 1, 1, 1]
    assert wait_until(lambda: server.cancelled.get(names[3]) == 1)  # the slow one, closed
    assert (stats.hedges_sent, stats.hedges_won) == (1, 1)
    assert ds.request_counts() == {"requests": 8, "hedges_sent": 1, "hedges_won": 1}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("off", [0, 0.0, False, None])
def test_hedging_off_sends_exactly_one_request_per_item(server, off):
    names = keys(f"off{off!r}", 6)
    server.slow[names[2]] = (1, 0.3)
    ds = HttpDataset([server.url(k) for k in names], retry=FAST, hedge_delay=off, hedge_budget=1.0)
    assert ds.hedge is None
    items, stats = load(ds, num_workers=2, item_concurrency=4)
    assert items == [k.encode() for k in names]
    assert [server.counts[k] for k in names] == [1] * 6
    assert server.cancelled.get(names[2]) is None
    assert (stats.hedges_sent, stats.hedges_won) == (0, 0)


@pytest.mark.timeout(60)
def test_the_budget_bounds_the_extra_requests(server):
    names = keys("budget", 40)
    for k in names:
        server.slow[k] = (1, 0.3)  # every first request is slow: every item wants a hedge
    ds = HttpDataset([server.url(k) for k in names], retry=FAST, hedge_delay=0.02, hedge_budget=0.1)
    items, stats = load(ds, batch_size=8, num_workers=1, item_concurrency=8)
    assert items == [k.encode() for k in names]
    assert 1 <= stats.hedges_sent <= 0.1 * len(names)
    # a hedge that lost before it connected never reached the server
    assert len(names) < sum(server.counts[k] for k in names) <= len(names) + stats.hedges_sent


@pytest.mark.timeout(60)
def test_the_retry_deadline_bounds_each_hedged_request(server):
    name = "deadline-0"
    server.slow[name] = (2, 15.0)  # the first request and its hedge are both slow
    retry = Retry(max_attempts=1, attempt_timeout_s=1.0)
    ds = HttpDataset([server.url(name)], retry=retry, hedge_delay=0.2, hedge_budget=1.0)
    with DataLoader(ds, batch_size=1, collate_fn=list) as loader:
        with pytest.raises(TimeoutError, match="attempt 1 of 1 timed out"):
            next(iter(loader))  # the first request's time-out: the item's error without a hedge
    assert server.counts[name] == 2
    assert wait_until(lambda: server.cancelled.get(name) == 2)  # both closed at their deadline


@pytest.mark.timeout(120)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slow=st.sets(st.integers(0, 15), max_size=6), workers=st.sampled_from([0, 2]),
       concurrency=st.sampled_from([1, 4]))
def test_outputs_under_hedging_are_those_without_it(server, slow, workers, concurrency):
    names = keys(f"prop{next(EXAMPLES)}", 16)  # new keys per example: the server counts per key
    for i in slow:
        server.slow[names[i]] = (1, 15.0)
    ds = HttpDataset([server.url(k) for k in names], retry=FAST, hedge_delay=0.03, hedge_budget=1.0)
    items, stats = load(ds, num_workers=workers, item_concurrency=concurrency, prefetch_depth=2)
    assert items == [k.encode() for k in names]  # each item once, in order, whichever answer won
    assert stats.hedges_won <= stats.hedges_sent >= sum(server.counts[k] - 1 for k in names)
    assert all(server.counts[k] <= 1 + HEDGE_MAX_PER_ITEM for k in names)
    assert {names.index(k) for k in names if server.counts[k] >= 2} >= slow


@pytest.mark.timeout(60)
def test_object_store_gets_are_hedged_and_the_slow_one_is_cancelled(server):
    pytest.importorskip("obstore")  # the remote extra's object-store client
    from dataloader.io import ObjectStoreDataset

    names = keys("obj", 6)
    server.slow[names[2]] = (1, 15.0)
    ds = ObjectStoreDataset(names, url="gs://b", retry=FAST, base_url=server.endpoint, skip_signature=True,
                            client_options={"allow_http": True}, hedge_delay=SLOW_S, hedge_budget=1.0)
    items, stats = load(ds, batch_size=3, item_concurrency=4)
    assert items == [k.encode() for k in names]
    assert [server.counts[k] for k in names] == [1, 1, 2, 1, 1, 1]
    assert wait_until(lambda: server.cancelled.get(names[2]) == 1)  # obstore drops the request: closed
    assert (stats.hedges_sent, stats.hedges_won) == (1, 1)


@pytest.mark.timeout(60)
def test_stats_count_each_epochs_own_hedges(server):
    names = keys("epochs", 4)
    server.slow[names[1]] = (1, 15.0)  # slow in the first epoch only
    ds = HttpDataset([server.url(k) for k in names], retry=FAST, hedge_delay=SLOW_S, hedge_budget=1.0)
    with DataLoader(ds, batch_size=2, item_concurrency=2, collate_fn=list) as loader:
        assert len(list(loader)) == 2
        first = loader.stats
        assert len(list(loader)) == 2
        second = loader.stats
    assert (first.hedges_sent, first.hedges_won) == (1, 1)
    assert "hedged requests sent/won" in first.table()
    assert (second.hedges_sent, second.hedges_won) == (0, 0)
    assert ds.request_counts() == {"requests": 8, "hedges_sent": 1, "hedges_won": 1}
