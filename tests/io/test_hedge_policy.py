"""``dataloader.io.hedge.Hedge`` on its own (no network): the derived delay, the token
bucket, which answer wins, errors, cancellation of the loser, and the arguments."""

from __future__ import annotations

import asyncio
import copy
import pickle

import pytest

from dataloader.io.hedge import HEDGE_MAX_PER_ITEM, HEDGE_MIN_SAMPLES, Hedge, check_hedge


class Requests:
    """``request()`` calls numbered from 0; call ``n`` sleeps ``delays[n]`` s (default 0),
    then returns ``n`` or raises ``errors[n]``; ``cancelled`` lists the calls cancelled."""

    def __init__(self, delays=(), errors=None) -> None:
        self.delays = list(delays)
        self.errors = errors or {}
        self.calls = 0
        self.cancelled: list[int] = []

    async def __call__(self):
        n = self.calls
        self.calls += 1
        try:
            await asyncio.sleep(self.delays[n] if n < len(self.delays) else 0)
        except asyncio.CancelledError:
            self.cancelled.append(n)
            raise
        if n in self.errors:
            raise self.errors[n]
        return n


def run(coro):
    return asyncio.run(coro)


def with_tokens(hedge: Hedge, n: int) -> Hedge:
    """``hedge`` (budget 1.0) after ``n`` items answered at once: ``n`` tokens more, for an
    item that may send ``n + 1`` hedges; its counts' ``requests`` start at ``n``."""
    for _ in range(n):
        run(hedge.run(Requests()))
    return hedge


@pytest.mark.timeout(10)
def test_the_hedge_wins_over_a_slow_first_request_which_is_cancelled():
    hedge, req = Hedge(0.01, budget=1.0), Requests([5.0, 0.0])

    async def main():
        value = await hedge.run(req)
        await asyncio.sleep(0)  # the loser's cancellation is delivered
        return value

    assert run(main()) == 1
    assert req.cancelled == [0]
    assert hedge.counts() == {"requests": 1, "hedges_sent": 1, "hedges_won": 1}


@pytest.mark.timeout(10)
def test_a_fast_first_request_sends_no_hedge():
    hedge, req = Hedge(1.0, budget=1.0), Requests([0.0])
    assert run(hedge.run(req)) == 0
    assert req.calls == 1 and hedge.counts()["hedges_sent"] == 0


@pytest.mark.timeout(10)
def test_a_failed_contender_lets_the_other_answer():
    hedge, req = Hedge(0.01, budget=1.0), Requests([0.05, 0.0], errors={1: ConnectionError("hedge")})
    assert run(hedge.run(req)) == 0  # the hedge failed first: the first request still answers
    assert hedge.counts()["hedges_won"] == 0


@pytest.mark.timeout(10)
def test_when_both_fail_the_first_requests_error_is_the_items():
    errors = {0: FileNotFoundError("first"), 1: PermissionError("hedge")}
    hedge, req = Hedge(0.01, budget=1.0), Requests([0.05, 0.0], errors)
    with pytest.raises(FileNotFoundError, match="first") as info:
        run(hedge.run(req))
    assert info.value.__context__ is None  # chains nothing (HttpDataset's errors chain nothing)


@pytest.mark.timeout(10)
def test_cancelling_the_item_cancels_all_its_requests():
    hedge, req = with_tokens(Hedge(0.01, budget=1.0), 1), Requests([5.0, 5.0, 5.0])

    async def main():
        task = asyncio.ensure_future(hedge.run(req))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)

    run(main())
    assert sorted(req.cancelled) == [0, 1, 2]


@pytest.mark.timeout(10)
def test_the_budget_is_a_token_bucket_of_requests():
    hedge = Hedge(0.001, budget=0.25)

    async def main():
        for _ in range(20):  # every first request slow: each item wants a hedge
            await hedge.run(Requests([0.02, 0.0]))

    run(main())
    counts = hedge.counts()
    assert counts["requests"] == 20 and counts["hedges_sent"] == 5  # 0.25 x 20, never more


@pytest.mark.timeout(10)
def test_auto_derives_the_delay_from_the_latencies_once_it_has_enough():
    hedge = Hedge("auto")
    assert hedge.delay_s() is None
    for i in range(HEDGE_MIN_SAMPLES - 1):
        hedge.record(0.010)
    assert hedge.delay_s() is None  # too few latencies: no hedge yet
    for i in range(200):
        hedge.record(0.010 if i % 20 else 0.500)  # 5% slow: the 95th percentile is still fast
    assert hedge.delay_s() == pytest.approx(0.020)


@pytest.mark.timeout(10)
def test_auto_sends_no_hedge_before_it_has_a_delay():
    hedge = Hedge("auto", budget=1.0)
    req = Requests([0.05])
    assert run(hedge.run(req)) == 0
    assert req.calls == 1 and hedge.counts() == {"requests": 1, "hedges_sent": 0, "hedges_won": 0}


