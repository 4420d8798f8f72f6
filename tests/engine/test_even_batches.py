"""``even_batches``: equal steps per rank for streams, with ranks simulated by threads.

Each rank is a thread with its own ``DataLoader``; the ranks' agreement (``RankVote``: one
``all_reduce(MAX)`` per step) is replaced by ``ThreadVote``, a max over the threads behind a
barrier, so the protocol of ``dataloader._engine.even`` runs without torch (both
interpreters).  The real collective under ``torchrun`` is tests/torch/test_even_batches_multirank.py.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dataloader import DataLoader, IterableDataset, get_worker_info
from dataloader._engine import rank_vote
from dataloader._engine.rank_vote import Flags

pytestmark = pytest.mark.timeout(60)


class Rows(IterableDataset):
    """Rows ``start .. start + n - 1``, split between worker threads (each worker's copy yields
    every ``num_workers``-th row); ``passes`` counts ``iter()`` calls (all copies)."""

    def __init__(self, start, n, passes=None):
        self.start, self.n = start, n
        self.passes = passes if passes is not None else [0]

    def __iter__(self):
        self.passes[0] += 1
        info = get_worker_info()
        w, k = (info.id, info.num_workers) if info is not None else (0, 1)
        return iter(range(self.start + w, self.start + self.n, k))


class ThreadVote:
    """The element-wise max of the ranks' ``Flags`` (``RankVote.vote`` for threads)."""

    def __init__(self, world):
        self.world = world
        self.barrier = threading.Barrier(world, timeout=20)
        self.slots = [None] * world
        self.votes = [0] * world

    def rank(self, r):
        vote = self

        class One:
            def vote(self, mine):
                vote.slots[r] = mine
                vote.votes[r] += 1
                vote.barrier.wait()
                said = Flags(*(max(s[i] for s in vote.slots) for i in range(4)))
                vote.barrier.wait()
                return said

        return One()


@pytest.fixture
def fake_ranks(monkeypatch):
    # The engine builds RankVote(process_group): here the "group" is the rank's ThreadVote.
    monkeypatch.setattr(rank_vote, "RankVote", lambda group: group)


