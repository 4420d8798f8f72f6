"""MixDataset of IterableDatasets (a MixStream): the same counter-based choice as the map-style
mix, the stopping rules, exact resume (sources with and without state), new weights from the
next sample, and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests._support import json_roundtrip

from dataloader import DataLoader, IterableDataset, MixDataset, MixStream, get_worker_info


class Counter(IterableDataset):
    """``base + i`` for ``i`` in ``range(n)`` (``n=None``: endless); no state of its own."""

    def __init__(self, base: int, n: int | None) -> None:
        self.base, self.n = base, n

    def __iter__(self):
        numbers = itertools.count() if self.n is None else range(self.n)
        return (self.base + i for i in numbers)


class Once(IterableDataset):
    """``base + i`` for ``i`` in ``range(n)`` on the first ``iter()``, nothing on later ones: a
    source that does not repeat itself."""

    def __init__(self, base: int, n: int) -> None:
        self.base, self.n, self.started = base, n, False

    def __iter__(self):
        n, self.started = (0 if self.started else self.n), True
        return iter(range(self.base, self.base + n))


class Stateful(IterableDataset):
    """``base + i`` for ``i`` in ``range(n)``, this worker's share; ``state_dict()`` is its live
    position, reset when a pass ends (so a new ``iter()`` starts a new pass)."""

    def __init__(self, base: int, n: int) -> None:
        self.base, self.n, self.state = base, n, {"next": 0}
        self.loaded = 0

    def __iter__(self):
        self.state = dict(self.state)
        info = get_worker_info()
        step, first = (1, 0) if info is None else (info.num_workers, info.id)
        i = self.state["next"] or first
        while i < self.n:
            self.state["next"] = i + step
            yield self.base + i
            i += step
        self.state = {"next": 0}

    def state_dict(self):
        return self.state

    def load_state_dict(self, state):
        self.loaded += 1
        self.state = state


def make(stop_on="first_exhausted", weights=(0.5, 0.3, 0.2), **kw):
    return MixDataset([Counter(0, 500), Stateful(10_000, 300), Counter(20_000, 200)], list(weights),
                      seed=5, stop_on=stop_on, **kw)


def source_of(x: int) -> int:
    return x // 10_000


def test_iterable_sources_give_a_stream_with_the_map_style_choice():
    stream = MixDataset([Counter(0, None), Counter(10**7, None)], [0.7, 0.3], seed=9, stop_on="never",
                        num_samples=20_000)
    assert isinstance(stream, MixStream)
    chosen = [x // 10**7 for x in stream]
    mapped = MixDataset([range(10**6), range(10**6)], [0.7, 0.3], seed=9, stop_on="never",
                        num_samples=20_000)
    assert chosen == mapped.source_of(np.arange(20_000))[0].tolist()


def test_stream_shares_are_within_half_a_percent_over_a_million_samples():
    stream = MixDataset([Counter(0, None), Counter(10**7, None), Counter(2 * 10**7, None)], [5, 3, 2], seed=1,
                        stop_on="never", num_samples=10**6)
    counts = np.bincount(np.fromiter(stream, dtype=np.int64, count=10**6) // 10**7)
    w = np.array([0.5, 0.3, 0.2])
    assert np.all(np.abs(counts / 10**6 - w) <= 0.005 * w)


def test_stopping_rules_of_a_stream():
    first = list(make("first_exhausted"))
    counts = np.bincount([source_of(x) for x in first], minlength=3)
    assert sorted(first) == sorted(set(first)) and list(counts) != [500, 300, 200]
    assert any(counts[s] == n for s, n in enumerate((500, 300, 200)))
    everything = list(make("all_exhausted"))
    for s, n in enumerate((500, 300, 200)):
        assert {x - s * 10_000 for x in everything if source_of(x) == s} == set(range(n))
    assert len(list(make("never", num_samples=5000))) == 5000


@pytest.mark.timeout(60)
@pytest.mark.parametrize("stop_on", ["first_exhausted", "all_exhausted"])
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("k", [0, 7, 30])
def test_a_resumed_stream_yields_the_rest_of_an_uninterrupted_run(stop_on, num_workers, k):
    def loader(mix):
        return DataLoader(mix, batch_size=8, num_workers=num_workers)

    whole = [b.tolist() for b in loader(make(stop_on))]
    first = loader(make(stop_on))
    it = iter(first)
    head = [next(it).tolist() for _ in range(k)]
    state = json_roundtrip(first.state_dict())
    mix = make(stop_on)
    again = loader(mix)
    again.load_state_dict(state)
    assert head + [b.tolist() for b in again] == whole


def test_a_source_without_state_is_replayed_and_one_with_state_is_loaded():
    weights = (0.2, 0.3, 0.5)  # source 2 (200 items, stateless) ends its first pass first
    mix = make("all_exhausted", weights)
    it = iter(mix)
    head = [next(it) for _ in range(700)]
    state = json_roundtrip(mix.state_dict())
    assert state["sources"][0] is None and state["sources"][1] is not None
    assert state["passes"][2] >= 1 and state["drawn"][2] > 0  # replayed within its second pass
    again = make("all_exhausted", weights)
    again.load_state_dict(state)
    rest = list(again)
    assert head + rest == list(make("all_exhausted", weights))
    assert again.sources[1].loaded == 1


def test_new_weights_apply_from_the_next_sample_after_load_state_dict():
    def stream():
        return MixDataset([Counter(0, None), Counter(10**7, None)], [0.9, 0.1], seed=3, stop_on="never",
                          num_samples=40_000)

    first = stream()
    it = iter(first)
    head = [next(it) for _ in range(10_000)]
    state = json_roundtrip(first.state_dict())
    resumed = stream()
    resumed.load_state_dict(state)
    resumed.set_weights([0.25, 0.75])
    rest = list(resumed)
    assert head == list(itertools.islice(stream(), 10_000))
    assert len(rest) == 30_000
    assert abs(np.mean(np.array(rest) >= 10**7) - 0.75) < 0.005
    # Each source resumes where it was: no item skipped or repeated.
    ones = [x for x in head + rest if x < 10**7]
    assert ones == list(range(len(ones)))
    again = stream()  # the same resume gives the same samples
    again.load_state_dict(state)
    again.set_weights([0.25, 0.75])
    assert list(again) == rest


def test_set_weights_while_iterating_applies_from_the_next_sample():
    stream = MixDataset([Counter(0, None), Counter(10**7, None)], [1, 0], stop_on="never", num_samples=2000)
    it = iter(stream)
    head = [next(it) for _ in range(1000)]
    stream.set_weights([0, 1])
    assert head == list(range(1000)) and list(it) == list(range(10**7, 10**7 + 1000))


def test_bad_stream_input_is_a_clear_error():
    with pytest.raises(TypeError, match=r"sources\[1\] \(list\) is not an IterableDataset"):
        MixStream([Counter(0, 3), [1, 2]], [1, 1])
    with pytest.raises(ValueError, match="stop_on must be one of"):
        MixDataset([Counter(0, 3)], [1], stop_on="all")
    with pytest.raises(ValueError, match="num_samples=3 is only for stop_on='never'"):
        MixDataset([Counter(0, 3)], [1], num_samples=3)
    once = MixDataset([Counter(0, 3), Once(10, 2)], [1, 1], stop_on="never", num_samples=100)
    with pytest.raises(ValueError, match=r"sources\[1\] yielded nothing when it restarted"):
        list(once)
    mix = make()
    with pytest.raises(ValueError, match="state has 2 sources, this mix has 3"):
        mix.load_state_dict({"drawn": [0, 0]})


@pytest.mark.timeout(60)
def test_the_streams_epoch_is_the_loaders_and_one_worker_equals_none():
    mix = MixDataset([Counter(0, 100), Counter(1000, 100)], [0.5, 0.5], seed=1)
    runs = []
    for workers in (0, 1):
        loader = DataLoader(mix, batch_size=10, num_workers=workers)
        runs.append([[int(x) for b in loader for x in b] for _ in range(2)])
    assert runs[0] == runs[1]
    first, second = runs[0]
    assert first != second and sorted(first) == sorted(second)
