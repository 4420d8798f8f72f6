"""Worker threads and worker state, following PyTorch.

- ``worker_init_fn`` runs on each worker thread at the start of every epoch
  (``persistent_workers=False``) or once per thread for the loader's life
  (``persistent_workers=True``), after ``get_worker_info()`` is set.
- ``get_worker_info().seed`` is the epoch's seed plus the worker id: distinct per
  worker, new every epoch, reproducible from the loader's ``seed``.  Persistent
  workers keep the seed of the epoch they were initialised in, as torch's
  persistent worker processes do.
- Every epoch re-reads the sampler (``DistributedSampler.set_epoch`` is honoured).
"""

from __future__ import annotations

import threading
import time

import pytest

from tests._support import RangeStream, collect
from dataloader import DataLoader, DistributedSampler, get_worker_info
from dataloader._context import epoch_seed
from dataloader._engine.pool import WorkerPool
from dataloader._native._ring import Window

pytestmark = pytest.mark.timeout(60)

WAIT_S = 10  # bound on every Barrier/Event wait: a broken loader fails, never hangs


class AllWorkersDataset:
    """Items 0..num_workers-1 meet at a barrier, so every worker thread takes part in each epoch.

    With ``batch_size=1`` and the sequential sampler these are the first ``num_workers``
    batches, all inside the window (``num_workers + prefetch_depth``), and a worker blocked at
    the barrier cannot claim another one: ``num_workers`` distinct threads must hold them.
    Records ``get_worker_info()`` as seen by every item.
    """

    def __init__(self, n, num_workers):
        self.n = n
        self.barrier = threading.Barrier(num_workers, timeout=WAIT_S)
        self.num_workers = num_workers
        self.lock = threading.Lock()
        self.infos = []

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        info = get_worker_info()
        with self.lock:
            self.infos.append((info.id, info.seed, threading.current_thread().name))
        if index < self.num_workers:
            self.barrier.wait()
        return index


class InitRecorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.calls = []

    def __call__(self, worker_id):
        info = get_worker_info()
        with self.lock:
            self.calls.append(
                (worker_id, info.id, info.num_workers, info.seed, threading.current_thread().name)
            )


# -- worker_init_fn ---------------------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_worker_init_fn_runs_on_every_worker_at_the_start_of_every_epoch(num_workers):
    ds = AllWorkersDataset(12, num_workers)
    init = InitRecorder()
    loader = DataLoader(ds, batch_size=1, num_workers=num_workers, worker_init_fn=init, seed=21)
    for epoch in range(3):
        init.calls.clear()
        assert [int(b[0]) for b in loader] == list(range(12))
        assert sorted(init.calls) == [
            (w, w, num_workers, epoch_seed(21, epoch) + w, f"dataloader-worker-{w}")
            for w in range(num_workers)
        ]
    loader.close()


@pytest.mark.parametrize("num_workers", [1, 2, 3])
def test_persistent_workers_run_worker_init_fn_once_per_thread(num_workers):
    ds = AllWorkersDataset(9, num_workers)
    init = InitRecorder()
    loader = DataLoader(
        ds,
        batch_size=1,
        num_workers=num_workers,
        worker_init_fn=init,
        persistent_workers=True,
        seed=4,
    )
    for _ in range(4):
        assert [int(b[0]) for b in loader] == list(range(9))
    assert sorted(init.calls) == [
        (w, w, num_workers, epoch_seed(4, 0) + w, f"dataloader-worker-{w}")
        for w in range(num_workers)
    ]
    loader.close()


def test_persistent_workers_keep_the_seed_they_were_initialised_with():
    """torch seeds a persistent worker process once: ``get_worker_info().seed`` never changes."""
    ds = AllWorkersDataset(6, 2)
    loader = DataLoader(ds, batch_size=1, num_workers=2, persistent_workers=True, seed=8)
    for _ in range(3):
        list(loader)
    assert {(wid, seed) for wid, seed, _ in ds.infos} == {
        (0, epoch_seed(8, 0)),
        (1, epoch_seed(8, 0) + 1),
    }
    loader.close()


@pytest.mark.parametrize("num_workers", [2, 3])
def test_worker_init_fn_runs_on_every_worker_even_when_the_epoch_is_closed_at_once(num_workers):
    init = InitRecorder()
    # Not AllWorkersDataset: a worker may claim a batch before close() cancels the epoch, and
    # one blocked at its barrier would be a batch stuck past close()'s budget.
    loader = DataLoader(list(range(12)), batch_size=1, num_workers=num_workers, worker_init_fn=init)
    epochs = 20
    for _ in range(epochs):
        iter(loader).close()  # torch: every worker process still runs worker_init_fn
    assert len(init.calls) == num_workers * epochs
    loader.close()


@pytest.mark.parametrize("num_workers", [1, 2, 3])
@pytest.mark.parametrize("persistent", [False, True])
def test_worker_init_fn_error_is_raised_by_next_and_the_epoch_ends(num_workers, persistent):
    attempts = []

    def init(worker_id):
        attempts.append(worker_id)
        raise LookupError(f"init {worker_id}")

    loader = DataLoader(
        list(range(10)),
        batch_size=2,
        num_workers=num_workers,
        worker_init_fn=init,
        persistent_workers=persistent,
    )
    for _ in range(2):  # a failed init is not a success: the next epoch fails (tries) again
        out = collect(loader)
        assert len(out) == len(loader) == 5
        for kind, (name, args) in out:
            assert kind == "error" and name == "LookupError"
            assert args[0] in {f"init {w}" for w in range(num_workers)}
    assert attempts  # and it never hung
    loader.close()


