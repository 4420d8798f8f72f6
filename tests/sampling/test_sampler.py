"""Samplers: PyTorch's lengths and validation, seeding rules, and the int64 index-array path."""

from __future__ import annotations

import copy
import itertools
import pickle
import tracemalloc
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader._native._permute import KEY_WORDS, Permutation
from dataloader._sampling.batch import iter_index_arrays
from dataloader.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

FAST = settings(max_examples=60, deadline=None)


def as_lists(arrays):
    out = []
    for a in arrays:
        assert isinstance(a, np.ndarray) and a.dtype == np.int64 and a.ndim == 1
        out.append(a.tolist())
    return out


# --- Sampler / SequentialSampler -----------------------------------------------------------


def test_sampler_base_requires_iter():
    with pytest.raises(NotImplementedError, match="Sampler must implement __iter__"):
        iter(Sampler())


def test_sequential_order_and_len():
    s = SequentialSampler(range(7))
    assert list(s) == list(range(7))
    assert len(s) == 7
    assert list(SequentialSampler([])) == []


def test_sequential_reads_length_each_epoch():
    data = [0, 1]
    s = SequentialSampler(data)
    data.append(2)
    assert list(s) == [0, 1, 2]
    assert len(s) == 3


def test_sequential_billion_rows_is_lazy_and_constant_memory():
    n = 10**9
    bs = BatchSampler(SequentialSampler(range(n)), batch_size=1000, drop_last=False)
    assert len(bs) == n // 1000
    tracemalloc.start()
    try:
        it = bs._index_arrays()
        first = [next(it) for _ in range(300)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert first[0].tolist() == list(range(1000))
    assert first[-1][-1] == 300 * 1000 - 1
    assert peak < 64 << 20  # arange(10**9) would be 8 GB
    assert next(iter(bs)) == list(range(1000))


# --- RandomSampler -------------------------------------------------------------------------


def test_random_sampler_validation_messages():
    with pytest.raises(
        TypeError, match="replacement should be a boolean value, but got replacement=1"
    ):
        RandomSampler(range(3), replacement=1)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="num_samples should be a positive integer value"):
            RandomSampler(range(3), num_samples=bad)
    with pytest.raises(
        ValueError, match="num_samples should be a positive integer value, but got num_samples=0"
    ):
        RandomSampler([])


def test_random_sampler_is_a_permutation():
    s = RandomSampler(range(100), generator=0)
    out = list(s)
    assert sorted(out) == list(range(100))
    assert len(s) == 100
    assert out != list(range(100))


@FAST
@given(n=st.integers(1, 50), k=st.integers(1, 200), seed=st.integers(0, 2**32))
def test_random_sampler_num_samples_without_replacement(n, k, seed):
    out = list(RandomSampler(range(n), num_samples=k, generator=seed))
    assert len(out) == k == len(RandomSampler(range(n), num_samples=k))
    passes, rest = divmod(k, n)
    for p in range(passes):  # PyTorch: whole permutations, then a cut one
        assert sorted(out[p * n : (p + 1) * n]) == list(range(n))
    tail = out[passes * n :]
    assert len(tail) == rest and len(set(tail)) == rest


@FAST
@given(n=st.integers(1, 50), k=st.integers(1, 300), seed=st.integers(0, 2**32))
def test_random_sampler_with_replacement(n, k, seed):
    out = list(RandomSampler(range(n), replacement=True, num_samples=k, generator=seed))
    assert len(out) == k
    assert all(type(i) is int and 0 <= i < n for i in out)


def test_random_sampler_replacement_defaults_to_len():
    s = RandomSampler(range(10), replacement=True, generator=1)
    assert len(s) == 10 and len(list(s)) == 10
    assert len(set(list(RandomSampler(range(5), True, 2000, generator=3)))) == 5


