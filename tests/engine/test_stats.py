"""``DataLoader.stats``: what one epoch records, for map-style and iterable epochs."""

from __future__ import annotations

import math
import re
import threading
import time

import numpy as np
import pytest

from tests._support import RecordingDataset, run_python
from dataloader import DataLoader, IterableDataset, LoaderStats
from dataloader._engine import stats as stats_mod
from dataloader._native._stats import PAGE_INTERVALS, ConsumerRecorder, Recorder, now_ns
from dataloader.dataset import ArrayDataset

pytestmark = pytest.mark.timeout(60)

SLEEP_S = 0.002


class Range(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(np.arange(self.n))


def slow_collate(items):
    time.sleep(SLEEP_S)
    return np.stack(items)


class SlowBatchDataset:
    """``__getitems__`` that sleeps per batch; items are their index."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        return np.int64(i)

    def __getitems__(self, indices):
        time.sleep(SLEEP_S)
        return [np.int64(i) for i in indices]


def slow_transform(item):
    time.sleep(SLEEP_S / 4)
    return item


def test_stats_is_none_before_the_first_epoch():
    assert DataLoader(ArrayDataset(np.zeros((4, 2))), batch_size=2).stats is None


@pytest.mark.parametrize("num_workers", [0, 1, 3])
def test_stats_count_every_batch_delivered_and_built(num_workers):
    loader = DataLoader(ArrayDataset(np.arange(100.0)), batch_size=7, num_workers=num_workers, seed=0)
    for _ in range(2):
        assert sum(len(b[0]) for b in loader) == 100
    s = loader.stats
    assert isinstance(s, LoaderStats)
    assert (s.epoch, s.num_workers, s.active_workers, s.batches, s.built) == (1, num_workers, num_workers, 15, 15)
    assert s.builds.shape == (15, 2) and s.waits.shape == (15, 2)
    assert np.all(s.builds[:, 1] >= s.builds[:, 0]) and np.all(s.waits[:, 1] >= s.waits[:, 0])
    assert 0 <= s.wait_s <= s.elapsed_s
    assert s.busy_s == pytest.approx(s.fetch_s + s.transform_s + s.collate_s)
    assert list(s.latency_s) == [50, 90, 99, 100]
    values = list(s.latency_s.values())
    assert values == sorted(values) and values[-1] == pytest.approx(np.max(s.builds[:, 1] - s.builds[:, 0]))


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stats_attribute_time_to_the_stage_that_spent_it(num_workers):
    # Sleeps give lower bounds on each stage (never an upper bound: the machine may be slow).
    loader = DataLoader(SlowBatchDataset(), batch_size=4, num_workers=num_workers, collate_fn=slow_collate)
    list(loader)
    s = loader.stats
    assert s.fetch_s >= 10 * SLEEP_S * 0.9
    assert s.collate_s >= 10 * SLEEP_S * 0.9
    assert s.transform_s == 0.0
    loader = DataLoader(SlowBatchDataset(), batch_size=4, num_workers=num_workers, transform=slow_transform)
    list(loader)
    assert loader.stats.transform_s >= 40 * SLEEP_S / 4 * 0.9


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stats_cover_iterable_epochs(num_workers):
    loader = DataLoader(Range(30), batch_size=4, num_workers=num_workers, collate_fn=slow_collate)
    batches = list(loader)
    s = loader.stats
    assert s.batches == len(batches)  # an ended stream is not a batch
    assert s.collate_s >= len(batches) * SLEEP_S * 0.9


def test_in_flight_stays_within_the_window():
    loader = DataLoader(ArrayDataset(np.arange(200.0)), batch_size=2, num_workers=2, prefetch_depth=3)
    for _ in loader:
        time.sleep(0.0005)  # a slow consumer: workers fill the window
    s = loader.stats
    assert 0 <= s.in_flight_min <= s.in_flight_mean <= s.in_flight_max <= 5


def test_sequential_epoch_has_nothing_in_flight_and_nan_before_a_batch():
    loader = DataLoader(ArrayDataset(np.arange(10.0)), batch_size=5)
    it = iter(loader)
    s = loader.stats
    assert s.batches == 0 and math.isnan(s.in_flight_mean) and s.latency_s == {} and s.elapsed_s == 0.0
    list(it)
    assert loader.stats.in_flight_max == 0


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_failed_batch_is_counted_as_delivered_and_built(num_workers):
    loader = DataLoader(RecordingDataset(12, fail={5}), batch_size=4, num_workers=num_workers)
    it = iter(loader)
    next(it)
    with pytest.raises(KeyError):
        next(it)
    next(it)
    s = loader.stats
    assert (s.batches, s.built) == (3, 3)


def test_rings_keep_only_the_last_samples_per_thread(monkeypatch):
    monkeypatch.setattr(stats_mod, "STATS_SAMPLES", 1000)  # rounded up to one page
    # 3 pages of batches: of the two threads that build them (below), one builds more than a page.
    n = 3 * PAGE_INTERVALS
    loader = DataLoader(ArrayDataset(np.arange(float(n))), batch_size=1, num_workers=1)
    list(loader)
    s = loader.stats
    assert (s.batches, s.built) == (n, n)
    # The worker and the consumer (which builds native batches itself while its next one is not
    # ready) each keep their last PAGE_INTERVALS builds.
    kept = sum(min(r.batches, PAGE_INTERVALS) for r in loader._engine.last_stats.workers)
    assert s.builds.shape == (kept, 2) and s.waits.shape == (PAGE_INTERVALS, 2)
    assert PAGE_INTERVALS <= kept < n
    assert np.all(np.diff(s.builds[:, 0]) >= 0)  # sorted by start
    assert s.builds[0, 0] >= s.waits[0, 0] - 1.0  # the kept ones are the last ones
    assert s.builds[-1, 1] <= s.elapsed_s


def test_recorders_sum_stages_and_keep_ordered_intervals():
    rec = Recorder(4)
    for _ in range(3):
        rec.start()
        rec.fetched()
        rec.transformed()
        rec.done()
    rec.start()
    rec.failed()
    assert rec.batches == 4 and rec.fetch_ns >= 0 and rec.transform_ns >= 0 and rec.collate_ns >= 0
    pairs = np.asarray(rec.intervals()).reshape(-1, 2)
    assert pairs.shape == (4, 2) and pairs.dtype == np.int64
    assert all(0 <= s <= e <= now_ns() for s, e in pairs.tolist())
    con = ConsumerRecorder(4)
    for flight in (3, 1, 2):
        con.begin()
        con.delivered(flight)
    assert con.count == 3 and con.flight == (1, 3, 6) and 0 < con.last_ns <= now_ns()
    with pytest.raises(ValueError, match="capacity"):
        Recorder(0)


@pytest.mark.timeout(60)
def test_stats_can_be_read_from_another_thread_while_the_epoch_runs():
    loader = DataLoader(ArrayDataset(np.arange(20_000.0)), batch_size=4, num_workers=4)
    done = threading.Event()
    seen: list[int] = []
    errors: list[BaseException] = []

    def reader():
        while not done.is_set():
            try:
                s = loader.stats
                if s is not None:
                    assert s.batches <= s.built + 4
                    seen.append(s.batches)
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    t = threading.Thread(target=reader)
    t.start()
    try:
        assert sum(len(b[0]) for b in loader) == 20_000
    finally:
        done.set()
        t.join(30)
    assert not errors
    assert seen == sorted(seen)  # one epoch: the count only grows
    assert loader.stats.batches == 5000


def test_table_names_every_figure():
    loader = DataLoader(ArrayDataset(np.arange(10.0)), batch_size=5, num_workers=1)
    list(loader)
    text = loader.stats.table()
    for word in ("batches delivered", "worker threads", "consumer waited", "fetching", "transforming", "collating",
                 "in flight", "p50", "p99"):
        assert word in text


def test_table_gives_durations_under_a_second_in_ms_or_us():
    # A tiny file's epoch lasts well under a millisecond: "0.000 s" said nothing.
    loader = DataLoader(ArrayDataset(np.arange(10.0)), batch_size=5, num_workers=0)
    list(loader)
    text = loader.stats.table()
    assert re.search(r"batches delivered\s+2 in \d+(\.\d+)? (us|ms)\n", text), text
    assert re.search(r"consumer waited\s+\d+(\.\d+)? (us|ms) \(\d+% of wall\)", text), text


@pytest.mark.parametrize("n", [1, 2, 3, 10, 1001])
def test_percentiles_equal_numpy_linear_percentiles(n):
    values = np.random.default_rng(n).exponential(1e-4, n)
    got = stats_mod.percentiles(values, (0, 50, 90, 99, 100))
    want = np.percentile(values, [0, 50, 90, 99, 100])
    assert list(got) == [0, 50, 90, 99, 100]
    assert np.allclose(list(got.values()), want, rtol=1e-12, atol=0)


def test_first_stats_read_does_not_import_numpy_ma():
    # numpy.percentile's first call imports numpy.ma (15-30 ms): the first read of loader.stats
    # cost 50-100x a later one.
    code = (
        "import sys, numpy as np\n"
        "from dataloader import ArrayDataset, DataLoader\n"
        "loader = DataLoader(ArrayDataset(np.zeros((100, 2))), batch_size=10)\n"
        "list(loader)\n"
        "assert loader.stats.latency_s\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    done = run_python("-c", code, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