def test_off_and_bad_arguments():
    for off in (0, 0.0, False, None):
        assert check_hedge(off, 0.05) is None
    assert check_hedge(0.1, 0) is None  # no budget: no hedge
    assert check_hedge("auto", 0.05).delay_s() is None
    with pytest.raises(ValueError, match="hedge_delay='soon'"):
        check_hedge("soon", 0.05)
    with pytest.raises(ValueError, match="hedge_delay=-1"):
        check_hedge(-1, 0.05)
    with pytest.raises(ValueError, match="hedge_delay=inf"):
        check_hedge(float("inf"), 0.05)
    with pytest.raises(ValueError, match="hedge_delay=nan"):
        check_hedge(float("nan"), 0.05)
    with pytest.raises(ValueError, match="hedge_delay is an int past a float's range"):  # not a bare OverflowError
        check_hedge(10**400, 0.05)
    with pytest.raises(TypeError, match="hedge_delay must be"):
        check_hedge([1], 0.05)
    with pytest.raises(ValueError, match="hedge_budget=1.5"):
        check_hedge("auto", 1.5)
    with pytest.raises(ValueError, match="hedge_budget=-0.1"):
        check_hedge(0, -0.1)
    with pytest.raises(TypeError, match="hedge_budget must be"):
        check_hedge("auto", "5%")


def test_a_delay_in_seconds_is_refused_on_a_dataset_making_ranged_gets():
    # Such a dataset hedges no item: an explicit delay would be silently ignored.
    with pytest.raises(ValueError, match=r"hedge_delay=0.1 with range_parallel_threshold=1048576"):
        check_hedge(0.1, 0.05, range_threshold=1 << 20)
    assert check_hedge("auto", 0.05, range_threshold=1 << 20) is not None  # the default stays quiet
    assert check_hedge(0, 0.05, range_threshold=1 << 20) is None
    pytest.importorskip("aiohttp")
    from dataloader.io import HttpDataset

    with pytest.raises(ValueError, match="hedge_delay=0.1 with range_parallel_threshold=1048576"):
        HttpDataset(["http://127.0.0.1:9/a"], hedge_delay=0.1, range_parallel_threshold=1 << 20)


def test_a_copy_keeps_the_settings_and_starts_afresh():
    hedge = Hedge(0.25, budget=0.1)
    hedge.record(1.0)
    for twin in (pickle.loads(pickle.dumps(hedge)), copy.deepcopy(hedge)):
        assert (twin.fixed_delay_s, twin.budget) == (0.25, 0.1)
        assert twin.counts() == {"requests": 0, "hedges_sent": 0, "hedges_won": 0}


@pytest.mark.timeout(10)
def test_a_winning_hedge_leaves_the_items_task_and_its_timeouts_as_they_were():
    hedge, req = Hedge(0.01, budget=1.0), Requests([5.0, 0.0])

    async def main():
        async with asyncio.timeout(5):  # the item's timeout_s, around the race
            value = await hedge.run(req)
        assert asyncio.current_task().cancelling() == 0  # the hedge's cancellation was taken back
        await asyncio.sleep(0.01)  # no cancellation left pending
        return value

    assert run(main()) == 1
    assert req.cancelled == [0]


@pytest.mark.timeout(10)
def test_the_items_timeout_during_a_race_is_a_timeout():
    hedge, req = with_tokens(Hedge(0.01, budget=1.0), 1), Requests([5.0, 5.0, 5.0])

    async def main():
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await hedge.run(req)
        await asyncio.sleep(0)

    run(main())
    assert sorted(req.cancelled) == [0, 1, 2]


@pytest.mark.timeout(10)
def test_a_slow_hedge_gets_a_second_hedge_one_delay_later_which_wins():
    # 1% of requests slow: a hedge is itself slow once in a hundred; the item is not left to
    # wait the slow first request out.
    hedge, req = with_tokens(Hedge(0.02, budget=1.0), 1), Requests([5.0, 5.0, 0.0])

    async def main():
        value = await hedge.run(req)
        await asyncio.sleep(0)  # the losers' cancellations are delivered
        return value

    assert run(main()) == 2
    assert sorted(req.cancelled) == [0, 1]
    assert hedge.counts() == {"requests": 2, "hedges_sent": 2, "hedges_won": 1}


@pytest.mark.timeout(10)
def test_a_denied_hedge_looks_for_a_token_again_and_one_item_has_at_most_its_tokens():
    hedge, req = Hedge(0.01, budget=1.0), Requests([0.2, 5.0, 0.0])
    assert run(hedge.run(req)) == 0  # one token (its own request's): one hedge, slow; no second
    assert req.calls == 2 and hedge.counts()["hedges_sent"] == 1


@pytest.mark.timeout(10)
def test_no_item_gets_more_than_the_hedges_per_item_bound():
    hedge = with_tokens(Hedge(0.01, budget=1.0), HEDGE_MAX_PER_ITEM + 2)
    req = Requests([0.3] * (HEDGE_MAX_PER_ITEM + 2))
    assert run(hedge.run(req)) == 0  # every contender slow: the first request still answers first
    assert req.calls == 1 + HEDGE_MAX_PER_ITEM
    assert hedge.counts()["hedges_sent"] == HEDGE_MAX_PER_ITEM


@pytest.mark.timeout(10)
def test_when_the_first_request_fails_the_first_hedge_to_answer_is_the_item():
    errors = {0: ConnectionError("first"), 1: ConnectionError("hedge 1")}
    hedge, req = with_tokens(Hedge(0.01, budget=1.0), 1), Requests([0.1, 0.0, 0.15], errors)
    assert run(hedge.run(req)) == 2  # hedge 1 failed at once, hedge 2 answers after the first failed
    assert hedge.counts() == {"requests": 2, "hedges_sent": 2, "hedges_won": 1}
    errors = {0: FileNotFoundError("first"), 1: PermissionError("hedge 1"), 2: PermissionError("hedge 2")}
    hedge, req = with_tokens(Hedge(0.01, budget=1.0), 1), Requests([0.1, 0.0, 0.0], errors)
    with pytest.raises(FileNotFoundError, match="first"):
        run(hedge.run(req))  # all failed: the first request's error
    assert req.calls == 3