def test_seeded_epochs_are_pure_functions_of_seed_and_epoch():
    a = RandomSampler(range(50), generator=7)
    epochs = [list(a) for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    assert a.epoch == 3
    b = RandomSampler(range(50), generator=7)
    b.set_epoch(2)
    assert list(b) == epochs[2]
    b.set_epoch(0)
    assert [list(b) for _ in range(3)] == epochs
    assert list(RandomSampler(range(50), generator=8)) != epochs[0]


def test_seed_equals_seedsequence_of_seed_and_epoch():
    # Re-pinned for the Feistel shuffle: the order is the Permutation keyed by the first
    # ROUNDS draws of Generator(PCG64(SeedSequence([seed, epoch]))), not rng.permutation.
    s = RandomSampler(range(20), generator=5)
    s.set_epoch(4)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, 4])))
    keys = rng.integers(0, 2**64, size=KEY_WORDS, dtype=np.uint64).tolist()
    assert list(s) == [Permutation(20, keys).index_at(p) for p in range(20)]


def test_numpy_generator_is_drawn_from_and_advances():
    s = RandomSampler(range(30), generator=np.random.default_rng(3))
    e0, e1 = list(s), list(s)
    assert e0 != e1
    t = RandomSampler(range(30), generator=np.random.default_rng(3))
    assert [list(t), list(t)] == [e0, e1]


def test_no_generator_draws_fresh_entropy_each_epoch():
    s = RandomSampler(range(1000))
    assert list(s) != list(s)


@pytest.mark.parametrize(
    "bad, err, text",
    [
        (1.5, TypeError, "float"),
        ("3", TypeError, "str"),
        (True, TypeError, "bool"),
        (object(), TypeError, "object"),
        (-1, ValueError, "generator=-1 must be >= 0"),
    ],
)
def test_bad_generator(bad, err, text):
    for make in (
        lambda: RandomSampler(range(3), generator=bad),
        lambda: SubsetRandomSampler([1, 2], generator=bad),
        lambda: WeightedRandomSampler([1.0, 2.0], 2, generator=bad),
    ):
        with pytest.raises(err, match=text):
            make()


def test_set_epoch_validation():
    s = RandomSampler(range(3), generator=0)
    with pytest.raises(ValueError, match="epoch=-1"):
        s.set_epoch(-1)
    with pytest.raises(TypeError, match="epoch must be an int"):
        s.set_epoch(1.0)


def test_generator_can_be_reassigned():
    s = RandomSampler(range(30))
    s.generator = 4
    assert list(s) == list(RandomSampler(range(30), generator=4))
    with pytest.raises(TypeError):
        s.generator = "x"


def test_random_sampler_empty_at_iteration_is_value_error():
    data = [1]
    s = RandomSampler(data, num_samples=3)
    data.clear()
    with pytest.raises(ValueError, match="empty data_source"):
        iter(s)


# --- SubsetRandomSampler -------------------------------------------------------------------


def test_subset_random_sampler():
    idx = [10, 20, 30, 40]
    s = SubsetRandomSampler(idx, generator=1)
    out = list(s)
    assert sorted(out) == idx and len(s) == 4
    assert list(SubsetRandomSampler(idx, generator=1)) == out
    keys = ["a", "b", "c"]
    assert sorted(SubsetRandomSampler(keys)) == keys


# --- WeightedRandomSampler -----------------------------------------------------------------


@pytest.mark.parametrize(
    "weights, num_samples, replacement, text",
    [
        ([1.0, 2.0], 0, True, "num_samples should be a positive integer value"),
        ([1.0, 2.0], -3, True, "num_samples should be a positive integer value"),
        ([1.0, 2.0], True, True, "num_samples should be a positive integer value"),
        ([1.0, 2.0], 1.0, True, "num_samples should be a positive integer value"),
        ([1.0, 2.0], 2, 1, "replacement should be a boolean value"),
        ([[1.0, 2.0]], 2, True, r"weights should be a 1d sequence .* shape \(1, 2\)"),
        ([1.0, float("nan")], 2, True, r"finite, got weights\[1\]=nan"),
        ([1.0, float("inf")], 2, True, r"finite, got weights\[1\]=inf"),
        ([1.0, -0.5], 2, True, r"non-negative, got weights\[1\]=-0.5"),
        ([0.0, 0.0], 2, True, "all zero"),
        ([], 2, True, "all zero"),
        ([1.0, 0.0, 2.0], 3, False, "num_samples=3 > 2 non-zero weights"),
        (["a", "b"], 2, True, "weights must be a 1-D sequence of numbers"),
    ],
)
def test_weighted_validation(weights, num_samples, replacement, text):
    with pytest.raises(ValueError, match=text):
        WeightedRandomSampler(weights, num_samples, replacement=replacement)


