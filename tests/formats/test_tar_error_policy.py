"""TarShardDataset under the loader's error policy: a bad shard is a reported, counted, resumable skip."""

from __future__ import annotations

import json

import pytest

from tests.formats._tars import sample_members, write_tar

from dataloader import DataLoader, FailureRecord, IterableDataset, TarShardDataset, TooManyFailures


def _shards(tmp_path, good=3, per=4):
    """``good`` good shards of ``per`` samples, with a truncated shard and a not-a-tar shard
    among them; returns (names in order, the keys of every sample, the bad shards' names)."""
    names, keys = [], []
    for s in range(good):
        path = write_tar(tmp_path / f"g{s}.tar", sample_members(range(s * 100, s * 100 + per)))
        names.append(str(path))
        keys += [f"{k:06d}" for k in range(s * 100, s * 100 + per)]
        if s == 0:
            whole = write_tar(tmp_path / "whole.tar", sample_members(range(900, 906))).read_bytes()
            cut = tmp_path / "cut.tar"
            cut.write_bytes(whole[: 512 * 13 + 100])  # 3 whole samples, then cut inside the 7th member
            names.append(str(cut))
            keys += ["000900", "000901", "000902"]
        if s == 1:
            junk = tmp_path / "junk.tar"
            junk.write_bytes(b"this is not a tar file at all" * 40)
            names.append(str(junk))
    return names, keys, {str(tmp_path / "cut.tar"), str(tmp_path / "junk.tar")}


def _keys(batches):
    return [s["__key__"] for b in batches for s in b]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_bad_shards_are_skipped_and_reported_as_loader_failures(tmp_path, num_workers):
    names, keys, bad = _shards(tmp_path)
    ds = TarShardDataset(names)  # its own on_error="raise": the loader's "skip" wins
    loader = DataLoader(ds, batch_size=3, num_workers=num_workers, collate_fn=list, on_error="skip")
    got = _keys(loader)
    assert sorted(got) == sorted(keys)
    records = loader.failures
    assert {r.location for r in records} == bad
    for r in records:
        assert isinstance(r, FailureRecord) and r.epoch == 0
        assert r.exc_type is ValueError and r.location.rsplit("/", 1)[-1] in r.message
        assert names[r.index] == r.location  # the shard's number in the epoch's order
    stats = loader.stats
    assert (stats.failed, stats.skipped) == (2, 2)
    assert sorted(n for n, _ in ds.skipped_shards) == sorted(bad)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_resume_after_a_failure_keeps_the_counts_and_neither_loses_nor_repeats(tmp_path, num_workers):
    names, keys, _ = _shards(tmp_path)

    def make():
        return DataLoader(TarShardDataset(names), batch_size=2, num_workers=num_workers, collate_fn=list,
                          on_error="skip")

    full = make()
    whole = _keys(full)
    first = make()
    it = iter(first)
    head = []
    while first.stats.failed < 1:  # past the first bad shard
        head += next(it)
    state = json.loads(json.dumps(first.state_dict()))
    before = state["failures"]["failed"]
    assert before == first.stats.failed >= 1
    del it
    second = make()
    second.load_state_dict(state)
    rest = _keys(second)
    assert [s["__key__"] for s in head] + rest == whole
    # The counts go on from the state's; the records are those met since the resume.
    assert second.stats.failed == 2 and len(second.failures) == 2 - before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_max_failures_exceeded_raises_too_many_failures_from_next(tmp_path, num_workers):
    names, _, bad = _shards(tmp_path)
    loader = DataLoader(TarShardDataset(names), batch_size=2, num_workers=num_workers, collate_fn=list,
                        on_error="skip", max_failures=1)
    with pytest.raises(TooManyFailures, match="max_failures=1") as info:
        for _ in loader:
            pass
    assert info.value.failed == 2 and {r.location for r in info.value.records} == bad
    # seen for a stream: samples taken + failures, up to the batch that passed the limit.  0
    # workers: g0 (4), cut (3 + 1 failure), g1 (4), junk (1 failure) in batches of 2: the 7th
    # batch [103, junk, 200] passes it: 12 samples + 2.  2 workers (w0: g0 g1 g2; w1: cut junk),
    # taken in turn: [0 1] [900 901] [2 3] [902, cut, junk]: 7 + 2.
    assert info.value.seen == {0: 14, 2: 9}[num_workers]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_state_saved_after_too_many_failures_resumes_at_the_refused_batch(tmp_path, num_workers):
    names, _, _ = _shards(tmp_path)

    def loader(limit):
        return DataLoader(TarShardDataset(names), batch_size=2, num_workers=num_workers, collate_fn=list,
                          on_error="skip", max_failures=limit)

    with loader(10) as reference:
        full = [[s["__key__"] for s in b] for b in reference]
    first = loader(1)
    head = []
    with pytest.raises(TooManyFailures):
        for b in first:
            head.append([s["__key__"] for s in b])
    state = json.loads(json.dumps(first.state_dict()))
    first.close()
    # the failures before the refused batch (test_max_failures_exceeded_raises_too_many_failures_from_next)
    assert state["yielded"] == len(head) and state["failures"]["failed"] == {0: 1, 2: 0}[num_workers]
    with loader(10) as again:  # the refused batch is built again, nothing lost or repeated
        again.load_state_dict(state)
        assert head + [[s["__key__"] for s in b] for b in again] == full
        assert again.stats.failed == 2


