"""``num_workers="auto"``: the probe's rules, the gate, and outputs equal to fixed counts."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader, get_worker_info
from dataloader._engine import autotune
from dataloader._engine.autotune import AutoTuner, EpochTune, auto_max_workers
from tests._support import RangeStream, SleepyDataset

pytestmark = pytest.mark.timeout(60)


class FakeConsumer:
    wait_ns = 0
    count = 0  # batches delivered (read by EpochTune.finished)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(autotune.time, "perf_counter", c)
    return c


def inline_start(tuner, consumer, clock):
    """A fresh probe's first epoch, inline, at its first batch (its start-up is not measured)."""
    tune = tuner.for_epoch(consumer, inline=True)
    clock.t += 10 * autotune.AUTO_PERIOD_S  # start-up: slow, and not measured
    tune.tick(1)
    assert tune.active == 0 and not tuner.settled
    return tune, 1


def period(tune, consumer, clock, delivered, batches_per_s, wait_share):
    """One measuring period of AUTO_PERIOD_S in which the consumer got ``batches_per_s``."""
    seconds = autotune.AUTO_PERIOD_S * 1.25  # whole periods despite float rounding
    clock.t += seconds
    consumer.wait_ns += int(wait_share * seconds * 1e9)
    delivered += max(int(batches_per_s * seconds), autotune.AUTO_MIN_BATCHES)
    tune.tick(delivered)
    return delivered


