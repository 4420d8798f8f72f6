"""``Retry.run_async(..., deadline=)``: the item's bound (``HttpDataset``'s ``timeout_s``) kept
by each attempt's own timer, so that an item arms one timer, not two.

At the deadline the item fails with a plain ``TimeoutError`` (no message: the dataset names its
``timeout_s``), never retried, whether an attempt or a backoff was running; before it,
``attempt_timeout_s`` times attempts out and retries them as without a deadline.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from dataloader.io.retry import AttemptTimeout, Retry


def run(retry: Retry, attempt, deadline_in_s: float | None, transient=lambda exc: True):
    async def main():
        deadline = None if deadline_in_s is None else asyncio.get_running_loop().time() + deadline_in_s
        return await retry.run_async(attempt, transient, "item x", deadline)

    return asyncio.run(main())


def sleeper(calls: list[float], seconds: float):
    async def attempt():
        calls.append(time.monotonic())
        await asyncio.sleep(seconds)
        return "done"

    return attempt


@pytest.mark.timeout(10)
def test_an_attempt_still_running_at_the_deadline_fails_the_item_with_a_plain_timeout_error():
    calls: list[float] = []
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        run(Retry(max_attempts=5, attempt_timeout_s=30.0), sleeper(calls, 10), 0.1)
    assert type(info.value) is TimeoutError and str(info.value) == ""  # not AttemptTimeout: final
    assert len(calls) == 1 and 0.09 <= time.monotonic() - t0 < 5


@pytest.mark.timeout(10)
def test_attempt_timeouts_before_the_deadline_are_retried_as_without_one():
    calls: list[float] = []
    retry = Retry(max_attempts=3, initial_backoff_s=0, max_backoff_s=0, attempt_timeout_s=0.05)
    with pytest.raises(AttemptTimeout, match="attempt 3 of 3 timed out"):
        run(retry, sleeper(calls, 10), 30.0)
    assert len(calls) == 3


@pytest.mark.timeout(10)
def test_the_attempt_that_the_deadline_cuts_short_ends_the_retries():
    calls: list[float] = []
    retry = Retry(max_attempts=10, initial_backoff_s=0, max_backoff_s=0, attempt_timeout_s=0.08)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        run(retry, sleeper(calls, 10), 0.2)  # attempts end at 0.08, 0.16, then the deadline at 0.2
    assert type(info.value) is TimeoutError
    assert len(calls) == 3 and time.monotonic() - t0 < 5


@pytest.mark.timeout(10)
def test_a_backoff_past_the_deadline_waits_only_to_it_and_starts_no_attempt():
    calls: list[float] = []

    async def failing():
        calls.append(time.monotonic())
        raise ConnectionError("refused")

    retry = Retry(max_attempts=5, initial_backoff_s=5.0, max_backoff_s=5.0, jitter=False)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError) as info:
        run(retry, failing, 0.15)
    waited = time.monotonic() - t0
    assert type(info.value) is TimeoutError and len(calls) == 1 and 0.14 <= waited < 2


@pytest.mark.timeout(10)
def test_a_final_error_and_a_value_come_back_as_without_a_deadline():
    async def final():
        raise PermissionError("403")

    with pytest.raises(PermissionError, match="403"):
        run(Retry(), final, 30.0, transient=lambda exc: False)
    assert run(Retry(attempt_timeout_s=None), sleeper([], 0), 30.0) == "done"
    assert run(Retry(attempt_timeout_s=None), sleeper([], 0), None) == "done"


@pytest.mark.timeout(10)
def test_the_deadline_alone_bounds_attempts_without_an_attempt_timeout():
    calls: list[float] = []
    with pytest.raises(TimeoutError) as info:
        run(Retry(attempt_timeout_s=None), sleeper(calls, 10), 0.05)
    assert type(info.value) is TimeoutError and len(calls) == 1


@pytest.mark.timeout(10)
def test_a_cancellation_from_outside_stays_a_cancellation():
    async def main():
        deadline = asyncio.get_running_loop().time() + 30.0
        task = asyncio.ensure_future(Retry().run_async(sleeper([], 10), lambda e: True, "x", deadline))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


@pytest.mark.timeout(10)
def test_an_attempts_own_timeout_error_is_an_attempt_timeout_retried_not_the_deadline():
    calls: list[float] = []

    async def gives_up():
        calls.append(time.monotonic())
        raise TimeoutError("the attempt's own")

    retry = Retry(max_attempts=2, initial_backoff_s=0, max_backoff_s=0, attempt_timeout_s=None)
    with pytest.raises(AttemptTimeout, match="attempt 2 of 2 timed out"):
        run(retry, gives_up, 30.0)
    assert len(calls) == 2
