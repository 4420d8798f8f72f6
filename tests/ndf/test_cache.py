"""CachedDataset: the first epoch writes the items to an .ndf file, later epochs read it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from dataloader import CachedDataset, DataLoader, Dataset, DistributedSampler, item_rng
from dataloader._collation.default import default_collate
from dataloader._engine.build import BuilderKind
from dataloader._engine.builders import MapBuild, map_builder
from dataloader.ndf import NdfDataset, NdfFile

pytestmark = pytest.mark.timeout(60)

N = 50
_CALLS_LOCK = threading.Lock()  # module-level: a Rows pickles and deep-copies


class Rows(Dataset):
    """Deterministic (x (4,) float64, label int) items; counts the items it computes."""

    def __init__(self, n: int = N, offset: float = 0.0) -> None:
        self.n, self.offset, self.calls = n, offset, 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        with _CALLS_LOCK:
            self.calls += 1
        return (np.arange(4.0) * i + self.offset, i % 3)


def _epoch(ds, **kw):
    kw = {"batch_size": 8, "shuffle": True, "num_workers": 2, "seed": 5, **kw}
    return [[np.array(c) for c in batch] for batch in DataLoader(ds, **kw)]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        len(p) == len(q) and all(np.array_equal(u, v) and u.dtype == v.dtype for u, v in zip(p, q))
        for p, q in zip(a, b)
    )


def _kind(ds, workers: bool = True) -> BuilderKind:
    build = MapBuild(ds, auto_collation=True, collate_fn=default_collate, transform=None, item_concurrency=1,
                     workers=workers, lanes=None)
    return map_builder(build, (0, 0))[0].kind


def test_the_first_epoch_writes_the_cache_and_later_epochs_read_it_unchanged(tmp_path):
    rows = Rows()
    path = tmp_path / "c.ndf"
    cached = CachedDataset(rows, path)
    assert cached.stale_reason == "no file" and not cached.complete and _kind(cached) is BuilderKind.GETITEMS
    first = _epoch(cached)
    assert cached.complete and rows.calls == N and os.listdir(tmp_path) == ["c.ndf"]
    assert _kind(cached) is BuilderKind.NATIVE_ROWS
    for epoch in range(3):  # the same seed and epoch give the same batches, read from the file
        assert _same(_epoch(cached), first)
    assert rows.calls == N
    uncached = _epoch(rows)
    assert _same(first, [[x, y] for x, y in uncached])  # the items as the dataset gives them
    file = NdfDataset(path, scalar_labels=True)  # a plain .ndf file: row i is item i
    assert np.array_equal(file[7][0], rows[7][0]) and file[7][1] == 7 % 3
    file.close()


def test_a_new_cached_dataset_with_the_same_fingerprint_reads_the_file_without_computing(tmp_path):
    path = tmp_path / "c.ndf"
    _epoch(CachedDataset(Rows(), path), num_workers=0)
    rows = Rows()
    again = CachedDataset(rows, path)
    assert again.stale_reason is None and again.complete
    assert _same(_epoch(again), _epoch(Rows()))
    assert rows.calls == 0


def test_a_changed_dataset_rebuilds_the_cache_and_fingerprint_overrides_the_key(tmp_path):
    path = tmp_path / "c.ndf"
    _epoch(CachedDataset(Rows(), path), num_workers=0)
    assert CachedDataset(Rows(offset=1.0), path).stale_reason == "another fingerprint"
    assert CachedDataset(Rows(n=N + 1), path).stale_reason == "another fingerprint"
    changed = CachedDataset(Rows(offset=1.0), path)
    assert _epoch(changed, num_workers=0)[0][0][0][0] >= 1.0 and changed.complete
    assert CachedDataset(Rows(), path).stale_reason == "another fingerprint"
    _epoch(CachedDataset(Rows(), path, fingerprint="v1"), num_workers=0)
    assert CachedDataset(Rows(offset=2.0), path, fingerprint="v1").complete  # the user's key alone
    assert CachedDataset(Rows(), path, fingerprint="v2").stale_reason == "another fingerprint"
    # The dtypes join a user's key too: a file of float64 rows is not read as float32.
    assert CachedDataset(Rows(), path, fingerprint="v1", x_dtype=np.float32).stale_reason == "another fingerprint"


def test_the_fingerprint_sees_the_transform_code_its_closure_and_the_dataset_arrays(tmp_path):
    class Mapped(Dataset):
        def __init__(self, data, fn):
            self.data, self.fn = data, fn

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            return self.fn(self.data[i])

    def scaled(k):
        return lambda v: v * k

    data = np.arange(12.0).reshape(6, 2)
    key = CachedDataset(Mapped(data, scaled(2)), tmp_path / "a.ndf").key
    assert CachedDataset(Mapped(data.copy(), scaled(2)), tmp_path / "a.ndf").key == key
    assert CachedDataset(Mapped(data, scaled(3)), tmp_path / "a.ndf").key != key  # a closure value
    assert CachedDataset(Mapped(data, lambda v: v * 2), tmp_path / "a.ndf").key != key  # other code
    assert CachedDataset(Mapped(data + 1, scaled(2)), tmp_path / "a.ndf").key != key  # other data


def test_a_half_written_cache_of_a_killed_process_is_never_read_and_is_rebuilt(tmp_path):
    path = tmp_path / "c.ndf"
    script = f"""
        import os, sys, numpy as np
        sys.path.insert(0, {os.getcwd()!r})
        from dataloader import CachedDataset
        from tests.ndf.test_cache import Rows
        cached = CachedDataset(Rows(), {str(path)!r})
        cached.__getitems__(list(range(0, {N} - 1)))  # all rows but the last
        os.kill(os.getpid(), 9)
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], timeout=60, capture_output=True)
    assert proc.returncode == -9, proc.stderr
    assert not path.exists()
    (tmp,) = os.listdir(tmp_path)  # the killed process's temporary file, all but one row written
    assert tmp.startswith(".c.ndf.") and tmp.endswith(".tmp")
    with pytest.raises(ValueError, match="not an .ndf file"):
        NdfFile(tmp_path / tmp)
    rows = Rows()
    cached = CachedDataset(rows, path)
    assert cached.stale_reason == "no file"
    assert _same(_epoch(cached), _epoch(Rows())) and cached.complete and rows.calls == N