def test_persistent_worker_init_fn_retried_after_a_failure_then_run_once():
    calls = []

    def init(worker_id):
        calls.append(worker_id)
        if len(calls) == 1:
            raise LookupError("first init fails")

    loader = DataLoader(
        list(range(4)), batch_size=2, num_workers=1, worker_init_fn=init, persistent_workers=True
    )
    first = collect(loader)
    assert [k for k, _ in first] == ["error", "error"]
    for _ in range(3):
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    assert calls == [0, 0]
    loader.close()


# -- seeds ------------------------------------------------------------------------------------


def worker_seeds(seed, epochs=3, num_workers=2):
    ds = AllWorkersDataset(4, num_workers)
    loader = DataLoader(ds, batch_size=1, num_workers=num_workers, seed=seed)
    out = []
    for _ in range(epochs):
        ds.infos.clear()
        list(loader)
        out.append({wid: s for wid, s, _ in ds.infos})
    loader.close()
    return out


def test_worker_seeds_are_distinct_per_worker_new_per_epoch_and_reproducible():
    a, b = worker_seeds(5), worker_seeds(5)
    assert a == b  # same seed -> same worker seeds
    for epoch in a:
        assert sorted(epoch) == [0, 1] and epoch[0] != epoch[1]
        assert all(0 <= s < 2**63 for s in epoch.values())
    assert len({e[0] for e in a}) == 3  # a new seed every epoch
    assert worker_seeds(6)[0] != a[0]
    assert worker_seeds(None)[0] != worker_seeds(None)[0]  # no seed: drawn from the OS


# -- the sampler is read every epoch ------------------------------------------------------------


@pytest.mark.parametrize("num_workers", [0, 2])
def test_distributed_sampler_set_epoch_is_honoured_between_epochs(num_workers):
    ds = list(range(40))
    sampler = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=True, seed=3)
    loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=num_workers)
    orders = {}
    for epoch in (0, 1, 2, 0):
        sampler.set_epoch(epoch)
        order = [int(i) for b in loader for i in b]
        assert order == list(sampler)  # exactly this epoch's indices, in order
        orders.setdefault(epoch, order)
        assert orders[epoch] == order  # epoch 0 again: the same order
    assert len({tuple(o) for o in orders.values()}) == 3
    loader.close()


# -- the pool ---------------------------------------------------------------------------------


def test_pool_threads_are_named_daemons_and_stop_on_shutdown():
    pool = WorkerPool(3, 0)
    names = sorted(t.name for t in threading.enumerate() if t.name.startswith("dataloader-worker-"))
    assert {"dataloader-worker-0", "dataloader-worker-1", "dataloader-worker-2"} <= set(names)
    assert all(t.daemon for t in pool._threads)
    pool.shutdown(join_s=WAIT_S)
    assert not pool.alive
    with pytest.raises(RuntimeError, match="shut down"):
        pool.run(Window(1), lambda worker_id: None)


def test_a_failing_worker_init_fn_keeps_one_traceback_per_batch():
    import traceback

    def init(worker_id):
        raise OSError("init failed")

    loader = DataLoader(list(range(40)), batch_size=1, num_workers=1, worker_init_fn=init)
    it = iter(loader)
    errors = []
    for _ in range(10):
        try:
            next(it)
        except OSError as exc:
            errors.append(len(traceback.extract_tb(exc.__traceback__)))
    it.close()
    loader.close()
    assert len(errors) == 10 and len(set(errors)) == 1  # the same depth every batch, not growing


# -- edge cases: closing from other threads, nesting, StopIteration, thread limits ------------


@pytest.mark.timeout(30)
def test_thread_start_failure_does_not_leak_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    original = threading.Thread.start
    calls = [0]

    def flaky_start(self: threading.Thread) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise RuntimeError("can't start new thread")
        original(self)

    before = {t.ident for t in threading.enumerate()}
    monkeypatch.setattr(threading.Thread, "start", flaky_start)
    dl = DataLoader(list(range(8)), num_workers=4)
    with pytest.raises(RuntimeError, match="can't start"):
        iter(dl)
    monkeypatch.setattr(threading.Thread, "start", original)
    dl.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        leaked = [t.name for t in threading.enumerate() if t.ident not in before]
        if not leaked:
            break
        time.sleep(0.05)
    assert leaked == []


def _init_raising_stopiteration(worker_id):
    raise StopIteration


# A worker_init_fn raising StopIteration never ends an epoch silently (no batch, no error): as
# for __getitem__ and collate_fn, next() raises a RuntimeError, map-style and iterable alike.
@pytest.mark.timeout(30)
@pytest.mark.parametrize("kw", [dict(num_workers=1), dict(num_workers=2), dict(num_workers=1, item_concurrency=2)])
def test_a_worker_init_fn_raising_stopiteration_fails_a_map_epoch_with_runtime_error(kw):
    loader = DataLoader(list(range(8)), batch_size=2, worker_init_fn=_init_raising_stopiteration, **kw)
    with pytest.raises(RuntimeError):
        list(loader)
    loader.close()


@pytest.mark.timeout(30)
def test_a_worker_init_fn_raising_stopiteration_fails_an_iterable_epoch_with_runtime_error():
    loader = DataLoader(RangeStream(8), batch_size=2, num_workers=2, worker_init_fn=_init_raising_stopiteration)
    with pytest.raises(RuntimeError):
        list(loader)
    loader.close()