def run_ranks(sizes, body, **loader_args):
    """Run ``body(rank, loader)`` on one thread per rank (a ``Rows`` shard of ``sizes[rank]``
    rows, starting at 1000 * rank); returns their results, or raises the first error."""
    world = ThreadVote(len(sizes))
    out, errors = [None] * len(sizes), []

    def rank(r):
        loader = DataLoader(Rows(1000 * r, sizes[r]), process_group=world.rank(r), **loader_args)
        try:
            out[r] = body(r, loader)
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            errors.append(exc)
            world.barrier.abort()
        finally:
            loader.close()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(sizes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    if errors:
        raise errors[0]
    return out, world


def rows_of(loader):
    return [[int(v) for v in np.asarray(b)] for b in loader]


def alone(r, n, **loader_args):
    """Rank ``r``'s own batches of an epoch without ``even_batches``."""
    with DataLoader(Rows(1000 * r, n), **loader_args) as loader:
        return rows_of(loader)


@pytest.mark.parametrize("workers", [0, 2])
def test_drop_stops_every_rank_when_the_shortest_stream_ends(fake_ranks, workers):
    sizes = [10, 100, 37]
    out, world = run_ranks(sizes, lambda r, dl: rows_of(dl), batch_size=4, even_batches="drop",
                           num_workers=workers)
    own = [alone(r, n, batch_size=4, num_workers=workers) for r, n in enumerate(sizes)]
    k = len(own[0])  # the shortest stream's batches
    assert out == [o[:k] for o in own]
    flat = [v for rank in out for b in rank for v in b]
    assert len(flat) == len(set(flat))  # every yielded row once
    assert world.votes == [k + 1] * 3  # one vote per batch, and the one that ended the epoch


@pytest.mark.parametrize("workers", [0, 2])
def test_pad_repeats_short_streams_until_the_longest_ends(fake_ranks, workers):
    sizes = [10, 30, 5]
    out, _ = run_ranks(sizes, lambda r, dl: rows_of(dl), batch_size=4, even_batches="pad", num_workers=workers)
    own = [alone(r, n, batch_size=4, num_workers=workers) for r, n in enumerate(sizes)]
    k = len(own[1])  # the longest stream's batches
    assert out[1] == own[1]
    for r in (0, 2):  # its epoch again from the start, as often as needed
        assert out[r] == (own[r] * k)[:k]


def test_pad_repeats_with_a_new_iter_of_the_dataset(fake_ranks):
    passes = [0]

    def body(r, loader):
        if r == 0:
            loader.dataset.passes = passes
        return [rows_of(loader) for _ in range(2)]

    out, _ = run_ranks([3, 9], body, batch_size=2, even_batches="pad")
    assert [len(e) for e in out[0]] == [5, 5]
    assert passes == [6]  # 3 passes per epoch (2 + 2 + 1 batches)


def test_pad_refuses_an_empty_stream_on_every_rank(fake_ranks):
    results = [None, None]

    def body(r, loader):
        try:
            rows_of(loader)
        except ValueError as exc:
            results[r] = str(exc)
        return results[r]

    run_ranks([0, 9], body, batch_size=2, even_batches="pad")
    assert all("empty shard cannot be repeated" in m for m in results)


def test_drop_with_an_empty_stream_yields_nothing_anywhere(fake_ranks):
    out, _ = run_ranks([0, 9], lambda r, dl: rows_of(dl), batch_size=2, even_batches="drop")
    assert out == [[], []]


@pytest.mark.parametrize("mode", ["drop", "pad"])
def test_a_rank_that_closes_early_stops_the_others_at_their_next_step(fake_ranks, mode):
    def body(r, loader):
        it = iter(loader)
        got = []
        for b in it:
            got.append(b.tolist())
            if r == 0 and len(got) == 2:
                it.close()  # the others end at their next step, without waiting for this rank
                break
        return got

    out, _ = run_ranks([20, 20, 20], body, batch_size=4, even_batches=mode, num_workers=2)
    assert [len(b) for b in out] == [2, 2, 2]


def test_every_rank_breaking_at_the_same_step_and_closing_does_not_hang(fake_ranks):
    def body(r, loader):
        epochs = []
        for _ in range(3):
            with iter(loader) as it:
                epochs.append([next(it).tolist() for _ in range(2)])
        return epochs

    out, _ = run_ranks([20, 40], body, batch_size=4, even_batches="pad", num_workers=2)
    assert out[1] == [alone(1, 40, batch_size=4, num_workers=2)[:2]] * 3


def test_a_batch_that_raises_is_a_step_on_every_rank(fake_ranks):
    def collate(items):
        if 5 in items:
            raise KeyError("bad item 5")
        return items

    def body(r, loader):
        got = []
        it = iter(loader)
        while True:
            try:
                got.append(next(it))
            except KeyError:
                got.append("error")
            except StopIteration:
                return got

    out, _ = run_ranks([9, 30], body, batch_size=4, even_batches="drop", collate_fn=collate)
    assert out[0] == [[0, 1, 2, 3], "error", [8]]
    assert len(out[1]) == 3


@pytest.mark.parametrize("workers", [0, 2])
def test_state_after_an_agreed_end_is_the_next_epoch(fake_ranks, workers):
    def body(r, loader):
        rows_of(loader)
        return loader.state_dict()

    out, _ = run_ranks([6, 20], body, batch_size=4, even_batches="drop", num_workers=workers)
    assert [(sd["epoch"], sd["yielded"]) for sd in out] == [(1, 0), (1, 0)]


def test_pad_state_mid_padding_resumes_at_the_same_batches(fake_ranks):
    def body(r, loader):
        it = iter(loader)
        head = [next(it).tolist() for _ in range(4)]  # rank 0 (3 batches) is padding
        sd = loader.state_dict()
        rest = [b.tolist() for b in it]
        return head, sd, rest

    out, _ = run_ranks([10, 30], body, batch_size=4, even_batches="pad")
    (head, sd, rest), _ = out[0], None
    assert (sd["epoch"], sd["yielded"]) == (0, 1)  # the padding pass, at its first batch
    assert head[3] == head[0] and rest == [head[1], head[2], head[0], head[1]]

    def resumed(r, loader):
        loader.load_state_dict(out[r][1])
        return rows_of(loader)

    again, _ = run_ranks([10, 30], resumed, batch_size=4, even_batches="pad")
    assert again[0] == rest  # rank 0 resumes inside its padding and pads on
    assert again[1] == out[1][2]


def test_even_batches_checks_its_arguments():
    ds = Rows(0, 4)
    with pytest.raises(ValueError, match="even_batches must be None, 'drop' or 'pad', got 'even'"):
        DataLoader(ds, even_batches="even")
    with pytest.raises(TypeError, match="even_batches must be None"):
        DataLoader(ds, even_batches=True)
    with pytest.raises(ValueError, match="applies to an IterableDataset"):
        DataLoader(list(range(4)), even_batches="drop")
    with pytest.raises(ValueError, match="process_group is used by even_batches only"):
        DataLoader(ds, process_group=object())
    loader = DataLoader(ds, batch_size=2, even_batches="pad")
    assert loader.even_batches == "pad" and loader.process_group is None


def test_even_batches_without_a_process_group_fails_at_iter():
    torch_dist = pytest.importorskip("torch.distributed")
    if torch_dist.is_available() and torch_dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    loader = DataLoader(Rows(0, 4), batch_size=2, even_batches="drop")
    with pytest.raises(RuntimeError, match="init_process_group"):
        iter(loader)


def test_even_batches_off_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys; from dataloader import DataLoader, IterableDataset, get_worker_info\n"
            "class S(IterableDataset):\n    def __iter__(self): return iter(range(8))\n"
            "assert len(list(DataLoader(S(), batch_size=2))) == 4\n"
            "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_failed_vote_ends_the_epoch_and_close_does_not_vote_again(fake_ranks):
    class Broken:
        calls = 0

        def vote(self, mine):
            Broken.calls += 1
            raise RuntimeError("the process group is gone")

    loader = DataLoader(Rows(0, 8), batch_size=2, even_batches="drop", process_group=Broken())
    it = iter(loader)
    with pytest.raises(RuntimeError, match="the process group is gone"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    it.close()
    loader.close()
    assert Broken.calls == 1
    with pytest.raises(TypeError, match="agree on it as it goes"):
        len(iter(DataLoader(Rows(0, 8), batch_size=2, even_batches="pad", process_group=Broken())))


def test_a_started_epoch_votes_from_its_first_next_and_one_never_handed_out_does_not_vote(fake_ranks):
    def body(r, loader):
        loader.start()  # filled ahead; no vote yet
        got = rows_of(loader)
        loader.start()
        loader.close()  # the started epoch was never handed out: no vote (the others would not meet it)
        return got

    out, world = run_ranks([6, 20], body, batch_size=4, even_batches="drop", num_workers=2)
    assert [len(b) for b in out] == [2, 2]
    assert world.votes == [3, 3]