def test_auto_admits_workers_while_the_consumer_waits_and_throughput_rises(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune = tuner.for_epoch(consumer, inline=False)
    assert tune.active == 1
    n = period(tune, consumer, clock, 0, 1000, 0.5)  # starved: admit worker 2
    assert tune.active == 2
    n = period(tune, consumer, clock, n, 1500, 0.5)  # skipped: the new worker ramps up
    assert tune.active == 2
    n = period(tune, consumer, clock, n, 1900, 0.3)  # +90%: keep it, admit worker 3
    assert tune.active == 3 and not tuner.settled
    n = period(tune, consumer, clock, n, 1900, 0.3)  # skipped
    n = period(tune, consumer, clock, n, 1950, 0.2)  # +3%: not worth a worker, back to 2
    assert tune.active == 2 and tuner.settled and tuner.active == 2
    period(tune, consumer, clock, n, 100, 0.9)  # settled: no more probing
    assert tune.active == 2
    assert tuner.for_epoch(consumer, inline=False).active == 2  # the next epoch starts settled


def test_auto_settles_when_the_consumer_does_not_wait(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune = tuner.for_epoch(consumer, inline=False)
    period(tune, consumer, clock, 0, 1000, 0.01)
    assert tune.active == 1 and tuner.settled


def test_auto_never_passes_its_cap(clock):
    tuner, consumer = AutoTuner(cap=2), FakeConsumer()
    tune = tuner.for_epoch(consumer, inline=False)
    n = period(tune, consumer, clock, 0, 1000, 0.9)
    n = period(tune, consumer, clock, n, 1000, 0.9)
    n = period(tune, consumer, clock, n, 3000, 0.9)
    assert tune.active == 2 and tuner.settled


def test_ticks_before_the_end_of_a_period_change_nothing(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune = tuner.for_epoch(consumer, inline=False)
    for n in range(1, 200):
        tune.tick(n)  # the clock does not move: never a whole period
    assert tune.active == 1 and not tuner.settled


def test_auto_starts_inline_tries_one_worker_and_keeps_inline_when_it_is_faster(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune, n = inline_start(tuner, consumer, clock)  # the consumer builds the batches itself
    n = period(tune, consumer, clock, n, 1000, 0.0)  # inline never "waits": a worker is tried anyway
    assert tune.active == 1 and not tuner.settled
    n = period(tune, consumer, clock, n, 500, 0.5)  # skipped: the worker ramps up
    n = period(tune, consumer, clock, n, 1020, 0.5)  # +2%, but one worker cannot build in parallel
    assert tune.active == 2 and not tuner.settled
    n = period(tune, consumer, clock, n, 500, 0.5)  # skipped
    n = period(tune, consumer, clock, n, 1030, 0.5)  # +3%: the hand-off costs what it saves
    assert tune.active == 0 and tuner.settled and tuner.active == 0
    assert tuner.for_epoch(consumer, inline=True).active == 0  # later epochs stay inline
    assert tuner.for_epoch(consumer, inline=False).active == 1  # never inline where not allowed


def test_auto_leaves_inline_when_workers_are_faster(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune, n = inline_start(tuner, consumer, clock)
    n = period(tune, consumer, clock, n, 1000, 0.0)
    n = period(tune, consumer, clock, n, 1000, 0.5)  # skipped
    n = period(tune, consumer, clock, n, 1800, 0.5)  # one worker: +80%, and the consumer waits
    assert tune.active == 2 and not tuner.settled


def test_auto_returns_inline_when_one_worker_neither_gains_nor_waits(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune, n = inline_start(tuner, consumer, clock)
    n = period(tune, consumer, clock, n, 1000, 0.0)
    n = period(tune, consumer, clock, n, 1000, 0.0)  # skipped
    period(tune, consumer, clock, n, 1010, 0.01)  # one worker, no gain and no waiting
    assert tune.active == 0 and tuner.settled


def test_an_epoch_that_ends_before_the_probe_settles_hands_it_to_the_next(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    first, n = inline_start(tuner, consumer, clock)
    period(first, consumer, clock, n, 1000, 0.0)  # inline measured: one worker next
    assert first.active == 1 and not tuner.settled  # ... and the epoch ends here
    second = tuner.for_epoch(consumer, inline=True)
    assert second.active == 1  # not inline again: the probe goes on
    period(second, consumer, clock, 0, 1010, 0.5)  # no better than inline's 1000: two next
    assert second.active == 2
    third = tuner.for_epoch(consumer, inline=True)
    period(third, consumer, clock, 0, 1900, 0.5)
    assert third.active == 3 and not tuner.settled


def test_auto_max_workers_is_the_usable_cpus_capped():
    assert 1 <= auto_max_workers() <= autotune.AUTO_MAX_WORKERS


def test_gate_holds_workers_past_active_until_admitted_or_cancelled():
    class W:
        cancelled = False

    tune = EpochTune(AutoTuner(cap=3), 1, False, FakeConsumer())
    window = W()
    assert tune.admit(0, window)
    got: list[bool] = []
    t = threading.Thread(target=lambda: got.append(tune.admit(2, window)))
    t.start()
    time.sleep(0.05)
    assert not got  # worker 2 waits at the gate
    tune._set(3)
    t.join(10)
    assert got == [True]
    t = threading.Thread(target=lambda: got.append(tune.admit(2, window)))
    tune._set(1)
    t.start()
    window.cancelled = True
    tune.wake()
    t.join(10)
    assert got == [True, False]


@pytest.mark.parametrize("shuffle", [False, True])
def test_auto_gives_the_same_batches_as_fixed_counts(monkeypatch, shuffle):
    monkeypatch.setattr(autotune, "auto_max_workers", lambda: 4)
    monkeypatch.setattr(autotune, "AUTO_PERIOD_S", 0.0)  # decide every batch: workers come and go
    monkeypatch.setattr(autotune, "AUTO_MIN_BATCHES", 1)
    x = np.random.default_rng(3).standard_normal((3000, 5))
    runs = {}
    for nw in (0, 2, "auto"):
        loader = DataLoader(ArrayDataset(x), batch_size=7, shuffle=shuffle, num_workers=nw, seed=11)
        runs[nw] = [[b[0] for b in loader] for _ in range(2)]
        loader.close()
    for nw in (2, "auto"):
        for epoch in range(2):
            assert len(runs[nw][epoch]) == len(runs[0][epoch])
            for a, b in zip(runs[nw][epoch], runs[0][epoch]):
                np.testing.assert_array_equal(a, b)


def test_auto_grows_past_one_worker_for_items_that_wait(monkeypatch):
    # Items that sleep: a second worker doubles throughput whatever the machine's load.
    monkeypatch.setattr(autotune, "auto_max_workers", lambda: 3)

    # 4 ms an item: long enough that the sleep, not a loaded runner's noise, decides
    loader = DataLoader(SleepyDataset(400, delay_s=0.004), batch_size=2, num_workers="auto")
    tuner = loader._engine.plan.tuner
    for _ in range(3):  # a probe a burst of load spoiled is tried again in the next epoch
        assert sum(len(b) for b in loader) == 400
        if tuner.active >= 2:
            break
    assert loader.num_workers == "auto" and tuner.cap == 3
    assert tuner.active >= 2
    loader.close()


def test_closing_an_auto_epoch_releases_gated_workers_promptly(monkeypatch):
    monkeypatch.setattr(autotune, "auto_max_workers", lambda: 4)
    loader = DataLoader(ArrayDataset(np.zeros((1000, 2))), batch_size=1, num_workers="auto")
    it = iter(loader)
    next(it)
    t = time.monotonic()
    it.close()
    assert time.monotonic() - t < 5.0  # within the close budget: no worker left stuck at the gate
    assert loader._engine.pools._pool.idle()
    assert sum(len(b[0]) for b in loader) == 1000  # the pool serves the next epoch
    loader.close()


def test_auto_options_are_validated():
    with pytest.raises(ValueError, match="IterableDataset"):
        DataLoader(RangeStream(3), num_workers="auto")
    with pytest.raises(ValueError, match="'many'"):
        DataLoader(ArrayDataset(np.zeros(3)), num_workers="many")
    with pytest.raises(TypeError, match=r"int >= 0 or 'auto', got float 2\.0"):
        DataLoader(ArrayDataset(np.zeros(3)), num_workers=2.0)
    with pytest.raises(ValueError, match="prefetch_depth"):
        DataLoader(ArrayDataset(np.zeros(3)), num_workers=1, prefetch_depth="lots")
    loader = DataLoader(ArrayDataset(np.zeros(3)), num_workers=3, prefetch_depth="auto")
    assert loader.prefetch_depth == 3
    assert DataLoader(ArrayDataset(np.zeros(3)), prefetch_depth="auto").prefetch_depth == 2


def _recording_dataset(seen):
    class Recording:
        def __len__(self):
            return 64

        def __getitem__(self, i):
            seen.append((threading.get_ident(), get_worker_info()))
            return i

    return Recording()


def test_auto_builds_inline_on_the_consumer_thread_as_num_workers_0_does(monkeypatch):
    monkeypatch.setattr(autotune, "AUTO_PERIOD_S", 3600.0)  # never decides: stays inline
    seen: list = []
    loader = DataLoader(_recording_dataset(seen), batch_size=4, num_workers="auto")
    assert [int(v) for b in loader for v in b] == list(range(64))
    assert {ident for ident, _ in seen} == {threading.get_ident()}
    assert all(info is None for _, info in seen)  # get_worker_info() is None, as inside next()
    stats = loader.stats
    assert stats.built == 16 and stats.batches == 16  # inline builds are counted
    assert stats.active_workers == 0 and stats.num_workers == loader._engine.plan.tuner.cap
    loader.close()


def test_auto_with_a_worker_init_fn_never_builds_inline(monkeypatch):
    monkeypatch.setattr(autotune, "AUTO_PERIOD_S", 3600.0)
    seen: list = []
    started: list = []
    loader = DataLoader(_recording_dataset(seen), batch_size=4, num_workers="auto",
                        worker_init_fn=started.append)
    assert [int(v) for b in loader for v in b] == list(range(64))
    assert threading.get_ident() not in {ident for ident, _ in seen}
    assert all(info is not None and info.id == 0 for _, info in seen) and started
    loader.close()


@pytest.mark.timeout(30)
def test_auto_with_a_timeout_never_builds_inline_and_times_out_a_slow_batch(monkeypatch):
    # A batch built inside next() cannot time out: with timeout= the epoch starts with a worker.
    monkeypatch.setattr(autotune, "AUTO_PERIOD_S", 3600.0)
    seen: list = []
    loader = DataLoader(_recording_dataset(seen), batch_size=4, num_workers="auto", timeout=30)
    assert [int(v) for b in loader for v in b] == list(range(64))
    assert threading.get_ident() not in {ident for ident, _ in seen}
    release = threading.Event()

    class Stuck:
        def __len__(self):
            return 8

        def __getitem__(self, i):
            if i == 4:
                release.wait(20)
            return np.float64(i)

    slow = DataLoader(Stuck(), batch_size=4, num_workers="auto", timeout=0.2)
    it = iter(slow)
    next(it)
    try:
        with pytest.raises(TimeoutError, match="0.2"):
            next(it)
    finally:
        release.set()
        it.close()
        loader.close()
        slow.close()


@pytest.mark.timeout(30)
def test_dropped_auto_epoch_wakes_its_gated_workers(monkeypatch):
    # An "auto" epoch dropped without close() (a loop left by break) is closed by its
    # finalizer: the workers waiting at the gate must leave at once, not when their wait
    # slice ends (here made longer than the finalizer's bounded wait for them).
    import gc

    monkeypatch.setattr(autotune, "WAIT_SLICE_S", 60.0)
    inside = [0]
    lock = threading.Lock()
    admit = EpochTune.admit

    def counted_admit(self, worker_id, window):
        with lock:
            inside[0] += 1
        try:
            return admit(self, worker_id, window)
        finally:
            with lock:
                inside[0] -= 1

    def gated():  # threads inside EpochTune.admit
        with lock:
            return inside[0]

    monkeypatch.setattr(EpochTune, "admit", counted_admit)
    loader = DataLoader(ArrayDataset(np.arange(64, dtype=np.float32)), batch_size=4, num_workers="auto")
    it = iter(loader)
    next(it)  # inline: every worker waits at the gate
    deadline = time.monotonic() + 5.0
    while not gated() and time.monotonic() < deadline:
        time.sleep(0.001)
    assert gated()
    del it
    gc.collect()
    while gated() and time.monotonic() < deadline + 5.0:
        time.sleep(0.001)
    assert not gated()


def test_auto_settled_inline_runs_later_epochs_without_the_window(monkeypatch):
    from dataloader._engine.iterator import SequentialEpoch

    x = np.arange(40.0).reshape(20, 2)
    loader = DataLoader(ArrayDataset(x), batch_size=3, shuffle=True, seed=5, num_workers="auto")
    loader._engine.plan.tuner._settle(0)
    it = iter(loader)
    assert isinstance(it, SequentialEpoch)
    got = [b[0] for b in it]
    assert loader.stats.active_workers == 0
    fixed = [b[0] for b in DataLoader(ArrayDataset(x), batch_size=3, shuffle=True, seed=5)]
    assert len(got) == len(fixed) == 7
    for a, b in zip(got, fixed):
        np.testing.assert_array_equal(a, b)
    loader.close()


def test_an_epoch_that_ends_within_its_first_period_settles_inline(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune = tuner.for_epoch(consumer, inline=True)
    tune.tick(3)  # 3 batches, no time passed: no period completed
    tune.finished()
    assert tuner.settled and tuner.active == 0
    assert tuner.for_epoch(consumer, inline=True).active == 0


def test_an_epoch_that_ends_within_its_first_period_keeps_its_workers_where_inline_is_not_allowed(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune = tuner.for_epoch(consumer, inline=False)
    assert tune.active == 1
    tune.finished()
    assert tuner.settled and tuner.active == 1


def test_an_epoch_that_measured_a_period_does_not_settle_when_it_ends(clock):
    tuner, consumer = AutoTuner(cap=8), FakeConsumer()
    tune, n = inline_start(tuner, consumer, clock)
    period(tune, consumer, clock, n, 1000, 0.0)  # one period measured: one worker next
    tune.finished()
    assert not tuner.settled and tuner.active == 1


def test_an_epochs_first_period_starts_at_its_first_batch(clock):
    # W4 on 3.11: a second epoch's two workers, measured from the epoch's start (an empty
    # pipeline), looked no faster than inline and the probe settled inline.
    tuner, consumer = AutoTuner(cap=2), FakeConsumer()
    first, n = inline_start(tuner, consumer, clock)
    n = period(first, consumer, clock, n, 1000, 0.0)  # inline: 1000 batches/s; one worker next
    n = period(first, consumer, clock, n, 500, 0.5)  # skipped
    period(first, consumer, clock, n, 1000, 0.5)  # no gain, starved: two next; the epoch ends
    second = tuner.for_epoch(consumer, inline=True)
    assert second.active == 2 and not tuner.settled
    clock.t += 0.2  # 200 ms to the first batch: the pipeline fills
    consumer.wait_ns += int(0.2e9)
    second.tick(1)
    period(second, consumer, clock, 1, 1800, 0.5)  # measured from the first batch: +80%
    assert tuner.settled and tuner.active == 2


def test_an_epoch_of_few_slow_batches_measures_them_instead_of_settling_inline(clock):
    # 4 batches of 40 ms: too few for a period after the first batch (1 + AUTO_MIN_BATCHES),
    # yet 16 periods long; settling inline there kept two workers' 2x from every later epoch.
    tuner, consumer = AutoTuner(cap=2), FakeConsumer()
    tune, n = inline_start(tuner, consumer, clock)
    for consumer.count in range(2, 5):
        clock.t += 0.04
        consumer.wait_ns += int(0.04e9)  # inline: building is the consumer's wait
        tune.tick(consumer.count)
    tune.finished()
    assert not tuner.settled and tuner.active == 1  # inline measured: one worker next
    second = tuner.for_epoch(consumer, inline=True)
    consumer.count = 1
    second.tick(1)
    for consumer.count in range(2, 5):
        clock.t += 0.04
        consumer.wait_ns += int(0.04e9)
        second.tick(consumer.count)
    second.finished()  # one worker no faster than inline, the consumer waits: two next
    assert not tuner.settled and tuner.active == 2
    third = tuner.for_epoch(consumer, inline=True)
    consumer.count = 1
    third.tick(1)
    for consumer.count in range(2, 5):
        clock.t += 0.02
        third.tick(consumer.count)
    third.finished()  # twice as fast, the consumer no longer waits: settled on two
    assert tuner.settled and tuner.active == 2


def test_an_epoch_of_one_batch_settles_however_slow(clock):
    tuner, consumer = AutoTuner(cap=2), FakeConsumer()
    tune, n = inline_start(tuner, consumer, clock)
    clock.t += 1.0
    tune.finished()  # nothing after the first batch to measure
    assert tuner.settled and tuner.active == 0


def test_a_long_epoch_with_nothing_to_measure_settles_the_count_it_ran_with(clock):
    # 2 slow batches: inline, then one worker, measured; two workers then build both at once,
    # the second is ready with the first: not measurable, and no reason to return inline.
    tuner, consumer = AutoTuner(cap=2), FakeConsumer()
    for _ in range(2):
        tune = tuner.for_epoch(consumer, inline=True)
        clock.t += 0.04
        consumer.count = 1
        tune.tick(1)
        clock.t += 0.04
        consumer.wait_ns += int(0.04e9)
        consumer.count = 2
        tune.tick(2)
        tune.finished()
    assert not tuner.settled and tuner.active == 2
    tune = tuner.for_epoch(consumer, inline=True)
    clock.t += 0.04
    consumer.count = 1
    tune.tick(1)
    consumer.count = 2
    tune.tick(2)
    tune.finished()
    assert tuner.settled and tuner.active == 2


def test_short_epochs_settle_inline_and_an_abandoned_epoch_does_not(monkeypatch):
    from dataloader._engine.iterator import SequentialEpoch

    monkeypatch.setattr(autotune, "AUTO_PERIOD_S", 60.0)  # no epoch here lasts a period
    x = np.arange(40.0).reshape(20, 2)
    loader = DataLoader(ArrayDataset(x), batch_size=3, shuffle=True, seed=5, num_workers="auto")
    next(iter(loader))  # peeking at one batch: the epoch is abandoned, not finished
    assert not loader._engine.plan.tuner.settled
    first = [b[0] for b in loader]  # runs to its end within the period
    assert loader._engine.plan.tuner.settled and loader.stats.active_workers == 0
    it = iter(loader)
    assert isinstance(it, SequentialEpoch)  # later epochs run as num_workers=0
    later = [b[0] for b in it]
    fixed = DataLoader(ArrayDataset(x), batch_size=3, shuffle=True, seed=5)
    next(iter(fixed))  # epoch 0, as above
    for got, expected in ((first, [b[0] for b in fixed]), (later, [b[0] for b in fixed])):
        assert len(got) == len(expected) == 7
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
    loader.close()


class _SlowItems:
    """Items that take ``sleep_s`` each (so that "auto" measures periods and moves)."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return np.int64(i)


@pytest.mark.parametrize("source_workers", [0, 2, "auto"])
@pytest.mark.parametrize("taken", [1, 5])
def test_a_resumed_auto_epoch_gives_the_rest_of_the_epoch_and_the_probe_settles(source_workers, taken):
    ds = _SlowItems(40, 0.002)
    fixed = DataLoader(ds, batch_size=2, shuffle=True, seed=9)
    source = DataLoader(ds, batch_size=2, shuffle=True, seed=9, num_workers=source_workers)
    it = iter(source)
    head = [next(it).tolist() for _ in range(taken)]
    state = source.state_dict()
    it.close()
    loader = DataLoader(ds, batch_size=2, shuffle=True, seed=9, num_workers="auto")
    loader.load_state_dict(state)
    assert head + [b.tolist() for b in loader] == [b.tolist() for b in fixed]
    tuner = loader._engine.plan.tuner
    for _ in range(40):  # each epoch measures a period or settles: never unsettled for long
        assert [b.tolist() for b in loader] == [b.tolist() for b in fixed]
        if tuner.settled:
            break
    assert tuner.settled and 0 <= tuner.active <= tuner.cap
    loader.close()
