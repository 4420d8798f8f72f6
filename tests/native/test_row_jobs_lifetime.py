"""Lifetime and ordering of the native batch jobs (``_native/_rowjobs.pyx``): a slot's job (its
index copy, its output columns) is rewritten only once its batch was taken, and the outputs
stay alive while a worker writes them, also when the epoch is dropped without ``close()`` or
closed from another thread.  A batch the loader gave out is never written again: every batch
is compared with NumPy's rows after the epoch (and after its workers were reused).
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader
from dataloader.ndf import NdfDataset, NdfWriter

pytestmark = pytest.mark.timeout(120)

N = 2000


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(7).standard_normal((N, 48))


class ChangingBatches:
    """Batches whose sizes go 1, 700, 2, 300, ... (each slot's index copy grows and shrinks)
    of shuffled rows: a job read after its slot was rewritten gives other rows."""

    sizes = (1, 700, 2, 300, 1500, 3, 64)

    def __init__(self, epochs_seed: int):
        self.seed = epochs_seed

    def __iter__(self):
        rng = np.random.default_rng(self.seed)
        for size in self.sizes * 3:
            yield rng.integers(0, N, size)

    def __len__(self):
        return len(self.sizes) * 3


def _expected(x, sampler):
    return [x[idx] for idx in sampler]


@pytest.mark.parametrize(("workers", "depth", "in_order"), [(1, 0, True), (2, 0, True), (3, 1, True),
                                                             (2, 0, False), (4, 2, False)])
def test_a_slot_of_a_small_window_is_rewritten_only_after_its_batch_was_taken(x, workers, depth, in_order):
    dataset = ArrayDataset(x)
    for seed in range(12):
        sampler = ChangingBatches(seed)
        loader = DataLoader(dataset, batch_sampler=sampler, num_workers=workers, prefetch_depth=depth,
                            in_order=in_order, persistent_workers=True)
        got = [b[0].copy() for b in loader]  # as delivered: a job completed before it was filled differs
        expected = _expected(x, sampler)
        if not in_order:
            got.sort(key=lambda a: (len(a), a.tobytes()))
            expected.sort(key=lambda a: (len(a), a.tobytes()))
        assert len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert g.shape == e.shape and g.tobytes() == e.tobytes()


@pytest.mark.parametrize("workers", [1, 2, 4])
@pytest.mark.parametrize("how", ["del", "close from another thread"])
def test_an_epoch_dropped_while_workers_build_leaves_the_batches_it_gave_intact(x, workers, how):
    dataset = ArrayDataset(x)
    epochs, batch = 30, N // 2 - 1
    plain = DataLoader(dataset, batch_size=batch, shuffle=True, seed=3)
    expected = [next(iter(plain))[0] for _ in range(epochs)]  # each epoch's first batch
    loader = DataLoader(dataset, batch_size=batch, num_workers=workers, prefetch_depth=8, shuffle=True, seed=3)
    kept = []
    for _ in range(epochs):
        it = iter(loader)
        kept.append(next(it)[0])
        if how == "del":
            del it  # no close(): the epoch's window and jobs go while workers still gather
            gc.collect()
        else:
            t = threading.Thread(target=it.close)
            t.start()
            t.join(30)
            assert not t.is_alive()
            assert list(it) == []
            del it
    assert len(list(loader)) == len(plain)  # the workers were reused, and are idle now
    # Nothing was written into a batch after it was given out.
    for got, e in zip(kept, expected, strict=True):
        assert got.tobytes() == e.tobytes()


@pytest.mark.parametrize("workers", [1, 2])
def test_an_ndf_epoch_dropped_while_its_file_closes_leaves_the_batches_it_gave_intact(tmp_path, x, workers):
    path = tmp_path / "rows.ndf"
    with NdfWriter(path, x.shape[1], 1) as w:
        w.append(x, np.arange(N, dtype=np.float64)[:, None])
    for round_ in range(10):
        dataset = NdfDataset(path)
        loader = DataLoader(dataset, batch_size=600, num_workers=workers, prefetch_depth=8)
        it = iter(loader)
        xb, yb = next(it)
        closer = threading.Thread(target=dataset.close)
        closer.start()
        if round_ % 2:
            del it
            gc.collect()
        else:
            it.close()
        closer.join(30)
        assert not closer.is_alive()
        assert xb.tobytes() == x[:600].tobytes() and yb[:, 0].tolist() == list(range(600))
