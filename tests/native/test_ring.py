"""The claim window + reorder ring primitive (dataloader._native._ring)."""

from __future__ import annotations

import threading
import time

import pytest

from dataloader._native._ring import Window
from dataloader._native._status import Status

CANCELLED, END, TIMED_OUT = Status.CANCELLED, Status.END, Status.TIMED_OUT


def test_size_must_be_positive_and_bounded():
    with pytest.raises(ValueError, match="size=0"):
        Window(0)
    with pytest.raises(ValueError, match="must be <="):
        Window(2**62)  # would overflow the slot allocation: an error, not an abort


def test_publish_claim_complete_wait_release_in_order():
    w = Window(3)
    assert [w.publish() for _ in range(3)] == [0, 1, 2]
    with pytest.raises(RuntimeError, match="window full"):
        w.publish()
    assert [w.claim() for _ in range(3)] == [0, 1, 2]
    w.complete(2)
    assert w.wait(0, timeout_s=0.01) == TIMED_OUT  # batch 0 not ready yet
    w.complete(0)
    assert w.wait(0) == 0  # ready: its batch number
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
def test_wait_returns_cancelled_when_cancelled_from_another_thread():
    w = Window(1)
    w.publish()
    threading.Timer(0.05, w.cancel).start()
    assert w.wait(0) == CANCELLED


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
        assert w.wait(k, timeout_s=10) == k
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
    assert w.wait(0, timeout_s=5) == 0
    w.release(0)
    assert sleeping.wait(5)
    time.sleep(0.05)  # let the worker go back to sleep on an empty window
    for k in range(1, 4):  # 3 < threshold 4: publish alone does not wake it
        w.publish()
        start = time.monotonic()
        assert w.wait(k, timeout_s=0.5) == k, "the consumer's wait did not wake the worker"
        assert time.monotonic() - start < 0.5
        w.release(k)
    w.finish()
    t.join(5)


# -- tagged windows (owner per batch: IterableDataset streams) ---------------------------------


def test_tagged_batches_are_claimed_only_by_their_owner_in_increasing_order():
    w = Window(4, owners=2)
    assert w.owners == 2
    assert [w.publish(o) for o in (1, 0, 1, 1)] == [0, 1, 2, 3]
    assert [w.claim(1), w.claim(1), w.claim(1)] == [0, 2, 3]
    assert w.claim(0) == 1
    assert w.claimed == 4
    w.finish()
    assert w.claim(0) == END and w.claim(1) == END


def test_tagged_claim_never_mistakes_a_reused_slot_for_an_earlier_batch():
    # Worker 0's cursor lags behind while worker 1's batches go round the ring: slot 0 is
    # reused for batch 2 (owner 0), which must be claimed as 2, not as the taken batch 0.
    w = Window(2, owners=2)
    w.publish(1)
    w.publish(1)
    for k in (0, 1):
        assert w.claim(1) == k
        w.complete(k)
        assert w.wait(k) == k
        w.release(k)
    assert w.publish(0) == 2
    assert w.claim(0) == 2


def test_owner_and_worker_id_must_fit_the_window():
    with pytest.raises(ValueError, match="owner"):
        Window(2).publish(0)
    tagged = Window(2, owners=2)
    with pytest.raises(ValueError, match="owner"):
        tagged.publish(-1)
    with pytest.raises(ValueError, match="owner"):
        tagged.publish(2)
    with pytest.raises(ValueError, match="worker_id"):
        tagged.claim(5)
    with pytest.raises(ValueError, match="owners"):
        Window(2, owners=-1)


@pytest.mark.timeout(30)
def test_a_tagged_publish_wakes_its_sleeping_owner_and_cancel_wakes_every_owner():
    w = Window(4, owners=3)
    got = {0: [], 1: [], 2: []}

    def worker(i):
        while (k := w.claim(i)) >= 0:
            got[i].append(k)
            w.complete(k)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.05)  # all three asleep in claim()
    assert w.publish(2) == 0
    assert w.wait(0, timeout_s=0.5) == 0, "the owner was not woken by its publish"
    w.release(0)
    w.cancel()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert got == {0: [], 1: [], 2: [0]}
    assert w.publish(0) == CANCELLED


def test_try_claim_names_why_it_claimed_nothing():
    w = Window(2)
    assert w.try_claim() == Status.EMPTY  # nothing published
    w.publish()
    assert w.try_claim() == 0
    assert w.try_claim() == Status.EMPTY  # every published batch is claimed
    w.publish()
    w.cancel()
    assert w.try_claim() == Status.CANCELLED
