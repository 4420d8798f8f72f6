"""A stateful ``IterableDataset``'s state is a snapshot of the batch's position.

A dataset's ``state_dict()`` may return its live dict, which its iterator goes on mutating:
the state kept for a batch must be a copy taken when the batch was built (as torch's worker
processes take one by pickling it), else a worker building ahead moves the saved state of a
batch already returned and the resumed epoch starts items late.  Likewise the sampler's
state at the epoch's start, a loaded state, and the dict ``state_dict()`` returns.  With
``num_workers=0``, a Ctrl-C while a batch is being built (items already drawn from the
stream) resumes at that batch, not after the items it drew.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dataloader import DataLoader, IterableDataset, get_worker_info
from dataloader.sampler import Sampler
from tests._support import json_roundtrip

pytestmark = pytest.mark.timeout(60)


class LiveStream(IterableDataset):
    """This worker's share of ``range(n)``; its state is one dict, mutated in place as it
    iterates, and ``state_dict()`` returns that very dict."""

    def __init__(self, n):
        self.n = n
        self.state = {"next": 0}

    def __iter__(self):
        info = get_worker_info()
        wid, step = (info.id, info.num_workers) if info is not None else (0, 1)
        self.state = dict(self.state)  # a worker's copy shares its dict with the original
        first = self.state["next"]
        for i in range(first if first else wid, self.n, step):
            self.state["next"] = i + step
            yield i

    def state_dict(self):
        return self.state

    def load_state_dict(self, sd):
        self.state = sd  # keeps the loaded dict as its live state


def take(it, k=None):
    out = []
    for batch in it:
        out.append(np.asarray(batch).tolist())
        if k is not None and len(out) == k:
            break
    return out


@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_a_dataset_returning_its_live_state_dict_resumes_exactly(num_workers, k):
    def loader():
        return DataLoader(LiveStream(40), batch_size=2, num_workers=num_workers, prefetch_depth=6)

    with loader() as reference:
        full = take(iter(reference))
    with loader() as first:
        it = iter(first)
        head = take(it, k)
        sd = first.state_dict()
        saved = json.dumps(sd)
        take(it, 2)  # the workers and the dataset go on; the returned state must not move
        assert json.dumps(sd) == saved
        it.close()
    with loader() as again:
        again.load_state_dict(json_roundtrip(sd))
        assert head + take(iter(again)) == full


class Interrupting(LiveStream):
    """``LiveStream`` whose ``at``-th item drawn raises ``KeyboardInterrupt`` (Ctrl-C while
    ``next()`` draws the items of a batch)."""

    def __init__(self, n, at):
        super().__init__(n)
        self.at = at
        self.drawn = 0

    def __iter__(self):
        for i in super().__iter__():
            self.drawn += 1
            if self.drawn == self.at:
                raise KeyboardInterrupt
            yield i


@pytest.mark.parametrize("at", [1, 2, 5, 8])
def test_ctrl_c_while_a_stream_batch_is_drawn_resumes_at_that_batch(at):
    full = take(DataLoader(LiveStream(20), batch_size=3))
    loader = DataLoader(Interrupting(20, at), batch_size=3)
    seen = []
    with pytest.raises(KeyboardInterrupt):
        seen.extend(take(iter(loader)))
    sd = json_roundtrip(loader.state_dict())
    again = DataLoader(LiveStream(20), batch_size=3)
    again.load_state_dict(sd)
    assert take(iter(again)) == full[sd["yielded"]:]
    assert sd["yielded"] == (at - 1) // 3


class LiveEpochSampler(Sampler[int]):
    """A user sampler whose ``state_dict()`` returns its live dict, which ``__iter__`` moves
    to the next epoch when it starts."""

    def __init__(self, n):
        self.n = n
        self.state = {"epoch": 0}

    def __iter__(self):
        epoch = self.state["epoch"]
        self.state["epoch"] = epoch + 1
        return iter(np.random.default_rng(epoch).permutation(self.n).tolist())

    def __len__(self):
        return self.n

    def state_dict(self):
        return self.state

    def load_state_dict(self, sd):
        self.state = sd


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_sampler_returning_its_live_state_resumes_its_epoch(num_workers):
    ds = list(range(12))
    full = take(DataLoader(ds, batch_size=3, sampler=LiveEpochSampler(12)))
    first = DataLoader(ds, batch_size=3, sampler=LiveEpochSampler(12), num_workers=num_workers)
    it = iter(first)
    head = take(it, 2)
    sd = json_roundtrip(first.state_dict())
    it.close()
    first.close()
    again = DataLoader(ds, batch_size=3, sampler=LiveEpochSampler(12), num_workers=num_workers)
    again.load_state_dict(sd)
    assert head + take(iter(again)) == full
    again.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_taken_on_another_thread_mid_epoch_resumes_exactly(num_workers):
    # state_dict() from another thread while next() builds and counts batches: each state pairs
    # a position with the stream's state at that very position (never a later batch's state).
    import sys
    import threading

    def loader():
        return DataLoader(LiveStream(4000), batch_size=2, num_workers=num_workers, collate_fn=list)

    with loader() as reference:
        full = take(iter(reference))
    states, errors = [], []
    with loader() as first:
        it = iter(first)
        done, saving = threading.Event(), threading.Event()

        def saver():
            while not done.is_set():
                saving.set()
                try:
                    states.append(first.state_dict())
                except Exception as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                    return

        interval = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # 3.11: switch threads often enough to interleave
        thread = threading.Thread(target=saver)
        thread.start()
        try:
            saving.wait(10)
            seen = take(it)
        finally:
            done.set()
            thread.join()
            sys.setswitchinterval(interval)
    assert not errors
    assert seen == full
    middle = [sd for sd in states if sd["epoch"] == 0 and 0 < sd["yielded"] < len(full)]
    assert middle
    for sd in middle[:: max(1, len(middle) // 8)]:
        with loader() as again:
            again.load_state_dict(json_roundtrip(sd))
            assert full[: sd["yielded"]] + take(iter(again)) == full, sd["yielded"]
