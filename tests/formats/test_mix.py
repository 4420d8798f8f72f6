"""MixDataset of map-style sources: shares, purity of the choice, the stopping rules, the batch
path, ``location``, new weights and bad input.  NumPy only (no optional library)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from dataloader import ArrayDataset, Dataset, MixDataset, MixStream


class Rows(Dataset):
    """Items ``(tag, i)``; counts ``__getitems__`` calls and the indices they asked for."""

    def __init__(self, tag: str, n: int) -> None:
        self.tag, self.n, self.calls = tag, n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return (self.tag, int(i))

    def __getitems__(self, indices):
        self.calls.append(list(indices))
        return [self[i] for i in indices]

    def location(self, i: int) -> str:
        return f"{self.tag}/{i}"


def sources(*sizes: int) -> list[Rows]:
    return [Rows("abcdefg"[k], n) for k, n in enumerate(sizes)]


@pytest.mark.parametrize("weights", [[0.5, 0.3, 0.2], [1, 1, 1], [7, 2, 1e-3]])
@pytest.mark.parametrize("epoch", [0, 5])
def test_shares_are_within_half_a_percent_of_the_weights_over_a_million_samples(weights, epoch):
    mix = MixDataset(sources(10**7, 10**7, 10**7), weights, seed=11, stop_on="never", num_samples=2 * 10**6)
    mix.set_epoch(epoch)
    w = np.asarray(weights, dtype=float) / np.sum(weights)
    for first in (0, 123_457):  # block-aligned and not
        src, _ = mix.source_of(np.arange(first, first + 10**6))
        share = np.bincount(src, minlength=3) / 10**6
        assert np.all(np.abs(share - w) <= 0.005 * w + 1e-6), (share, w)


def test_the_choice_is_a_pure_function_of_seed_epoch_and_position():
    mix = MixDataset(sources(5000, 3000, 2000), [0.5, 0.3, 0.2], seed=3)
    n = len(mix)
    whole = mix.source_of(np.arange(n))
    rng = np.random.default_rng(0)
    order = rng.permutation(n)
    again = mix.source_of(order)  # any order, any batch split: the same map
    assert np.array_equal(again[0], whole[0][order]) and np.array_equal(again[1], whole[1][order])
    assert [mix[int(i)] for i in order[:50]] == [("abc"[s], int(k)) for s, k in zip(*mix.source_of(order[:50]))]
    mix.set_epoch(1)
    other = mix.source_of(np.arange(n))
    assert len(mix) == n  # the length never depends on the epoch
    assert not np.array_equal(other[0], whole[0])  # a new order every epoch
    assert np.array_equal(np.bincount(other[0]), np.bincount(whole[0]))
    reseeded = MixDataset(sources(5000, 3000, 2000), [0.5, 0.3, 0.2], seed=4)
    assert not np.array_equal(reseeded.source_of(np.arange(n))[0], whole[0])


@pytest.mark.parametrize("sizes", [(1000, 500, 200), (10, 20000, 7), (3, 3, 3), (100_000, 1, 50_000)])
@pytest.mark.parametrize("weights", [[0.5, 0.3, 0.2], [1, 1, 1], [0.001, 1, 0.4]])
def test_first_exhausted_gives_each_item_at_most_once_and_ends_when_one_source_runs_out(sizes, weights):
    mix = MixDataset(sources(*sizes), weights, seed=1, stop_on="first_exhausted")
    src, item = mix.source_of(np.arange(len(mix)))
    for s, size in enumerate(sizes):
        mine = item[src == s]
        assert len(np.unique(mine)) == len(mine) and (mine < size).all()
        assert np.array_equal(np.sort(mine), np.arange(len(mine)))  # the first items: 0, 1, ...
    # ...and one more position would need an item twice: some source is used up.
    assert any(np.sum(src == s) == size for s, size in enumerate(sizes)), (np.bincount(src), sizes)


@pytest.mark.parametrize("sizes", [(1000, 500, 200), (10, 20000, 7), (100, 1, 5000)])
@pytest.mark.parametrize("weights", [[0.5, 0.3, 0.2], [0.001, 1, 0.4]])
def test_all_exhausted_gives_every_item_of_every_source_and_cycles_the_smaller_ones(sizes, weights):
    mix = MixDataset(sources(*sizes), weights, seed=2, stop_on="all_exhausted")
    n = len(mix)
    src, item = mix.source_of(np.arange(n))
    for s, size in enumerate(sizes):
        mine = item[src == s]
        assert set(mine.tolist()) == set(range(size))
    # It is the shortest such mix up to one block (the final block is shuffled too).
    last = max(int(np.flatnonzero((src == s) & (item == size - 1))[0]) for s, size in enumerate(sizes))
    assert n - 1 - last < 4096


def test_never_has_num_samples_positions_and_cycles_every_source():
    mix = MixDataset(sources(7, 5), [1, 1], seed=0, stop_on="never", num_samples=10_000)
    assert len(mix) == 10_000
    src, item = mix.source_of(np.arange(2 * 4096))  # two whole blocks (never: no final block)
    for s, size in enumerate((7, 5)):
        mine = item[src == s]  # passes over the source, shuffled within each block of 4096
        assert np.array_equal(np.sort(mine), np.sort(np.arange(len(mine)) % size))
    assert len(MixDataset(sources(7, 5), [1, 1], stop_on="never")) == 12  # default: the sum


def test_a_zero_weight_leaves_a_source_out():
    mix = MixDataset(sources(100, 100, 100), [1, 0, 1], stop_on="all_exhausted")
    src, _ = mix.source_of(np.arange(len(mix)))
    assert set(src.tolist()) == {0, 2}
    assert np.allclose(mix.weights, [0.5, 0, 0.5])


def test_a_batch_is_placed_at_once_and_fetched_with_one_call_per_source():
    srcs = sources(300, 300, 300)
    mix = MixDataset(srcs, [0.5, 0.3, 0.2], seed=5)
    batch = list(range(40, 104))
    got = mix.__getitems__(batch)
    assert got == [mix[i] for i in batch]
    assert [len(d.calls) for d in srcs] == [1, 1, 1]


def test_columns_of_array_sources_stay_columns():
    a = ArrayDataset(np.arange(100, dtype=np.float32).reshape(50, 2))
    b = ArrayDataset(np.arange(200, 240, dtype=np.float32).reshape(20, 2))
    mix = MixDataset([a, b], [0.6, 0.4], seed=9)
    idx = np.arange(len(mix))
    got = mix.__getitems__(idx)
    expect = [mix[int(i)] for i in idx]
    assert all(np.array_equal(g, e) for g, e in zip(got, expect, strict=True))


def test_location_forwards_to_the_source_of_the_item():
    mix = MixDataset([Rows("a", 10), list(range(10))], [1, 1], seed=0)
    for i in range(len(mix)):
        s, k = (int(v[0]) for v in mix.source_of([i]))
        assert mix.location(i) == (f"a/{k}" if s == 0 else None)


def test_new_weights_apply_to_every_index_read_afterwards():
    mix = MixDataset(sources(10**6, 10**6), [0.9, 0.1], seed=0, stop_on="never", num_samples=100_000)
    before = mix.source_of(np.arange(100_000))[0]
    mix.set_weights([0.2, 0.8])
    after = mix.source_of(np.arange(100_000))[0]
    assert abs(np.mean(before == 1) - 0.1) < 0.005 and abs(np.mean(after == 1) - 0.8) < 0.005
    assert len(mix) == 100_000
    capped = MixDataset(sources(1000, 1000), [0.5, 0.5], stop_on="first_exhausted")
    capped.set_weights([0.9, 0.1])  # the length follows the weights under the other rules
    assert len(capped) == pytest.approx(1000 / 0.9, abs=2)


def test_bad_input_is_a_clear_error_naming_the_value():
    with pytest.raises(ValueError, match="one per source"):
        MixDataset(sources(5, 5), [1])
    with pytest.raises(ValueError, match=r"finite and >= 0, got \[1.0, -1.0\]"):
        MixDataset(sources(5, 5), [1, -1])
    with pytest.raises(ValueError, match="must not all be zero"):
        MixDataset(sources(5, 5), [0, 0])
    with pytest.raises(ValueError, match=r"weights\[1\]=1e-09 is below"):
        MixDataset(sources(5, 5), [1, 1e-9])
    with pytest.raises(ValueError, match="stop_on must be one of"):
        MixDataset(sources(5, 5), [1, 1], stop_on="first")
    with pytest.raises(ValueError, match="num_samples=10 is only for stop_on='never'"):
        MixDataset(sources(5, 5), [1, 1], num_samples=10)
    with pytest.raises(ValueError, match=r"sources\[1\] is empty"):
        MixDataset(sources(5, 0), [1, 1])
    with pytest.raises(ValueError, match="at least one source"):
        MixDataset([], [])
    with pytest.raises(TypeError, match="all map-style or all IterableDataset"):
        MixDataset([Rows("a", 3), MixStream.__new__(MixStream)], [1, 1])
    with pytest.raises(TypeError, match=r"sources\[0\] \(object\) must be a map-style dataset"):
        MixDataset([object()], [1])
    mix = MixDataset(sources(5, 5), [1, 1])
    with pytest.raises(IndexError, match="index 10 is out of range for MixDataset of length 10"):
        mix[10]
    with pytest.raises(TypeError, match="index must be an int"):
        mix[1.5]
    assert mix[-1] == mix[9]


@pytest.mark.timeout(60)
def test_many_threads_reading_a_fresh_mix_get_the_sequential_answers():
    # The epoch's tables are built by whichever threads come first (several at once here).
    rng = np.random.default_rng(1)
    batches = [rng.integers(0, 9000, 64) for _ in range(40)]
    expect = [list(MixDataset(sources(5000, 3000, 2000), [5, 3, 2], seed=8).__getitems__(b)) for b in batches]
    mix = MixDataset(sources(5000, 3000, 2000), [5, 3, 2], seed=8)
    got: dict[int, list] = {}
    start = threading.Barrier(8)

    def read(t: int) -> None:
        start.wait()
        for k in range(t, len(batches), 8):
            got[k] = list(mix.__getitems__(batches[k]))
    threads = [threading.Thread(target=read, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert [got[k] for k in range(len(batches))] == expect
