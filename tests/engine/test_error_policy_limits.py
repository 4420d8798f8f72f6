"""The error policy's limits and edges: ``max_failures`` (count, fraction, default),
``TooManyFailures``, exact resume with failures, interrupts and collate errors passing
through, argument checks, and ``on_error="raise"`` untouched."""

from __future__ import annotations

import numpy as np
import pytest

from dataloader import DataLoader, IterableDataset, TooManyFailures
from dataloader._engine.error_policy import DEFAULT_MAX_FAILURE_FRACTION, FRACTION_MIN_FAILURES
from dataloader._engine.epoch import Epoch
from dataloader._engine.iterator import SequentialEpoch
from dataloader._engine.recover import substitute_index
from tests._support import json_roundtrip
from tests.engine._policy_data import Items, as_list


class Broken(Items):
    """``Items`` over ``n`` items whose ``bad`` ones raise ``OSError``; ``interrupt``: raises
    ``KeyboardInterrupt`` there."""

    def __init__(self, n=100, bad=(), interrupt=None):
        self.n, self.bad, self.interrupt = n, frozenset(bad), interrupt

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index == self.interrupt:
            raise KeyboardInterrupt
        if index in self.bad:
            raise OSError(f"unreadable {index}")
        return index


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_count_limit_raises_too_many_failures_at_the_batch_that_passes_it(num_workers):
    loader = DataLoader(Broken(bad={3, 14, 15, 40}), batch_size=10, num_workers=num_workers,
                        on_error="skip", max_failures=2)
    it = iter(loader)
    assert as_list(next(it)) == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # 1 failure
    with pytest.raises(TooManyFailures, match=r"3 of 20 items failed in epoch 0, more than max_failures=2") as info:
        next(it)  # batch 1: failures 2 and 3
    assert (info.value.failed, info.value.seen, info.value.epoch) == (3, 20, 0)
    assert [r.index for r in info.value.records] == [3, 14, 15]
    assert "max_failures=N" in str(info.value)
    with pytest.raises(StopIteration):  # the epoch ended
        next(it)



@pytest.mark.timeout(30)
@pytest.mark.parametrize("limit", [np.int64(2), np.float32(0.2)])
def test_numpy_scalars_are_limits_like_their_python_numbers(limit):
    # A limit read from a config array is a NumPy scalar: np.int64 is a count, np.float32 a fraction.
    bad = set(range(1, 10)) | {12, 13}
    loader = DataLoader(Broken(bad=bad), batch_size=10, on_error="skip", max_failures=limit)
    it = iter(loader)
    if isinstance(limit, np.integer):
        with pytest.raises(TooManyFailures, match=r"9 of 10 items failed .* max_failures=2"):
            next(it)
    else:
        assert as_list(next(it)) == [0]
        with pytest.raises(TooManyFailures, match=r"11 of 20 items failed .* max_failures=0.2"):
            next(it)

@pytest.mark.timeout(30)
def test_a_fraction_is_judged_against_the_items_seen_from_the_tenth_failure_on():
    # Batch 0 (10 items) has 9 failures: over 10% but under the floor; batch 1 brings 10 of 20.
    bad = set(range(1, 10)) | {12}
    loader = DataLoader(Broken(bad=bad), batch_size=10, on_error="skip", max_failures=0.2)
    it = iter(loader)
    assert as_list(next(it)) == [0]
    with pytest.raises(TooManyFailures, match=r"10 of 20 items failed .* max_failures=0.2"):
        next(it)
    assert FRACTION_MIN_FAILURES == 10


@pytest.mark.timeout(30)
def test_the_default_limit_is_a_tenth_under_skip_and_none_under_raise():
    assert DEFAULT_MAX_FAILURE_FRACTION == 0.1
    bad = set(range(0, 100, 9))  # 12 of 100: past 10% once 10 have failed
    with pytest.raises(TooManyFailures):
        list(DataLoader(Broken(bad=bad), batch_size=10, on_error="replace"))
    assert len(list(DataLoader(Broken(bad=bad), batch_size=10, on_error="skip", max_failures=0.5))) == 10
    assert DataLoader(Broken(), on_error="skip").max_failures is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", ["skip", "replace"])
