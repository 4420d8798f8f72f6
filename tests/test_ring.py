"""The claim window + reorder ring primitive (dataloader._native._ring)."""

from __future__ import annotations

import threading
import time

import pytest

from dataloader._native._ring import Window


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="size=0"):
        Window(0)


def test_publish_claim_complete_wait_release_in_order():
    w = Window(3)
    assert [w.publish() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="window full"):
        w.publish()
    assert [w.claim() for _ in range(3)] == [0, 1, 2]
    w.complete(2)
    assert w.wait(0, timeout_s=0.01) == 0  # batch 0 not ready yet: times out
    w.complete(0)
    assert w.wait(0) == 1
    w.release(0)
    assert w.base == 1
    assert w.publish() == 3  # the window moved by one
    w.complete(1)
    w.release(1)
    w.release(2)
    assert w.base == 3


def test_release_rejects_batches_not_ready_or_outside():
    w = Window(2)
    w.publish()
    w.claim()
    with pytest.raises(ValueError, match="not ready"):
        w.release(0)
    with pytest.raises(ValueError, match="outside"):
        w.release(5)
    with pytest.raises(ValueError, match="never claimed"):
        w.complete(1)


def test_wait_any_returns_completion_order_and_base_skips_taken():
    w = Window(4)
    for _ in range(4):
        w.publish()
        w.claim()
    w.complete(2)
    assert w.wait_any() == 2
    w.release(2)
    assert w.base == 0  # 0 and 1 are still in flight
    w.complete(0)
    w.complete(1)
    assert w.wait_any() == 0
    w.release(0)
    w.release(1)
    assert w.base == 3  # 0, 1, 2 taken


@pytest.mark.timeout(10)
def test_finish_and_cancel_wake_sleeping_workers():
    w = Window(2)
    got = []
    t = threading.Thread(target=lambda: got.append(w.claim()))
    t.start()
    time.sleep(0.05)
    w.finish()
    t.join(5)
    assert got == [-1]
    w2 = Window(2)
    t2 = threading.Thread(target=lambda: got.append(w2.claim()))
    t2.start()
    time.sleep(0.05)
    w2.cancel()
    t2.join(5)
    assert got == [-1, -1]
    assert w2.cancelled


@pytest.mark.timeout(10)
def test_wait_returns_minus_one_when_cancelled_from_another_thread():
    w = Window(1)
    w.publish()
    threading.Timer(0.05, w.cancel).start()
    assert w.wait(0) == -1


@pytest.mark.timeout(10)
def test_wait_idle_counts_active_workers():
    w = Window(1)
    w.enter(2)
    assert w.wait_idle(0.01) is False
    w.leave()
    threading.Timer(0.05, w.leave).start()
    assert w.wait_idle(5) is True
    assert w.active == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers,size", [(1, 1), (4, 2), (4, 7)])
def test_many_workers_each_batch_claimed_once_and_delivered_in_order(num_workers, size):
    n = 5000
    w = Window(size)
    results: list = [None] * size
    claims: list[list[int]] = [[] for _ in range(num_workers)]

    def worker(i):
        while (k := w.claim()) >= 0:
            claims[i].append(k)
            results[k % size] = k * 10
            w.complete(k)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(num_workers)]
    for t in threads:
        t.start()
    out = []
    published = 0
    while published < min(size, n):
        w.publish()
        published += 1
    for k in range(n):
        assert w.wait(k, timeout_s=10) == 1
        out.append(results[k % size])
        w.release(k)
        assert w.published - w.base <= size
        if published < n:
            w.publish()
            published += 1
    w.finish()
    for t in threads:
        t.join(10)
    assert out == [k * 10 for k in range(n)]
    assert sorted(k for c in claims for k in c) == list(range(n))


@pytest.mark.timeout(20)
def test_a_waiting_consumer_wakes_a_sleeping_worker_below_the_wake_threshold():
    # publish() wakes a sleeping worker only once half the window is claimable; a consumer
    # that waits must wake it itself, or the batch would sit until the worker's 1 s re-check.
    w = Window(8)
    w.publish()
    sleeping = threading.Event()

    def worker():
        while (k := w.claim()) >= 0:
            w.complete(k)
            sleeping.set()

    t = threading.Thread(target=worker)
    t.start()
    assert w.wait(0, timeout_s=5) == 1
    w.release(0)
    assert sleeping.wait(5)
    time.sleep(0.05)  # let the worker go back to sleep on an empty window
    for k in range(1, 4):  # 3 < threshold 4: publish alone does not wake it
        w.publish()
        start = time.monotonic()
        assert w.wait(k, timeout_s=0.5) == 1, "the consumer's wait did not wake the worker"
        assert time.monotonic() - start < 0.5
        w.release(k)
    w.finish()
    t.join(5)
