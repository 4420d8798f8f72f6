"""``on_error="skip"`` / ``"replace"`` over every builder kind: failing items are narrowed out
of batch-level paths, dropped or replaced the same way for any ``num_workers``, and recorded
in epoch order (``dataloader._engine.recover``, ``failures``, ``policed``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, FailureRecord
from dataloader._collation.default import default_collate
from dataloader._engine.build import BuilderKind
from dataloader._engine.builders import MapBuild, map_builder
from dataloader._engine.recover import substitute_index
from tests.engine._policy_data import N, AsyncGetitems, AsyncItems, Getitems, Items, arrays, as_list

# Batches over range(N) with out-of-range (failing) indices at known places; one batch all bad.
BATCHES = [[0, 1, 2, 3], [4, N + 1, 5, 6], [N + 2, N + 3, N + 4, N + 5], [7, 8, N + 6, 9], [10, 11, 12, 13]]
BAD = {i for b in BATCHES for i in b if i >= N}

# kind -> (dataset factory, loader options, expected kind with / without workers)
KINDS = {
    "items": (Items, {}, BuilderKind.ITEMS),
    "getitems": (Getitems, {}, BuilderKind.GETITEMS),
    "lanes": (Items, {"item_concurrency": 2}, BuilderKind.LANES),
    "native": (arrays, {}, None),  # native_gather without workers, native_rows with
    "async": (AsyncItems, {}, BuilderKind.ASYNC),
    "async_getitems": (AsyncGetitems, {}, BuilderKind.ASYNC),
}


def _kind(dataset, num_workers, item_concurrency=1):
    lanes = object() if item_concurrency > 1 else None
    build = MapBuild(dataset, True, default_collate, None, item_concurrency, workers=num_workers > 0, lanes=lanes,
                     async_loop=None)
    return map_builder(build, (0, 0))[0].kind


def _expected_skip():
    return [[10 * i for i in b if i < N] for b in BATCHES if any(i < N for i in b)]


def _expected_replace(seed):
    return [[10 * i if i < N else 10 * substitute_index(seed, 0, k, p, 0, N) for p, i in enumerate(b)]
            for k, b in enumerate(BATCHES)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_builder_kind_skips_or_replaces_exactly_the_failing_items(kind, policy, num_workers):
    make, options, expected_kind = KINDS[kind]
    ds = make()
    if kind == "native":
        expected_kind = BuilderKind.NATIVE_ROWS if num_workers else BuilderKind.NATIVE_GATHER
    if kind not in ("async", "async_getitems"):
        assert _kind(ds, num_workers, options.get("item_concurrency", 1)) is expected_kind
    with DataLoader(ds, batch_sampler=BATCHES, num_workers=num_workers, on_error=policy, seed=5,
                    **options) as loader:
        got = [as_list(b) for b in loader]
        failures, stats = loader.failures, loader.stats
    assert got == (_expected_skip() if policy == "skip" else _expected_replace(5))
    # Every bad index once, in epoch order (substitutes never fail here).
    assert [r.index for r in failures] == [i for b in BATCHES for i in b if i >= N]
    assert all(type(r) is FailureRecord and r.exc_type is IndexError and r.epoch == 0 for r in failures)
    if kind in ("items", "getitems", "lanes"):
        assert [r.location for r in failures] == [f"/data/{i}.bin" for i in sorted(BAD)]
    assert stats.failed == len(BAD)
    assert (stats.skipped, stats.replaced) == ((len(BAD), 0) if policy == "skip" else (0, len(BAD)))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["skip", "replace"])
@pytest.mark.parametrize("num_workers", [0, 2])
def test_without_auto_batching_a_failing_item_is_skipped_or_replaced(policy, num_workers):
    order = [0, N + 1, 2, N + 2, 4]
    with DataLoader(Items(), batch_size=None, sampler=order, num_workers=num_workers, on_error=policy,
                    seed=3) as loader:
        got = [int(b) for b in loader]
    if policy == "skip":
        assert got == [0, 20, 40]
    else:
        assert got == [0, 10 * substitute_index(3, 0, 1, 0, 0, N), 20, 10 * substitute_index(3, 0, 3, 0, 0, N), 40]


@pytest.mark.timeout(120)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bad=st.sets(st.integers(0, N - 1), max_size=8),
    batch_size=st.integers(1, 7),
    shuffle=st.booleans(),
    policy=st.sampled_from(["skip", "replace"]),
    num_workers=st.integers(1, 3),
    prefetch_depth=st.integers(1, 3),
    item_concurrency=st.integers(1, 3),
    getitems=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_output_and_failures_are_the_same_for_any_worker_configuration(
    bad, batch_size, shuffle, policy, num_workers, prefetch_depth, item_concurrency, getitems, seed
):
    class Broken(Getitems if getitems else Items):
        def __getitem__(self, index):
            if index in bad:
                raise OSError(f"corrupt item {index}")
            return super().__getitem__(index)

        if getitems:
            def __getitems__(self, indices):
                return [self[i] for i in indices]

    epoch = dict(batch_size=batch_size, shuffle=shuffle, seed=seed, on_error=policy, max_failures=N)

    def run(**kw):
        with DataLoader(Broken(), **epoch, **kw) as loader:
            return [as_list(b) for b in loader], loader.failures

    expected = run()
    assert run(num_workers=num_workers, prefetch_depth=prefetch_depth, item_concurrency=item_concurrency) == expected
    assert {r.index for r in expected[1]} <= bad
    if policy == "skip":
        assert {r.index for r in expected[1]} == bad
        assert sum(map(len, expected[0])) == N - len(bad)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_a_shuffled_native_rows_epoch_under_a_policy_gives_the_plain_loaders_batches(policy):
    # Shuffled native_rows epochs hand out permutation spans as work items (spans.py).
    ds = arrays()
    opts = dict(batch_size=4, shuffle=True, seed=9)
    with DataLoader(ds, num_workers=2, on_error=policy, **opts) as loader:
        got = [as_list(b) for b in loader]
    assert got == [as_list(b) for b in DataLoader(ds, **opts)]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("make", [Items, AsyncItems, Getitems])
def test_a_failing_transform_is_its_items_failure(make, num_workers):
    def transform(x):
        if x == 50:
            raise ValueError("cannot transform item 5")
        return x + 1

    with DataLoader(make(), batch_size=4, num_workers=num_workers, transform=transform, on_error="skip",
                    item_concurrency=2) as loader:
        got = [as_list(b) for b in loader]
        failures = loader.failures
    assert got[1] == [41, 61, 71] and sum(map(len, got)) == N - 1
    assert [(r.index, r.exc_type, r.message) for r in failures] == [(5, ValueError, "cannot transform item 5")]


class _CountedGetitems(AsyncGetitems):
    """``AsyncGetitems`` counting, per index, the ``__getitems__`` batches that held it; item 0 fails."""

    def __init__(self):
        self.calls = {}

    async def __getitems__(self, indices):
        for index in indices:
            self.calls[index] = self.calls.get(index, 0) + 1
        if 0 in indices:
            raise OSError("unreachable 0")
        return await super().__getitems__(indices)


@pytest.mark.timeout(60)
def test_a_failing_async_getitems_batch_is_narrowed_from_its_halves_not_fetched_whole_again():
    ds = _CountedGetitems()
    loader = DataLoader(ds, batch_size=8, on_error="skip", num_workers=0, item_concurrency=1)
    assert as_list(next(iter(loader))) == [10 * i for i in range(1, 8)]
    # the batch (fails), then halves down to item 0: [0..3], [0, 1], [0]
    assert ds.calls[0] == 4