def test_weighted_with_replacement_frequencies():
    w = [0.0, 1.0, 3.0, 0.0, 6.0]
    s = WeightedRandomSampler(w, 20000, generator=0)
    out = list(s)
    assert len(s) == len(out) == 20000
    counts = Counter(out)
    assert counts[0] == counts[3] == 0
    for i, expected in ((1, 0.1), (2, 0.3), (4, 0.6)):
        assert abs(counts[i] / 20000 - expected) < 0.02


def test_weighted_without_replacement():
    w = np.array([0.0, 1.0, 3.0, 0.0, 6.0])
    s = WeightedRandomSampler(w, 3, replacement=False, generator=0)
    for _ in range(20):
        out = list(s)
        assert sorted(out) == [1, 2, 4]
    first = Counter(next(iter(s)) for _ in range(5000))  # first draw ~ weights
    assert abs(first[4] / 5000 - 0.6) < 0.03 and abs(first[1] / 5000 - 0.1) < 0.02
    second = Counter(list(s)[1] for _ in range(4000))  # P(2nd = 1) = .3*1/7 + .6*1/4
    assert abs(second[1] / 4000 - (0.3 / 7 + 0.6 / 4)) < 0.03


def test_weighted_weights_are_copied():
    w = np.array([1.0, 0.0])
    s = WeightedRandomSampler(w, 50, generator=1)
    w[:] = [0.0, 1.0]
    assert set(s) == {0}


# --- BatchSampler --------------------------------------------------------------------------


def test_batch_sampler_torch_examples():
    assert list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False)) == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9],
    ]
    assert list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=True)) == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
    ]


@pytest.mark.parametrize("bad", [0, -1, 1.0, True, "2", None])
def test_batch_sampler_rejects_batch_size(bad):
    with pytest.raises(
        ValueError, match=f"batch_size should be a positive integer value, but got batch_size={bad}"
    ):
        BatchSampler(range(3), bad, False)


@pytest.mark.parametrize("bad", [0, 1, None, "True"])
def test_batch_sampler_rejects_drop_last(bad):
    with pytest.raises(ValueError, match="drop_last should be a boolean value"):
        BatchSampler(range(3), 2, bad)


