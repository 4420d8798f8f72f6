"""Ctrl-C (and ``sys.exit()``) inside ``next()`` is not a position.

``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit`` are never a batch's own error:
raised by the sampler, ``__getitem__``, a transform, ``collate_fn`` (on the consumer with
``num_workers=0`` or ``"auto"`` building inline, or on a worker), or delivered while
``next()`` waits for the workers, they propagate, the batch is not counted and the epoch
ends; ``state_dict()`` taken then resumes at that batch, exactly.  Before, with
``num_workers=0`` the interrupted batch counted as yielded (a Ctrl-C then ``save(state)``
resumed after rows the model never saw) and an interrupt from the sampler ended the epoch
in the state.
"""

from __future__ import annotations

import _thread
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, default_collate
from dataloader.sampler import Sampler
from tests._support import json_roundtrip

INTERRUPTS = (KeyboardInterrupt, SystemExit, GeneratorExit)
SITES = ("sampler", "getitem", "transform", "collate")


class Trip:
    """Raises ``exc`` at its ``at``-th call (counted over all threads); ``at=0``: never."""

    def __init__(self, at=0, exc=KeyboardInterrupt):
        self.at, self.exc = at, exc
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self):
        with self.lock:
            self.calls += 1
            hit = self.calls == self.at
        if hit:
            raise self.exc("tripped")


class Items:
    """Item ``i`` is ``i``; indices in ``fail`` raise ``KeyError`` (the batch's own error)."""

    def __init__(self, n, fail=(), trip=None):
        self.n, self.fail, self.trip = n, frozenset(fail), trip

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.trip is not None:
            self.trip()
        if i in self.fail:
            raise KeyError(i)
        return i


class Order(Sampler[int]):
    """A user sampler without state: a fixed order, a trip per index drawn."""

    def __init__(self, order, trip=None):
        self.order, self.trip = order, trip

    def __iter__(self):
        for i in self.order:
            if self.trip is not None:
                self.trip()
            yield i

    def __len__(self):
        return len(self.order)


def make(n, batch_size, num_workers, site=None, trip=None, fail=(), item_concurrency=1):
    at = {site: trip} if site is not None else {}

    def transform(x):
        if "transform" in at:
            at["transform"]()
        return x

    def collate(items):
        if "collate" in at:
            at["collate"]()
        return default_collate(items)

    order = np.random.default_rng(n).permutation(n).tolist()
    return DataLoader(
        Items(n, fail, at.get("getitem")), batch_size=batch_size, sampler=Order(order, at.get("sampler")),
        num_workers=num_workers, transform=transform, collate_fn=collate, item_concurrency=item_concurrency,
    )


def drain(it, seen):
    """Append the rest of ``it`` to ``seen`` (batches as lists, own errors as tuples)."""
    while True:
        try:
            seen.append(np.asarray(next(it)).tolist())
        except StopIteration:
            return
        except KeyError as exc:
            seen.append(("error", exc.args))


def interrupted_run(loader):
    """Iterate one epoch until an interrupt; the batches seen, and whether one came."""
    seen = []
    try:
        drain(iter(loader), seen)  # iter() itself may be interrupted (the sampler's first draws)
    except INTERRUPTS:
        return seen, True
    return seen, False


def epoch_list(loader):
    seen = []
    drain(iter(loader), seen)
    return seen


@pytest.mark.timeout(300)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 24),
    batch_size=st.integers(1, 5),
    site=st.sampled_from(SITES),
    at=st.integers(1, 30),
    exc=st.sampled_from(INTERRUPTS),
    workers=st.sampled_from([0, "auto", 2]),
    resumed_workers=st.sampled_from([0, 2]),
    item_concurrency=st.sampled_from([1, 2]),
    fail=st.sets(st.integers(0, 23), max_size=2),
)
def test_an_interrupt_at_any_point_resumes_exactly(
    n, batch_size, site, at, exc, workers, resumed_workers, item_concurrency, fail
):
    with make(n, batch_size, 0, fail=fail) as reference:
        full = [epoch_list(reference), epoch_list(reference)]
    with make(n, batch_size, workers, site, Trip(at, exc), fail, item_concurrency) as first:
        seen, interrupted = interrupted_run(first)
        sd = json_roundtrip(first.state_dict())
    assert (sd["epoch"], sd["yielded"]) == ((0, len(seen)) if interrupted else (1, 0))
    with make(n, batch_size, resumed_workers, fail=fail) as again:
        again.load_state_dict(sd)
        rest = [epoch_list(again), epoch_list(again)]
    if interrupted:
        assert seen + rest[0] == full[0]
        assert rest[1] == full[1]
    else:
        assert seen == full[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, "auto", 2])
@pytest.mark.parametrize("site", SITES)
def test_the_interrupted_iterator_ends_and_its_own_loader_resumes_at_the_interrupted_batch(workers, site):
    with make(200, 3, 0) as reference:
        full = epoch_list(reference)
    # The sampler's: past the first window's draws (iter() publishes up to 32 batches with "auto").
    trip = Trip({"sampler": 120, "getitem": 8, "transform": 8, "collate": 3}[site])
    with make(200, 3, workers, site, trip) as loader:
        it = iter(loader)
        seen = []
        with pytest.raises(KeyboardInterrupt):
            drain(it, seen)
        assert 0 < len(seen) < len(full)
        with pytest.raises(StopIteration):  # the epoch ended; its position did not move
            next(it)
        assert (loader.state_dict()["epoch"], loader.state_dict()["yielded"]) == (0, len(seen))
        loader.load_state_dict(loader.state_dict())
        assert seen + epoch_list(loader) == full


class SlowAt(Items):
    """Item ``at`` waits for ``ready``, then sends the main thread a Ctrl-C (SIGINT) while it
    is blocked in ``next()`` waiting for this very batch, and takes a while longer."""

    def __init__(self, n, at):
        super().__init__(n)
        self.at = at
        self.ready = threading.Event()

    def __getitem__(self, i):
        if i == self.at:
            assert self.ready.wait(10)
            time.sleep(0.1)
            _thread.interrupt_main()
            time.sleep(0.5)
        return i


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("sigint_raises")
@pytest.mark.parametrize("num_workers", [1, 3])
def test_ctrl_c_while_next_waits_for_workers_does_not_move_the_position(num_workers):
    full = epoch_list(DataLoader(Items(30), batch_size=2))
    ds = SlowAt(30, at=8)  # in batch 4
    with DataLoader(ds, batch_size=2, num_workers=num_workers, prefetch_depth=4) as loader:
        it = iter(loader)
        seen = [np.asarray(next(it)).tolist() for _ in range(4)]
        ds.ready.set()
        with pytest.raises(KeyboardInterrupt):
            next(it)  # blocked until the Ctrl-C: batch 4 is not ready
        sd = json_roundtrip(loader.state_dict())
    assert sd["yielded"] == 4
    again = DataLoader(Items(30), batch_size=2, num_workers=2)
    again.load_state_dict(sd)
    assert seen + epoch_list(again) == full
    again.close()
