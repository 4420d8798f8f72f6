"""A (batch) sampler may yield one index buffer (a list or an array) that it refills after each
yield, as PyTorch allows (its workers receive a pickled copy).  Workers read a batch's indices
later than the sampler's next ``next()``: the loader must build each batch from the indices
the sampler yielded for it, on the general path and on the native one's fallback alike.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader

pytestmark = pytest.mark.timeout(60)

N = 40
BATCH = 4


class RefillingBatchSampler:
    """Yields one buffer of ``BATCH`` indices, refilled after each yield; ``yielded`` is set
    once ``hold`` batches were yielded (the dataset's first item waits for it)."""

    def __init__(self, make, hold: int, bad_every: int = 0):
        self.make, self.hold, self.bad_every = make, hold, bad_every
        self.yielded = threading.Event()

    def __len__(self) -> int:
        return N // BATCH

    def __iter__(self):
        buf = self.make()
        for b in range(N // BATCH):
            for i in range(BATCH):
                buf[i] = (b * BATCH + i * 7) % N
            if self.bad_every and b % self.bad_every == 1:
                buf[1] = N + b  # an out-of-range index: this batch fails, naming it
            if b == self.hold:
                self.yielded.set()
            yield buf
        self.yielded.set()


class WaitingRows(ArrayDataset):
    """``ArrayDataset`` (a subclass: the general path) whose first item waits until the
    sampler has run ahead, so that workers read later batches after their buffer was refilled."""

    sampler: RefillingBatchSampler | None = None

    def __getitem__(self, index):
        if self.sampler is not None:
            self.sampler.yielded.wait(10)
        return super().__getitem__(index)


def _epoch(loader):
    out, it = [], iter(loader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return out
        except IndexError as exc:
            out.append(("error", str(exc)))
        else:
            out.append([a.tolist() for a in batch])


@pytest.mark.parametrize("make", [lambda: [0] * BATCH, lambda: np.zeros(BATCH, dtype=np.int64)],
                         ids=["list", "int64 array"])
@pytest.mark.parametrize("bad_every", [0, 3])
@pytest.mark.parametrize("native", [False, True], ids=["general path", "native path"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_batch_sampler_that_refills_one_buffer_gets_the_batches_it_yielded(make, bad_every, native, workers):
    x = np.arange(N * 2).reshape(N, 2)
    expected = _epoch(DataLoader(ArrayDataset(x), batch_sampler=RefillingBatchSampler(make, 0, bad_every)))
    assert len(expected) == N // BATCH
    sampler = RefillingBatchSampler(make, hold=6, bad_every=bad_every)
    if native:
        # The native path copies a batch's indices into its job; a batch it cannot take (a bad
        # index) goes to the general path, whose worker reads the indices later.
        dataset = ArrayDataset(x)
    else:
        dataset = WaitingRows(x)
        dataset.sampler = sampler
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=workers, prefetch_depth=8)
    assert _epoch(loader) == expected
