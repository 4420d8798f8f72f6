"""``DataLoader.start()``: the next epoch's batches are built before the first ``next()``.

The started epoch is the one the next ``iter(loader)`` returns (not a second one), it starts
where ``load_state_dict`` / ``seek`` put the loader, and ``close()`` without ``iter`` stops its
threads and keeps the position.
"""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

from tests._support import RecordingDataset, json_roundtrip
from dataloader.loader import DataLoader

pytestmark = pytest.mark.timeout(60)

N, BATCH = 40, 4


def rows(batches):
    return [np.asarray(b).tolist() for b in batches]


def make(ds, workers=2, **kw):
    return DataLoader(ds, batch_size=BATCH, shuffle=True, seed=21, num_workers=workers, prefetch_depth=2, **kw)


def expected_epochs(count):
    loader = make(RecordingDataset(N), workers=0)
    return [rows(loader) for _ in range(count)]


def wait_for(predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def worker_threads():
    return [t for t in threading.enumerate() if t.name.startswith("dataloader-worker") and t.is_alive()]


def test_start_builds_the_first_batches_before_the_first_next():
    ds = RecordingDataset(N)
    loader = make(ds)
    loader.start()
    # The window (num_workers + prefetch_depth = 4 batches) fills with nobody iterating.
    wait_for(lambda: len(ds.calls) >= 4 * BATCH)
    time.sleep(0.05)
    assert len(ds.calls) == 4 * BATCH  # bounded by the window
    assert all(t.startswith("dataloader-worker") for t in ds.threads)
    it = iter(loader)
    assert rows(it) == expected_epochs(1)[0]
    loader.close()


def test_iter_after_start_takes_the_started_epoch_and_the_next_iter_a_new_one():
    expected = expected_epochs(3)
    loader = make(RecordingDataset(N))
    loader.start()
    loader.start()  # twice: still one epoch
    assert rows(loader) == expected[0]
    assert rows(loader) == expected[1]
    loader.start()
    assert loader.state_dict()["epoch"] == 2
    assert rows(loader) == expected[2]
    loader.close()


def test_a_copy_made_after_start_begins_with_the_started_epoch():
    import copy

    expected = expected_epochs(2)
    loader = make(RecordingDataset(N))
    rows(loader)  # epoch 0 consumed
    loader.start()  # epoch 1 started, not iterated
    clone = copy.copy(loader)  # through __reduce__, as a pickle is
    assert rows(clone) == expected[1]
    clone.close()
    assert rows(loader) == expected[1]
    loader.close()


def test_start_after_load_state_dict_builds_from_the_loaded_position():
    expected = expected_epochs(2)
    saved = make(RecordingDataset(N))
    it = iter(saved)
    for _ in range(3):
        next(it)
    state = json_roundtrip(saved.state_dict())
    saved.close()
    ds = RecordingDataset(N)
    loader = make(ds)
    loader.load_state_dict(state)
    loader.start()
    wait_for(lambda: len(ds.calls) >= BATCH)
    assert rows(loader) == expected[0][3:]
    assert rows(loader) == expected[1]
    loader.close()


def test_load_state_dict_or_seek_after_start_starts_again_from_there():
    expected = expected_epochs(3)
    ds = RecordingDataset(N)
    loader = make(ds)
    loader.start()
    wait_for(lambda: len(ds.calls) >= BATCH)
    loader.seek(2, 6)
    assert loader.state_dict()["epoch"] == 2 and loader.state_dict()["yielded"] == 6
    wait_for(lambda: len(ds.calls) >= 8 * BATCH)  # the new start fills its window too
    assert rows(loader) == expected[2][6:]
    loader.start()
    state = json_roundtrip(make(RecordingDataset(N)).state_dict())  # epoch 0 from its start
    loader.load_state_dict(state)
    assert rows(loader) == expected[0]
    loader.close()


@pytest.mark.parametrize("workers", [0, 2])
def test_close_after_start_without_iter_stops_the_threads_and_keeps_the_position(workers):
    expected = expected_epochs(2)
    before = set(worker_threads())
    ds = RecordingDataset(N)
    loader = make(ds, workers=workers)
    loader.start()
    loader.close()
    wait_for(lambda: not set(worker_threads()) - before)
    state = loader.state_dict()
    assert (state["epoch"], state["yielded"]) == (0, 0)
    assert rows(loader) == expected[0]  # the same epoch, from its start
    assert rows(loader) == expected[1]
    loader.close()
    wait_for(lambda: not set(worker_threads()) - before)


def test_start_with_no_workers_builds_nothing_and_iter_takes_that_epoch():
    expected = expected_epochs(2)
    ds = RecordingDataset(N)
    loader = make(ds, workers=0)
    loader.start()
    time.sleep(0.05)
    assert ds.calls == []
    assert loader.state_dict()["epoch"] == 0
    assert rows(loader) == expected[0]
    assert rows(loader) == expected[1]


def test_start_with_persistent_workers_runs_worker_init_fn_once_per_thread():
    calls = []
    lock = threading.Lock()

    def init(worker_id):
        with lock:
            calls.append(worker_id)

    expected = expected_epochs(2)
    loader = make(RecordingDataset(N), persistent_workers=True, worker_init_fn=init)
    loader.start()
    assert rows(loader) == expected[0]
    loader.start()
    assert rows(loader) == expected[1]
    assert sorted(calls) == [0, 1]
    loader.close()


def test_start_from_many_threads_at_once_starts_one_epoch():
    expected = expected_epochs(2)
    loader = make(RecordingDataset(N))
    barrier = threading.Barrier(4)

    def go():
        barrier.wait()
        loader.start()

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert rows(loader) == expected[0]
    assert rows(loader) == expected[1]
    loader.close()


def test_an_error_of_a_batch_built_ahead_is_raised_by_its_next():
    class Broken:
        def __len__(self):
            return 8

        def __getitem__(self, i):
            raise KeyError(i)

    loader = DataLoader(Broken(), batch_size=2, num_workers=2)
    loader.start()
    it = iter(loader)
    with pytest.raises(KeyError):
        next(it)
    loader.close()


def test_a_loader_dropped_with_a_started_epoch_is_collected_and_its_threads_end():
    before = set(worker_threads())
    loader = make(RecordingDataset(N))
    loader.start()
    wait_for(lambda: set(worker_threads()) - before)
    del loader
    gc.collect()  # the started epoch keeps its loader: a cycle
    wait_for(lambda: not set(worker_threads()) - before)
