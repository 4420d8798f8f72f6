"""Adversarial reproducers for the loader engine (found by the "breaker" pass).

Each test states the contract it checks; each began as a reproducer of a bug that
is now fixed, and stays as a regression test.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from dataloader import DataLoader, IterableDataset, item_rng


class _SlowIterable(IterableDataset):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n = n
        self.delay_s = delay_s

    def __iter__(self):
        for i in range(self.n):
            time.sleep(self.delay_s)
            yield i


def _next_in_thread(it, budget_s: float) -> tuple[bool, list]:
    """Call next(it) on a helper thread; (finished within budget_s, [result or exception])."""
    box: list = []

    def run() -> None:
        try:
            box.append(next(it))
        except BaseException as exc:  # noqa: BLE001 - we report whatever happened
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(budget_s)
    return not t.is_alive(), box


@pytest.mark.timeout(30)
def test_iterable_close_from_other_thread_unblocks_next() -> None:
    dl = DataLoader(_SlowIterable(4, 0.5), batch_size=1, num_workers=1)
    it = iter(dl)
    threading.Timer(0.1, it.close).start()
    finished, box = _next_in_thread(it, 8.0)
    assert finished, "next() still blocked 8 s after close() from another thread"
    assert isinstance(box[0], StopIteration) or isinstance(box[0], np.ndarray)
    dl.close()


class _CloseDuringSample:
    """A batch sampler that, while the consumer draws batch ``at``, has another thread close the epoch."""

    def __init__(self, n_batches: int, at: int) -> None:
        self.n_batches = n_batches
        self.at = at
        self.iterator = None

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self):
        for b in range(self.n_batches):
            if b == self.at:
                t = threading.Thread(target=self.iterator.close)
                t.start()
                t.join()
            yield [b]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_close_from_other_thread_during_next_ends_cleanly(num_workers: int) -> None:
    sampler = _CloseDuringSample(n_batches=8, at=4)
    dl = DataLoader(list(range(8)), batch_sampler=sampler, num_workers=num_workers, prefetch_depth=0)
    it = iter(dl)
    sampler.iterator = it
    got = []
    try:
        for batch in it:
            got.append(batch.tolist())
    finally:
        dl.close()
    # Any prefix of the epoch is fine (the epoch was cancelled); an exception is not.
    assert got == [[b] for b in range(len(got))]


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_close_from_other_thread_never_yields_none() -> None:
    anomalies: list[str] = []
    deadline = time.monotonic() + 20.0
    rng = np.random.default_rng(0)
    while not anomalies and time.monotonic() < deadline:
        dl = DataLoader(list(range(200)), batch_size=2, num_workers=int(rng.integers(1, 4)),
                        prefetch_depth=int(rng.integers(0, 3)))
        it = iter(dl)
        delay = float(rng.random()) * 0.002
        closer = threading.Thread(target=lambda: (time.sleep(delay), it.close()))
        closer.start()
        prev = -2
        try:
            for batch in it:
                if batch is None or batch.tolist()[0] != prev + 2:
                    anomalies.append(repr(batch))
                    break
                prev = batch.tolist()[0]
        except Exception as exc:  # noqa: BLE001
            anomalies.append(repr(exc))
        closer.join()
        dl.close()
    assert anomalies == []


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_nested_iteration_is_not_silently_short(num_workers: int) -> None:
    dl = DataLoader(list(range(6)), batch_size=2, num_workers=num_workers)
    pairs = [(a.tolist(), b.tolist()) for a in dl for b in dl]
    dl.close()
    assert len(pairs) == 9


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_stopiteration_in_getitem_is_not_a_short_epoch(num_workers: int) -> None:
    class DS:
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> int:
            if i == 1:
                raise StopIteration
            return i

    dl = DataLoader(DS(), batch_size=1, num_workers=num_workers)
    with pytest.raises(RuntimeError):
        list(dl)
    dl.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["prefetch_depth=2**62", "prefetch_factor=2**61"])
def test_huge_prefetch_raises_instead_of_aborting(option: str) -> None:
    code = (
        "from dataloader import DataLoader\n"
        "try:\n"
        f"    list(DataLoader(list(range(4)), num_workers=2, {option}))\n"
        "except (ValueError, MemoryError, OverflowError) as e:\n"
        "    print('clean', type(e).__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=50)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert "clean" in proc.stdout


@pytest.mark.timeout(60)
def test_item_concurrency_does_not_start_useless_threads() -> None:
    before = threading.active_count()
    dl = DataLoader(list(range(8)), batch_size=2, num_workers=2, item_concurrency=100)
    try:
        out = [b.tolist() for b in dl]
        started = threading.active_count() - before
    finally:
        dl.close()
    assert out == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # 2 workers + at most 1 helper lane per worker are ever useful with batch_size=2.
    assert started <= 4, f"{started} threads for batch_size=2, num_workers=2"


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


def test_item_rng_outside_loader_is_not_affected_by_a_finished_epoch() -> None:
    def fresh() -> int:
        box: list[int] = []
        t = threading.Thread(target=lambda: box.append(int(item_rng(5).integers(1 << 30))))
        t.start()
        t.join()
        return box[0]

    expected = fresh()
    list(DataLoader(list(range(4)), batch_size=2, seed=123))
    assert int(item_rng(5).integers(1 << 30)) == expected