@pytest.mark.timeout(60)
def test_the_dataset_own_skip_still_works_without_the_loader_policy(tmp_path):
    names, keys, bad = _shards(tmp_path)
    ds = TarShardDataset(names, on_error="skip")
    loader = DataLoader(ds, batch_size=3, collate_fn=list)
    assert sorted(_keys(loader)) == sorted(keys)
    assert loader.failures == [] and sorted(n for n, _ in ds.skipped_shards) == sorted(bad)


@pytest.mark.timeout(60)
def test_outside_a_skipping_loader_the_dataset_rule_applies(tmp_path):
    names, _, _ = _shards(tmp_path)
    ds = TarShardDataset(names)
    DataLoader(ds, on_error="skip")  # hands ds the sink
    with pytest.raises(ValueError, match=r"cut\.tar"):
        list(ds)  # no loader batch collects here: the dataset's on_error="raise"


def test_replace_is_refused_for_a_stream_saying_why(tmp_path):
    with pytest.raises(ValueError, match="no index to draw a substitute"):
        DataLoader(TarShardDataset(str(tmp_path / "a.tar")), on_error="replace")


def test_a_stream_without_the_protocol_is_still_refused():
    class Plain(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="set_failure_sink"):
        DataLoader(Plain(), on_error="skip")


@pytest.mark.timeout(60)
def test_a_fraction_limit_counts_samples_yielded_plus_failures_as_seen(tmp_path):
    shards = []
    for s in range(4):  # 3 junk shards, then a good one of 1 sample: each batch of 1 meets 3 failures
        for j in range(3):
            path = tmp_path / f"junk{s}{j}.tar"
            path.write_bytes(b"not a tar" * 100)
            shards.append(str(path))
        shards.append(str(write_tar(tmp_path / f"g{s}.tar", sample_members([s]))))

    def run(limit):
        return list(DataLoader(TarShardDataset(shards), batch_size=1, collate_fn=list, on_error="skip",
                               max_failures=limit))

    assert len(run(0.8)) == 4  # 12 failures of 4 samples + 12 failures seen: 0.75
    with pytest.raises(TooManyFailures) as info:
        run(0.7)
    # judged from the 10th failure on (FRACTION_MIN_FAILURES), so at the 4th batch
    assert (info.value.failed, info.value.seen) == (12, 16)


@pytest.mark.timeout(60)
def test_the_torch_face_passes_the_policy_to_the_shards(tmp_path):
    pytest.importorskip("torch", reason="dataloader.torch needs torch (absent on 3.13t)")
    from dataloader.torch import DataLoader as TorchLoader

    names, keys, bad = _shards(tmp_path)
    loader = TorchLoader(TarShardDataset(names), batch_size=2, num_workers=2, collate_fn=list, on_error="skip")
    assert sorted(_keys(loader)) == sorted(keys)
    assert {r.location for r in loader.failures} == bad and loader.stats.failed == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [1, 3, 4])
def test_workers_reporting_at_once_lose_no_failure_and_agree_with_0_workers(tmp_path, num_workers):
    shards, keys = [], []
    for s in range(12):  # good and junk shards interleaved: every worker meets failures
        if s % 3 == 1:
            path = tmp_path / f"junk{s}.tar"
            path.write_bytes(b"junk" * 300)
            shards.append(str(path))
        else:
            shards.append(str(write_tar(tmp_path / f"g{s}.tar", sample_members(range(s * 10, s * 10 + 3)))))
            keys += [f"{k:06d}" for k in range(s * 10, s * 10 + 3)]

    def run(workers):
        loader = DataLoader(TarShardDataset(shards, shuffle_shards=True, seed=3), batch_size=2,
                            num_workers=workers, collate_fn=list, on_error="skip", max_failures=4)
        got = _keys(loader)
        return sorted(got), sorted((r.index, r.location) for r in loader.failures), loader.stats.failed

    got, records, failed = run(num_workers)
    assert got == sorted(keys) and failed == 4
    assert (got, records, failed) == run(0)
    order = TarShardDataset(shards, shuffle_shards=True, seed=3).shard_order(0)
    assert all(order[i] == loc and "junk" in loc for i, loc in records)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_mix_of_shard_streams_passes_the_loaders_skip_to_its_sources(tmp_path, num_workers):
    from dataloader import MixDataset

    names, keys, bad = _shards(tmp_path)
    other = [str(write_tar(tmp_path / f"o{w}.tar", sample_members(range(500 + 4 * w, 504 + 4 * w))))
             for w in range(2)]  # a shard per worker: a worker whose source has no shard would restart it empty
    mix = MixDataset([TarShardDataset(names), TarShardDataset(other)], [0.5, 0.5], stop_on="all_exhausted")
    loader = DataLoader(mix, batch_size=3, num_workers=num_workers, collate_fn=list, on_error="skip")
    got = _keys(loader)
    # Every good sample of both sources (all_exhausted: a source that ends first starts a new pass
    # until the other ends, so keys may repeat: compared as a set).
    assert set(got) == set(keys) | {f"{k:06d}" for k in range(500, 508)}
    assert {r.location for r in loader.failures} == bad


def test_a_mix_of_streams_that_cannot_skip_refuses_skip_when_the_loader_is_built():
    from dataloader import MixDataset

    class Plain(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match=r"none of its 2 sources \(Plain\) does"):
        DataLoader(MixDataset([Plain(), Plain()], [1, 1]), on_error="skip")