@pytest.mark.parametrize("workers", [(0, 2), (2, 0), (2, 3)])
def test_resume_mid_epoch_with_failures_is_exact_and_keeps_the_counts(policy, workers):
    bad = {5, 6, 17, 33, 34, 35, 36, 37, 38, 39, 71}  # batch 3 (30..39) half bad, one all-bad under skip
    bad |= set(range(40, 50))
    opts = dict(batch_size=10, shuffle=True, seed=11, on_error=policy, max_failures=50)
    full_loader = DataLoader(Broken(bad=bad), **opts)
    full = [as_list(b) for b in full_loader]
    full_failures = full_loader.failures
    first = DataLoader(Broken(bad=bad), num_workers=workers[0], **opts)
    it = iter(first)
    head = [as_list(next(it)) for _ in range(4)]
    state = json_roundtrip(first.state_dict())
    seen_before = first.stats.failed
    assert state["failures"]["failed"] == seen_before == len(first.failures)
    it.close()
    second = DataLoader(Broken(bad=bad), num_workers=workers[1], **opts)
    second.load_state_dict(state)
    tail = [as_list(b) for b in second]
    assert head + tail == full
    assert first.failures + second.failures == full_failures
    assert second.stats.failed == len(full_failures)
    assert second.stats.skipped + second.stats.replaced == len(bad)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_interrupts_pass_through_the_policy(policy, num_workers):
    # a seed whose substitute for item 1 is not the interrupting item 13 (seedless, 1 run in 100 was)
    assert substitute_index(0, 0, 0, 1, 0, 100) != 13
    loader = DataLoader(Broken(bad={1}, interrupt=13), batch_size=4, num_workers=num_workers, on_error=policy,
                        seed=0)
    it = iter(loader)
    next(it), next(it), next(it)
    with pytest.raises(KeyboardInterrupt):
        next(it)
    assert loader.state_dict()["yielded"] == 3


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_a_collate_fn_error_fails_its_batch_under_every_policy(policy, num_workers):
    def collate(items):
        if items == [4, 5, 6, 7]:
            raise ValueError("cannot collate 5")
        return items

    loader = DataLoader(Broken(n=12, bad={1}), batch_size=4, collate_fn=collate, num_workers=num_workers,
                        on_error=policy)
    it = iter(loader)
    assert len(next(it)) == (3 if policy == "skip" else 4)
    with pytest.raises(ValueError, match="cannot collate 5"):
        next(it)
    assert next(it) == [8, 9, 10, 11]
    assert {r.index for r in loader.failures} == {1}  # (a substitute may draw 1 again)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_collate_fn_error_after_failed_items_still_counts_them(num_workers):
    def collate(items):
        if items[0] == 0:
            raise ValueError("cannot collate the first batch")
        return items

    loader = DataLoader(Broken(n=12, bad={1, 2}), batch_size=4, collate_fn=collate, num_workers=num_workers,
                        on_error="skip", max_failures=3)
    it = iter(loader)
    with pytest.raises(ValueError, match="cannot collate the first batch"):
        next(it)
    assert [r.index for r in loader.failures] == [1, 2] and loader.stats.failed == 2
    assert next(it) == [4, 5, 6, 7]


