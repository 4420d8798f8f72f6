"""Batches of a shuffled epoch as permutation spans (``_sampling/spans.py``): the batches of
``BatchSampler._index_arrays``, position for position, whatever the batch size, the passes
(``num_samples`` beyond the data), ``drop_last`` or a resumed start; and only where they apply.
"""

from __future__ import annotations

import numpy as np
import pytest

from dataloader import ArrayDataset, DataLoader
from dataloader._engine import plan
from dataloader._native._rowjobs import RowJobs
from dataloader._native._ring import Window
from dataloader._native._status import Status
from dataloader._native._stats import Recorder
from dataloader._sampling.permute import PermutationSpan, seeded_permutation
from dataloader._sampling.spans import index_spans, rebatch_spans
from dataloader.sampler import BatchSampler, RandomSampler, SequentialSampler


def _rows(batch):
    return np.asarray(batch).tolist()


def _sampler(n, seed, **kw):
    return RandomSampler(range(n), generator=np.random.default_rng(seed), **kw)


@pytest.mark.parametrize("n", [1, 7, 100, 1025])
@pytest.mark.parametrize("batch_size", [1, 3, 64, 2000])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("num_samples", [None, 1, 250, 2500])
def test_spans_give_the_batches_of_the_index_arrays(n, batch_size, drop_last, num_samples):
    arrays = BatchSampler(_sampler(n, 3, num_samples=num_samples, replacement=False), batch_size, drop_last)
    spans = BatchSampler(_sampler(n, 3, num_samples=num_samples, replacement=False), batch_size, drop_last)
    for _epoch in range(2):  # the generator advances alike, epoch after epoch
        expected = [b.tolist() for b in arrays._index_arrays()]
        got = list(index_spans(spans))
        assert [_rows(b) for b in got] == expected
        assert all(len(b) == len(e) for b, e in zip(got, expected, strict=True))
        assert any(type(b) is PermutationSpan for b in got) or all(len(e) < batch_size for e in expected) or (
            num_samples is not None and num_samples > n  # every batch may straddle two passes
        )


def test_spans_apply_only_to_a_plain_batch_sampler_over_a_random_sampler_without_replacement():
    assert index_spans(BatchSampler(SequentialSampler(range(10)), 2, False)) is None
    assert index_spans(BatchSampler(_sampler(10, 0, replacement=True), 2, False)) is None

    class MyRandom(RandomSampler):
        pass

    class MyBatches(BatchSampler):
        pass

    assert index_spans(BatchSampler(MyRandom(range(10)), 2, False)) is None
    assert index_spans(MyBatches(_sampler(10, 0), 2, False)) is None
    assert index_spans([[0, 1], [2]]) is None


def test_a_resumed_random_sampler_gives_the_spans_of_its_index_arrays():
    state = dict(_sampler(50, 9).state_dict(), start=13)  # the next epoch starts at position 13
    arrays, spans = _sampler(50, 9), _sampler(50, 9)
    arrays.load_state_dict(state)
    spans.load_state_dict(state)
    expected = [b.tolist() for b in BatchSampler(arrays, 4, False)._index_arrays()]
    got = [_rows(b) for b in index_spans(BatchSampler(spans, 4, False))]
    assert got == expected and sum(map(len, expected)) == 50 - 13


def test_a_span_is_its_rows():
    perm = seeded_permutation(1000, 4)
    span = PermutationSpan(perm, 10, 5)
    rows = span.rows()
    assert rows.dtype == np.int64 and not rows.flags.writeable
    assert rows.tolist() == [perm.index_at(p) for p in range(10, 15)] == list(span) == np.asarray(span).tolist()
    assert len(span) == 5 and "start=10" in repr(span)
    assert np.asarray(span, dtype=np.int32).dtype == np.int32