def test_a_truncated_cache_file_is_not_read_and_is_rebuilt(tmp_path):
    path = tmp_path / "c.ndf"
    _epoch(CachedDataset(Rows(), path), num_workers=0)
    os.truncate(path, os.path.getsize(path) - 8)
    rows = Rows()
    cached = CachedDataset(rows, path)
    assert cached.stale_reason.startswith("not a complete .ndf file") and not cached.complete
    assert _same(_epoch(cached), _epoch(Rows())) and rows.calls == N and cached.complete


def test_items_that_are_not_fixed_shape_raise_naming_the_index_and_the_shapes(tmp_path):
    class Ragged(Rows):
        def __getitem__(self, i):
            return (np.zeros(5 if i == 7 else 4), 0)

    cached = CachedDataset(Ragged(), tmp_path / "c.ndf")
    with pytest.raises(ValueError, match=r"item 7's x has shape \(5,\), but the cache holds shape \(4,\)"):
        _epoch(cached, shuffle=False, num_workers=0)
    with pytest.raises(ValueError, match=r"item 7's x has shape \(5,\)"):
        cached[7]
    assert not cached.complete


@pytest.mark.parametrize("item", [{"x": 1}, (1, 2, 3), "text", np.zeros(0)])
def test_items_a_cache_cannot_hold_raise_naming_the_index(tmp_path, item):
    class Odd(Rows):
        def __getitem__(self, i):
            return item

    with pytest.raises((TypeError, ValueError), match="item 3"):
        CachedDataset(Odd(), tmp_path / "c.ndf")[3]