@pytest.mark.timeout(30)
def test_replace_gives_up_after_sixteen_failing_substitutes():
    loader = DataLoader(Broken(n=20, bad=set(range(20))), batch_size=2, on_error="replace", max_failures=1000)
    with pytest.raises(RuntimeError, match="16 substitutes failed in a row") as info:
        next(iter(loader))
    assert isinstance(info.value.__cause__, OSError)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_batch_whose_substitutes_all_fail_counts_its_failures_toward_the_limit(num_workers):
    loader = DataLoader(Broken(n=20, bad=set(range(20))), batch_size=2, on_error="replace", max_failures=20,
                        num_workers=num_workers)
    it = iter(loader)
    with pytest.raises(RuntimeError, match="16 substitutes failed in a row"):
        next(it)  # item 0 and its 16 substitutes: 17 failures, the limit not passed yet
    assert len(loader.failures) == loader.stats.failed == 17
    assert loader.failures[0].index == 0
    with pytest.raises(TooManyFailures) as info:
        next(it)  # 34 failures: past max_failures=20, the epoch ends
    assert info.value.failed == 34
    with pytest.raises(StopIteration):
        next(it)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_failed_substitutes_are_counted_among_the_items_seen(num_workers):
    # Each substitute tried is an item seen, failed or not: never "17 of 4 items failed".
    loader = DataLoader(Broken(n=100, bad=set(range(100))), batch_size=4, on_error="replace", max_failures=5,
                        num_workers=num_workers)
    with pytest.raises(TooManyFailures, match=r"17 of 20 items failed in epoch 0") as info:
        next(iter(loader))  # place 0 and its 16 substitutes failed: 4 items + 16 substitutes seen
    assert (info.value.failed, info.value.seen) == (17, 20)
    half = DataLoader(Broken(n=100, bad=set(range(0, 100, 2))), batch_size=10, on_error="replace",
                      max_failures=1000, num_workers=num_workers)
    it = iter(half)
    for _ in range(5):
        next(it)
    counts = half.state_dict()["failures"]
    it.close()
    assert counts["failed"] > counts["replaced"] == 25  # some substitutes failed too
    assert counts["seen"] == 50 + counts["failed"]  # the batches' items, then every substitute tried


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_saved_after_too_many_failures_resumes_at_the_refused_batch(num_workers):
    # The refused batch was never returned: a resume (with a higher limit) builds it again.
    def loader(limit):
        return DataLoader(Broken(n=40, bad={3, 14, 15, 16}), batch_size=10, on_error="skip", max_failures=limit,
                          num_workers=num_workers)

    with loader(10) as reference:
        full = [as_list(b) for b in reference]
        assert reference.stats.failed == 4
    first = loader(2)
    it = iter(first)
    head = [as_list(next(it))]
    with pytest.raises(TooManyFailures, match="4 of 20 items failed"):
        next(it)  # batch 1 refused
    state = json_roundtrip(first.state_dict())
    first.close()
    assert state["yielded"] == 1
    assert state["failures"] == {"seen": 10, "failed": 1, "skipped": 1, "replaced": 0}
    with loader(10) as again:
        again.load_state_dict(state)
        assert head + [as_list(b) for b in again] == full
        assert again.stats.failed == 4


def test_raise_builds_the_plain_epochs_and_saves_no_failures():
    loader = DataLoader(Broken(bad={5}), batch_size=4)
    it = iter(loader)
    assert type(it) is SequentialEpoch
    assert as_list(next(it)) == [0, 1, 2, 3]
    with pytest.raises(OSError, match="unreadable 5"):
        next(it)
    assert as_list(next(it)) == [8, 9, 10, 11]
    assert "failures" not in loader.state_dict()
    assert loader.failures == [] and loader.stats.failed == 0
    with DataLoader(Broken(), batch_size=4, num_workers=2) as threaded:
        assert type(iter(threaded)) is Epoch


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"on_error": "ignore"}, ValueError, r"on_error must be one of \('raise', 'skip', 'replace'\), got on_error='ignore'"),
    ({"on_error": None}, TypeError, "on_error must be one of"),
    ({"on_error": "skip", "max_failures": -1}, ValueError, "max_failures must be >= 0 as a count, got max_failures=-1"),
    ({"on_error": "skip", "max_failures": 1.5}, ValueError, r"in \(0, 1\), got max_failures=1.5"),
    ({"on_error": "skip", "max_failures": True}, TypeError, "got bool True"),
    ({"on_error": "skip", "max_failures": "1%"}, TypeError, "got str '1%'"),
    ({"max_failures": 3}, ValueError, "max_failures=3 needs on_error='skip' or 'replace'"),
])
def test_bad_arguments_are_refused_naming_the_value(kwargs, error, match):
    with pytest.raises(error, match=match):
        DataLoader(Broken(), **kwargs)


def test_an_iterable_dataset_refuses_skip_and_replace():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="on_error='skip' needs a map-style dataset"):
        DataLoader(Stream(), on_error="skip")


def test_a_saved_failures_entry_is_checked_on_load():
    loader = DataLoader(Broken(bad={1}), batch_size=4, on_error="skip")
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    state["failures"]["failed"] = -1
    with pytest.raises(ValueError, match="'failed'"):
        DataLoader(Broken(bad={1}), batch_size=4, on_error="skip").load_state_dict(state)


class _Unprintable(Exception):
    def __str__(self):
        raise ValueError("no text")


class _UnprintableAt2(Items):
    def __getitem__(self, index):
        if index == 2:
            raise _Unprintable()
        return index


@pytest.mark.timeout(30)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_item_exception_whose_str_fails_is_recorded_not_raised(num_workers):
    loader = DataLoader(_UnprintableAt2(), batch_size=4, on_error="skip", num_workers=num_workers)
    assert as_list(next(iter(loader))) == [0, 1, 3]
    (rec,) = loader.failures
    assert (rec.index, rec.exc_type) == (2, _Unprintable)
    assert rec.message == "<str() of the _Unprintable raised ValueError>"
