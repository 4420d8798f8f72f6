"""``start()`` and ``seek()`` on ``dataloader.torch.DataLoader``: torch's ``get_worker_info()``
answers in the workers that build ahead, and a seek gives the batches of an uninterrupted run."""

from __future__ import annotations

import threading
import time

import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dataloader.torch as dt  # noqa: E402
from dataloader.torch import _worker_info  # noqa: E402

pytestmark = pytest.mark.timeout(60)


class Recording(tud.Dataset):
    """Items are their index; records torch's ``get_worker_info()`` id for each fetch."""

    def __init__(self, n):
        self.n = n
        self.ids = []
        self.lock = threading.Lock()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = tud.get_worker_info()
        with self.lock:
            self.ids.append(None if info is None else info.id)
        return i


def rows(batches):
    return [b.tolist() for b in batches]


def test_start_builds_ahead_with_torch_worker_info_and_iter_takes_that_epoch():
    g = torch.Generator().manual_seed(4)
    expected = rows(dt.DataLoader(Recording(30), batch_size=4, shuffle=True, generator=g))
    ds = Recording(30)
    loader = dt.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(4))
    loader.start()
    deadline = time.monotonic() + 10
    while len(ds.ids) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert ds.ids and all(i in (0, 1) for i in ds.ids)  # fetched by workers, before any next()
    assert rows(loader) == expected
    loader.close()
    assert not _worker_info.installed()


def test_start_then_close_lets_go_of_the_worker_info_bridge():
    loader = dt.DataLoader(Recording(30), batch_size=4, num_workers=2)
    loader.start()
    assert _worker_info.installed()
    loader.close()
    assert not _worker_info.installed()


def test_seek_with_the_feistel_order_gives_an_uninterrupted_runs_batches():
    def make(workers):
        return dt.DataLoader(Recording(30), batch_size=4, shuffle=True, seed=3, num_workers=workers)

    straight = make(0)
    expected = [rows(straight) for _ in range(3)]
    loader = make(2)
    loader.seek(2, 3)
    loader.start()
    assert rows(loader) == expected[2][3:]
    loader.close()


def test_seek_with_torchs_randomness_only_within_the_next_epoch():
    def make():
        return dt.DataLoader(Recording(30), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(8))

    expected = rows(make())
    loader = make()
    with pytest.raises(ValueError, match=r"only the next epoch \(0\)"):
        loader.seek(1, 0)
    loader.start()  # started: epoch 0 is still the next one iter() yields
    loader.seek(0, 5)
    assert rows(loader) == expected[5:]
    loader.close()