@FAST
@given(n=st.integers(0, 300), bs=st.integers(1, 40), drop_last=st.booleans())
def test_batch_sampler_len_is_exact(n, bs, drop_last):
    b = BatchSampler(SequentialSampler(range(n)), bs, drop_last)
    batches = list(b)
    assert len(b) == len(batches) == (n // bs if drop_last else -(-n // bs))
    assert all(len(x) == bs for x in batches[:-1])
    flat = list(itertools.chain.from_iterable(batches))
    assert flat == list(range(len(flat)))
    assert len(flat) == (n - n % bs if drop_last else n)


def _make_sampler(kind, n, k, seed):
    if kind == "seq":
        return SequentialSampler(range(n))
    if kind == "rand":
        return RandomSampler(range(n), num_samples=k, generator=seed)
    if kind == "rand_repl":
        return RandomSampler(range(n), replacement=True, num_samples=k, generator=seed)
    if kind == "weighted":
        w = np.random.default_rng(seed).random(n) + 0.01
        return WeightedRandomSampler(w, k, generator=seed)
    if kind == "weighted_norepl":
        w = np.random.default_rng(seed).random(n) + 0.01
        return WeightedRandomSampler(w, min(k, n), replacement=False, generator=seed)
    if kind == "subset":
        return SubsetRandomSampler(list(range(0, 2 * n, 2)), generator=seed)
    return list(np.random.default_rng(seed).integers(0, n, size=k))  # a plain iterable


KINDS = ["seq", "rand", "rand_repl", "weighted", "weighted_norepl", "subset", "list"]


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    n=st.integers(1, 400),
    k=st.integers(1, 900),
    bs=st.integers(1, 70),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_index_arrays_equal_iter(kind, n, k, bs, drop_last, seed):
    via_iter = list(BatchSampler(_make_sampler(kind, n, k, seed), bs, drop_last))
    b = BatchSampler(_make_sampler(kind, n, k, seed), bs, drop_last)
    via_arrays = as_lists(b._index_arrays())
    assert via_arrays == via_iter
    assert len(b) == len(via_iter)


@pytest.mark.parametrize("kind", ["rand", "rand_repl", "weighted"])
def test_index_arrays_equal_iter_across_chunk_boundaries(kind):
    n, k = 70_001, 150_007  # more than two INDEX_CHUNK_ROWS chunks
    via_iter = list(BatchSampler(_make_sampler(kind, n, k, 11), 1000, False))
    via_arrays = as_lists(BatchSampler(_make_sampler(kind, n, k, 11), 1000, False)._index_arrays())
    assert via_arrays == via_iter
    assert sum(map(len, via_iter)) == k


def test_index_arrays_batch_larger_than_chunk():
    b = BatchSampler(SequentialSampler(range(200_000)), 150_000, False)
    out = as_lists(b._index_arrays())
    assert [len(x) for x in out] == [150_000, 50_000]
    assert out[0][-1] == 149_999 and out[1][0] == 150_000


def test_index_arrays_claims_one_epoch_like_iter():
    s = RandomSampler(range(40), generator=2)
    b = BatchSampler(s, 8, False)
    e0 = list(b)
    e1 = as_lists(b._index_arrays())
    assert s.epoch == 2
    s.set_epoch(0)
    assert as_lists(b._index_arrays()) == e0
    assert list(b) == e1


def test_index_arrays_respects_overridden_iter():
    class Reversed(SequentialSampler):
        def __iter__(self):
            return iter(range(len(self.data_source) - 1, -1, -1))

    b = BatchSampler(Reversed(range(5)), 2, False)
    assert as_lists(b._index_arrays()) == list(b) == [[4, 3], [2, 1], [0]]

    class Evens(BatchSampler):
        def __iter__(self):
            return iter([[0, 2], [4]])

    assert as_lists(Evens(SequentialSampler(range(9)), 3, False)._index_arrays()) == [[0, 2], [4]]


def test_index_arrays_fallback_rejects_non_int_batches():
    b = BatchSampler(["a", "b"], 2, False)
    with pytest.raises(TypeError, match="flat sequence of ints"):
        list(b._index_arrays())
    with pytest.raises(TypeError, match="float64"):
        list(BatchSampler([0.5, 1.5], 2, False)._index_arrays())


def test_batch_sampler_is_lazy():
    pulled = []

    class Counting(Sampler[int]):
        def __iter__(self):
            for i in itertools.count():
                pulled.append(i)
                yield i

    it = iter(BatchSampler(Counting(), 4, False))
    assert next(it) == [0, 1, 2, 3]
    assert len(pulled) == 4


def test_iter_index_arrays_any_batch_sampler():
    assert as_lists(iter_index_arrays([[1, 2], (3,), np.array([4, 5], dtype=np.int32)])) == [
        [1, 2],
        [3],
        [4, 5],
    ]
    b = BatchSampler(SequentialSampler(range(5)), 2, True)
    assert as_lists(iter_index_arrays(b)) == [[0, 1], [2, 3]]


def test_index_arrays_are_not_writable_views_of_shared_state():
    b = BatchSampler(RandomSampler(range(10), generator=0), 4, False)
    first = next(b._index_arrays())
    with pytest.raises(ValueError):
        first[0] = 99


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda s: pickle.loads(pickle.dumps(s))])
def test_seeded_samplers_copy_and_pickle_with_their_epoch(copier):
    s = RandomSampler(range(20), generator=3)
    list(s)
    twin = copier(s)
    assert twin.epoch == s.epoch == 1
    assert list(twin) == list(s)
    w = copier(WeightedRandomSampler([1.0, 2.0, 3.0], 5, generator=np.random.default_rng(0)))
    assert len(list(w)) == 5
