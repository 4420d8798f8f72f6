"""CachedDataset: two caches of different data given one path and built at the same time
(``dataloader._ndf.cache_path``).  The first to finish is renamed onto the path; the other
fails with ``FileExistsError`` naming it instead of silently replacing it (before, the loser
could then find the winner's file, neither read its cache nor build it again, and compute
every item of every later epoch).  Two caches of the same data share a path as before; a
path replaced behind a finished build's back makes it build anew, never stay stuck."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import dataloader._ndf.slots as slots_module
from dataloader import CachedDataset, DataLoader, Dataset

pytestmark = pytest.mark.timeout(60)

N = 40


class Shifted(Dataset):
    """Item ``i``: ``(full(3, i + shift), i)``; the last item waits on ``meet`` (if any), so
    that two epochs have both started building before either finishes."""

    def __init__(self, shift: int, meet: threading.Barrier | None = None) -> None:
        self.shift, self.meet = shift, meet

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int):
        if i == N - 1 and self.meet is not None:
            self.meet.wait(timeout=20)
        return np.full(3, float(i + self.shift)), i


def cache(shift: int, path, meet: threading.Barrier | None = None) -> CachedDataset:
    """A cache of ``Shifted(shift)`` at ``path``, keyed by its shift (``meet`` not in the key)."""
    return CachedDataset(Shifted(shift, meet), path, fingerprint=f"shift {shift}")


def first_column(cached: CachedDataset) -> list[float]:
    return [float(cached[i][0][0]) for i in range(N)]


def epochs_at_once(*cached: CachedDataset) -> dict[int, BaseException | None]:
    """One epoch of each, each on a thread of its own; what each raised (None: nothing)."""
    raised: dict[int, BaseException | None] = {}

    def epoch(k: int) -> None:
        try:
            for _ in DataLoader(cached[k], batch_size=8):
                pass
            raised[k] = None
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised[k] = exc

    threads = [threading.Thread(target=epoch, args=(k,)) for k in range(len(cached))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return raised


def test_another_datasets_cache_completed_meanwhile_is_not_replaced(tmp_path):
    path = tmp_path / "shared.ndf"
    meet = threading.Barrier(2)
    a, b = cache(0, path, meet), cache(1000, path, meet)
    raised = epochs_at_once(a, b)
    assert sorted(e is None for e in raised.values()) == [False, True]  # one won, one refused
    loser = 0 if raised[0] is not None else 1
    error = raised[loser]
    assert isinstance(error, FileExistsError) and str(path) in str(error) and "path of its own" in str(error)
    winner, lost = (b, a) if loser == 0 else (a, b)
    assert winner.complete and not lost.complete
    assert cache(winner.dataset.shift, path).complete  # the path is the winner's file
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    # the loser's items stay right, and its next epoch (the path's file now older than its
    # build) completes its own cache; the winner keeps reading its own file
    lost.dataset.meet = None
    for _ in DataLoader(lost, batch_size=8):
        pass
    assert lost.complete
    assert first_column(lost) == [float(i + lost.dataset.shift) for i in range(N)]
    assert first_column(winner) == [float(i + winner.dataset.shift) for i in range(N)]


def test_two_caches_of_the_same_data_still_share_a_path(tmp_path):
    path = tmp_path / "same.ndf"
    meet = threading.Barrier(2)
    a, b = cache(0, path, meet), cache(0, path, meet)
    assert epochs_at_once(a, b) == {0: None, 1: None}
    assert a.complete and b.complete
    assert first_column(a) == first_column(b) == [float(i) for i in range(N)]


def test_a_path_replaced_right_after_the_rename_makes_the_cache_build_anew(tmp_path, monkeypatch):
    path = tmp_path / "swapped.ndf"
    other = cache(7, tmp_path / "other.ndf")
    other.fill()
    real = slots_module.fsync_directory
    swapped = []

    def swap(directory: str) -> None:  # a writer that takes no lock, between rename and open
        real(directory)
        if not swapped:
            swapped.append(True)
            os.replace(tmp_path / "other.ndf", path)

    monkeypatch.setattr(slots_module, "fsync_directory", swap)
    cached = cache(0, path)
    cached.fill()
    assert swapped and not cached.complete and cached.stale_reason == "another fingerprint"
    monkeypatch.setattr(slots_module, "fsync_directory", real)
    cached.fill()  # a new build (before: the finished RowSlots kept, never written again)
    assert cached.complete and first_column(cached) == [float(i) for i in range(N)]
