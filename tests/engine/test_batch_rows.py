"""The native-batch protocol: a dataset opts in with ``__batch_rows__() -> BatchRows | None``
(``_datasets/rows.py``) and the engine builds its batches with no Python (``_engine/native.py``),
with no engine edit: ``Columns`` below is defined here, outside the package."""

from __future__ import annotations

import numpy as np
import pytest

from tests._support import collect
from dataloader import ArrayDataset, BatchRows, DataLoader, Dataset, NdfDataset
from dataloader._engine.build import BuilderKind
from dataloader._engine.builders import MapBuild, map_builder
from dataloader._engine.native import batch_rows
from dataloader.collate import default_collate
from dataloader.ndf import NdfWriter

pytestmark = pytest.mark.timeout(60)

N = 53


class Columns(Dataset):
    """Rows of named columns; its items exist only as native batches: ``__getitem__`` and
    ``__getitems__`` raise, so a batch built by the general path fails the test."""

    accepts_index_arrays = True

    def __init__(self, **columns):
        self.columns = tuple(np.ascontiguousarray(c) for c in columns.values())

    def __len__(self):
        return len(self.columns[0])

    def __getitem__(self, index):
        raise AssertionError(f"__getitem__({index!r}) called: the batch did not go native")

    def __getitems__(self, indices):
        raise AssertionError("__getitems__ called: the batch did not go native")

    def __batch_rows__(self):
        return BatchRows(self.columns)


class Rows(Dataset):
    """The reference: the same items through ``__getitem__`` (the general path)."""

    def __init__(self, *columns):
        self.columns = columns

    def __len__(self):
        return len(self.columns[0])

    def __getitem__(self, index):
        return tuple(c[index] for c in self.columns)


def _columns():
    rng = np.random.default_rng(7)
    return {"x": rng.standard_normal((N, 3)).astype(np.float32), "y": np.arange(N) * 5,
            "m": rng.integers(0, 255, (N, 2, 2), dtype=np.uint8)}