def test_an_early_break_leaves_the_cache_incomplete_and_the_next_epoch_completes_it(tmp_path):
    rows = Rows(n=400)  # 50 batches: a break after 3 leaves most unbuilt
    cached = CachedDataset(rows, tmp_path / "c.ndf")
    loader = DataLoader(cached, batch_size=8, shuffle=True, num_workers=2, seed=5)
    for k, _ in enumerate(loader):
        if k == 2:
            break
    assert not cached.complete and not (tmp_path / "c.ndf").exists()
    second = [[np.array(c) for c in b] for b in loader]  # computes again, writes what is missing
    assert cached.complete and rows.calls >= 400
    reference = DataLoader(Rows(n=400), batch_size=8, shuffle=True, num_workers=2, seed=5)
    list(reference)
    assert _same(second, [[np.array(c) for c in b] for b in reference])  # epoch 1 of the same run
    calls = rows.calls
    assert len(list(loader)) == len(second) and rows.calls == calls  # read from the file


def test_a_resumed_first_epoch_gives_the_rest_of_the_uninterrupted_run_and_a_later_epoch_completes_the_cache(tmp_path):
    whole = _epoch(Rows(n=400))  # 50 batches: 3 and the window's leave most unbuilt
    loader = DataLoader(CachedDataset(Rows(n=400), tmp_path / "a.ndf"), batch_size=8, shuffle=True, num_workers=2,
                        seed=5)
    it = iter(loader)
    head = [[np.array(c) for c in next(it)] for _ in range(3)]
    state = loader.state_dict()
    it.close()
    cached = CachedDataset(Rows(n=400), tmp_path / "a.ndf")  # as a new process would
    resumed = DataLoader(cached, batch_size=8, shuffle=True, num_workers=2, seed=5)
    resumed.load_state_dict(state)
    tail = [[np.array(c) for c in b] for b in resumed]
    assert _same(head + tail, whole) and not cached.complete
    list(resumed)
    assert cached.complete


def test_a_random_transform_after_the_cache_stays_random_per_epoch_and_reproducible(tmp_path):
    def jitter(item):
        x, y = item
        return x + item_rng().normal(size=x.shape), y

    rows = Rows()
    cached = CachedDataset(rows, tmp_path / "c.ndf", transform=jitter)
    loader = DataLoader(cached, batch_size=8, num_workers=2, seed=5)
    epochs = [[np.array(b[0]) for b in loader] for _ in range(2)]
    assert cached.complete and rows.calls == N and _kind(cached) is BuilderKind.GETITEMS
    assert not np.allclose(epochs[0][0], epochs[1][0])  # new draws every epoch
    again = DataLoader(CachedDataset(Rows(), tmp_path / "c.ndf", transform=jitter), batch_size=8, num_workers=0, seed=5)
    assert all(np.array_equal(a, np.array(b[0])) for a, b in zip(epochs[0], again))  # same seed, same draws
    noise = epochs[0][0] - np.stack([Rows()[i][0] for i in range(8)])
    assert 0.3 < noise.std() < 3


def test_many_threads_writing_one_cache_at_once_give_an_exact_file(tmp_path):
    cached = CachedDataset(Rows(n=2000), tmp_path / "c.ndf")
    rng = np.random.default_rng(0)
    parts = np.array_split(rng.permutation(2000), 40)
    parts += np.array_split(rng.permutation(2000), 40)  # every row twice: claimed once
    errors = []

    def work(k):
        try:
            for part in parts[k::8]:
                cached.__getitems__(part)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and cached.complete
    x, y = NdfFile(tmp_path / "c.ndf").read_rows(np.arange(2000))
    assert np.array_equal(x, np.arange(4.0) * np.arange(2000)[:, None]) and np.array_equal(y[:, 0], np.arange(2000) % 3)


@pytest.mark.parametrize("item", [lambda i: np.full((2, 3), i, np.float32), lambda i: float(i),
                                  lambda i: (np.full((2, 2), i, np.uint8), np.array([i, -i]))])