def test_rebatch_spans_cuts_across_spans_as_arrays():
    a, b = seeded_permutation(10, 1), seeded_permutation(10, 2)
    got = list(rebatch_spans(iter([PermutationSpan(a, 0, 10), PermutationSpan(b, 0, 10)]), 4, False))
    assert [type(x) is PermutationSpan for x in got] == [True, True, False, True, True]
    flat = [i for x in got for i in _rows(x)]
    assert flat == a.take(np.arange(10)).tolist() + b.take(np.arange(10)).tolist()
    assert len(list(rebatch_spans(iter([PermutationSpan(a, 0, 10)]), 4, True))) == 2


def test_row_jobs_of_a_span_compute_its_rows_and_refuse_a_larger_permutation():
    x = np.random.default_rng(0).standard_normal((100, 3))
    jobs, window, rec = RowJobs(2, (x,)), Window(2), Recorder(4)
    perm = seeded_permutation(100, 7)
    (out,) = jobs.prepare_span(0, perm, 40, 8)
    window.publish()
    assert jobs.prepare_span(1, seeded_permutation(101, 7), 0, 8) is None  # a row may be >= 100
    assert jobs.prepare_span(1, perm, 95, 8) is None  # positions past the permutation
    assert jobs.prepare_span(1, perm, -1, 8) is None
    window.publish()
    window.finish()
    assert jobs.work(window, rec) == 1  # slot 1 holds no job
    window.complete(1)
    assert jobs.work(window, rec) == Status.END
    assert out.tobytes() == x[perm.take(np.arange(40, 48))].tobytes()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_loader_over_a_random_sampler_of_another_length_fails_the_batches_it_cannot_gather(workers):
    # The sampler permutes 30 rows, the dataset has 20: spans are refused, the general path
    # names the bad index, as with num_workers=0.
    ds = ArrayDataset(np.arange(40.0).reshape(20, 2))
    sampler = RandomSampler(range(30), generator=np.random.default_rng(1))
    kinds = []
    for w in (0, workers):
        loader = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=w)
        out = []
        for batch in _batches_or_errors(loader):
            out.append(batch)
        kinds.append(out)
        sampler = RandomSampler(range(30), generator=np.random.default_rng(1))
    assert kinds[0] == kinds[1]
    assert any(k == "IndexError" for k in kinds[0])


def _batches_or_errors(loader):
    it = iter(loader)
    while True:
        try:
            yield next(it)[0].tobytes()
        except StopIteration:
            return
        except IndexError:
            yield "IndexError"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("generator", ["int", "numpy"])
@pytest.mark.parametrize(("before", "after"), [(2, 0), (0, 2), (1, 3)])
def test_an_epoch_of_permutation_spans_resumes_mid_epoch_with_another_worker_count(monkeypatch, generator, before, after):
    # 40 samples of 13 rows: four passes, batches of 3 across them (positions 12-14, 24-26).
    # Resumed at any batch, with workers (spans) or without (index arrays), the loader gives
    # the rest of num_workers=0's epoch, and its next epoch.
    made = []

    def counted(batch_sampler):
        batches = index_spans(batch_sampler)
        return None if batches is None else _noting(batches, made)

    monkeypatch.setattr(plan, "index_spans", counted)
    ds = ArrayDataset(np.arange(26.0).reshape(13, 2))

    def loader(workers):
        gen = 8 if generator == "int" else np.random.default_rng(8)
        return DataLoader(ds, batch_size=3, sampler=RandomSampler(ds, num_samples=40, generator=gen), num_workers=workers)

    reference = loader(0)
    expected = [[b[0].tobytes() for b in reference] for _epoch in range(2)]
    assert len(expected[0]) == 14
    for k in (0, 1, 4, 5, 9, 13, 14):
        first = loader(before)
        it = iter(first)
        head = [next(it)[0].tobytes() for _ in range(k)]
        state = first.state_dict()
        it.close()
        again = loader(after)
        again.load_state_dict(state)
        assert head + [b[0].tobytes() for b in again] == expected[0], k
        assert [b[0].tobytes() for b in again] == expected[1], k
    assert any(made)  # the loaders with workers took the spans path


def _noting(batches, made):
    for batch in batches:
        made.append(type(batch) is PermutationSpan)
        yield batch