def _kind(dataset, workers, **kw):
    build = dict(auto_collation=True, collate_fn=default_collate, transform=None, item_concurrency=1,
                 workers=workers, lanes=None)
    build.update(kw)
    return map_builder(MapBuild(dataset, **build), (0, 0))[0].kind


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataset_outside_the_package_gets_native_batches_equal_to_the_general_paths(workers, shuffle):
    cols = _columns()
    epoch = dict(batch_size=6, shuffle=shuffle, seed=13)
    assert _kind(Columns(**cols), workers > 0) is (BuilderKind.NATIVE_ROWS if workers else BuilderKind.NATIVE_GATHER)
    loader = DataLoader(Columns(**cols), num_workers=workers, persistent_workers=workers > 0, **epoch)
    reference = DataLoader(Rows(*cols.values()), **epoch)
    for _ in range(2):  # two epochs: a new order each, the same rows as the reference's
        got, expected = collect(loader), collect(reference)
        assert [kind for kind, _ in got] == ["batch"] * -(-N // 6)
        assert len(got) == len(expected)
        for (_, g), (_, e) in zip(got, expected, strict=True):
            assert type(g) is list and len(g) == 3
            for a, b in zip(g, e, strict=True):
                assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    loader.close()


def test_a_batch_the_native_gather_cannot_take_goes_through_the_datasets_items():
    class Strided(Rows):
        def __batch_rows__(self):
            return BatchRows(self.columns)

    x = np.arange(N * 4.0).reshape(N, 4)[:, ::2]  # not C-contiguous: no native gather
    for workers in (0, 2):
        got = collect(DataLoader(Strided(x), batch_size=8, num_workers=workers))
        assert np.array_equal(np.concatenate([b[0] for _, b in got]), x)


def test_options_that_put_something_between_items_and_batch_turn_the_protocol_off():
    ds = Columns(**_columns())
    assert _kind(ds, True, transform=lambda item: item) is BuilderKind.GETITEMS
    assert _kind(ds, True, collate_fn=lambda items: default_collate(items)) is BuilderKind.GETITEMS
    assert _kind(ds, False, auto_collation=False) is BuilderKind.SINGLE
    assert _kind(Columns(x=np.zeros((0, 2))), True) is BuilderKind.NATIVE_GATHER  # empty: no jobs


def test_subclasses_of_the_shipped_datasets_do_not_inherit_native_batches(tmp_path):
    class Tagged(ArrayDataset):
        pass

    class Doubled(ArrayDataset):
        def __getitems__(self, indices, out=None):
            batch = super().__getitems__(indices, out)
            return type(batch)(tuple(c * 2 for c in batch.columns))

    class OptedIn(ArrayDataset):
        def __batch_rows__(self):
            return BatchRows(self.arrays)

    x = np.arange(N * 2.0).reshape(N, 2)
    assert batch_rows(ArrayDataset(x)).source == (x,)
    assert batch_rows(Tagged(x)) is None and batch_rows(Doubled(x)) is None
    assert _kind(OptedIn(x), True) is BuilderKind.NATIVE_ROWS
    for workers in (0, 2):  # the subclass's own __getitems__ builds every batch
        (batch,) = list(DataLoader(Doubled(x), batch_size=N, num_workers=workers))
        assert np.array_equal(batch[0], 2 * x)
    path = tmp_path / "rows.ndf"
    with NdfWriter(path, 2, 1) as w:
        w.append(x, np.arange(N, dtype=np.float64).reshape(N, 1))

    class TaggedNdf(NdfDataset):
        pass

    with NdfDataset(path, scalar_labels=True) as ds, TaggedNdf(path) as sub:
        rows = batch_rows(ds)
        assert rows is not None and rows.y_shape == () and rows.n == N
        assert batch_rows(sub) is None


def test_a_wrong_answer_from_batch_rows_is_named():
    class Wrong(Rows):
        def __batch_rows__(self):
            return self.columns

    with pytest.raises(TypeError, match=r"Wrong.__batch_rows__\(\) returned a tuple, not a BatchRows or None"):
        batch_rows(Wrong(np.zeros((3, 1))))
    with pytest.raises(ValueError, match="y_shape applies to a Reader's rows only"):
        BatchRows((np.zeros((3, 1)),), y_shape=())


@pytest.mark.parametrize(
    "source, error, message",
    [
        (np.zeros((4, 4)), TypeError, r"tuple of arrays or a Reader, got ndarray \(one array is BatchRows\(\(array,\)\)\)"),
        ((), ValueError, "at least one array"),
        ((np.zeros(3), np.zeros(4)), ValueError, r"different first dimensions: \[3, 4\]"),
        ((np.float64(1.0),), ValueError, "array 0 is 0-d"),
        (([1, 2],), TypeError, "array 0 is a list, not an array"),
    ],
)
def test_batch_rows_refuses_what_would_build_wrong_batches(source, error, message):
    with pytest.raises(error, match=message):
        BatchRows(source)


def test_a_readers_y_shape_must_hold_its_labels(tmp_path):
    path = tmp_path / "rows.ndf"
    with NdfWriter(path, 2, 3) as w:
        w.append(np.zeros((4, 2)), np.zeros((4, 3)))
    with NdfDataset(path) as ds:
        reader = batch_rows(ds).source
        assert BatchRows(reader, (3,)).y_shape == (3,) and BatchRows(reader, (1, 3)).y_shape == (1, 3)
        for bad in [(2,), (), (-1,), ("a",), (10**20,), [3]]:
            with pytest.raises(ValueError, match="y_shape must be a tuple of ints with 3 elements"):
                BatchRows(reader, bad)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_batch_rows_is_raised_by_the_first_next_and_the_next_epoch_is_whole(workers):
    class Flaky(Rows):
        fail = False

        def __batch_rows__(self):
            if Flaky.fail:
                Flaky.fail = False
                raise MemoryError("transient")
            return BatchRows(self.columns)

    def rows(epoch):
        return [batch[0].ravel().tolist() for batch in epoch]

    x = np.arange(30, dtype=np.int64).reshape(30, 1)
    reference = DataLoader(Flaky(x), batch_size=5, shuffle=True, seed=11)
    rows(reference)
    second = rows(reference)
    saved = DataLoader(Flaky(x), batch_size=5, shuffle=True, seed=11, num_workers=workers)
    it = iter(saved)
    next(it), next(it)
    state = saved.state_dict()
    it.close()
    loader = DataLoader(Flaky(x), batch_size=5, shuffle=True, seed=11, num_workers=workers)
    loader.load_state_dict(state)
    Flaky.fail = True
    it = iter(loader)  # iter() itself does not raise (seed 004)
    with pytest.raises(MemoryError, match="transient"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    # The resumed start was claimed by the failed epoch: the next epoch is epoch 1, whole.
    assert rows(loader) == second