def test_arrays_numbers_and_pairs_of_any_shape_read_back_as_they_were_written(tmp_path, item):
    class Items(Rows):
        def __getitem__(self, i):
            return item(i)

    cached = CachedDataset(Items(n=20), tmp_path / "c.ndf")
    first = _epoch(cached, batch_size=4)
    assert cached.complete and _same(_epoch(cached, batch_size=4), first)
    assert _same(_epoch(CachedDataset(Items(n=20), tmp_path / "c.ndf"), batch_size=4, num_workers=0), first)
    assert _same(first, _epoch(Items(n=20), batch_size=4))


def test_a_rank_leaves_the_cache_incomplete_until_fill(tmp_path):
    rows = Rows()
    cached = CachedDataset(rows, tmp_path / "c.ndf")
    sampler = DistributedSampler(cached, num_replicas=2, rank=0, shuffle=True, seed=1)
    list(DataLoader(cached, batch_size=8, sampler=sampler, num_workers=2))
    assert not cached.complete and rows.calls == N // 2
    cached.fill()
    assert cached.complete and rows.calls == N
    cached.fill()
    assert rows.calls == N


def test_close_gives_up_an_incomplete_cache_and_a_copy_reads_a_complete_one(tmp_path):
    import copy
    import pickle

    cached = CachedDataset(Rows(), tmp_path / "c.ndf", x_dtype=np.float32)
    cached.__getitems__([1, 2, 3])
    cached.close()
    assert os.listdir(tmp_path) == []
    cached.fill()
    assert cached.complete and cached[5][0].dtype == np.float32
    for other in (copy.deepcopy(cached), pickle.loads(pickle.dumps(cached))):
        assert other.complete and np.array_equal(other[5][0], cached[5][0])


def test_bad_arguments_name_the_value(tmp_path):
    with pytest.raises(TypeError, match="map-style"):
        CachedDataset(iter([1]), tmp_path / "c.ndf")
    with pytest.raises(ValueError, match="no item"):
        CachedDataset(Rows(n=0), tmp_path / "c.ndf")
    with pytest.raises(TypeError, match="transform must be callable"):
        CachedDataset(Rows(), tmp_path / "c.ndf", transform=3)
    with pytest.raises(TypeError, match="fingerprint must be a str"):
        CachedDataset(Rows(), tmp_path / "c.ndf", fingerprint=3)
    with pytest.raises(ValueError, match="access='disk'"):
        CachedDataset(Rows(), tmp_path / "c.ndf", access="disk")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        CachedDataset(Rows(), tmp_path / "nowhere" / "c.ndf")
    with pytest.raises(TypeError, match="x_dtype"):
        CachedDataset(Rows(), tmp_path / "c.ndf", x_dtype=np.complex64)[0]
    with pytest.raises(IndexError, match="index 50"):
        CachedDataset(Rows(), tmp_path / "c.ndf")[50]


def test_the_fingerprint_sees_the_values_of_array_likes(tmp_path):
    class Wrapped:
        def __init__(self, values):
            self.values = values

        def __array__(self, dtype=None, copy=None):
            return np.asarray(self.values, dtype=dtype)

    class Holder(Rows):
        def __init__(self, data):
            super().__init__()
            self.data = data

    key = CachedDataset(Holder(Wrapped([1.0, 2.0])), tmp_path / "c.ndf").key
    assert CachedDataset(Holder(Wrapped([1.0, 2.0])), tmp_path / "c.ndf").key == key
    assert CachedDataset(Holder(Wrapped([1.0, 3.0])), tmp_path / "c.ndf").key != key


def test_a_path_that_is_a_directory_is_refused_at_construction_not_after_the_epoch(tmp_path):
    rows = Rows()
    with pytest.raises(IsADirectoryError, match=re.escape(f"path {str(tmp_path)!r} is a directory")):
        CachedDataset(rows, tmp_path)
    assert rows.calls == 0  # nothing computed for a cache that could never be written
