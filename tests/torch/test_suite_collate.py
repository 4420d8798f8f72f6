"""PyTorch's ``test/test_dataloader.py`` collation, dict / namedtuple / string datasets and
pin-memory scenarios, translated to ``dataloader.torch`` (see test_suite_loader.py).
"""

from __future__ import annotations

import collections
import tempfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

from tests.torch._torch_helpers import assert_same  # noqa: E402

import dataloader  # noqa: E402
import dataloader.torch as dt  # noqa: E402

pytestmark = pytest.mark.timeout(60)
CUDA = torch.cuda.is_available()


class CustomList(list):
    pass


class CustomDict(dict):
    pass


def test_default_convert_keeps_or_rebuilds_types_like_torch():
    assert dt.default_convert(CustomDict({"a": 1, "b": 2})) == CustomDict({"a": 1, "b": 2})
    assert type(dt.default_convert(CustomDict({"a": 1}))) is CustomDict
    assert dt.default_convert(CustomList([1, 2, 3])) == CustomList([1, 2, 3])
    assert dt.default_convert(range(2)) == [0, 1]


@pytest.mark.parametrize("batch, dtype", [([1, 2, -1], torch.int64), ([1.1, 2.3, -0.9], torch.float64), ([True, False], torch.bool)])
def test_default_collate_number_dtypes(batch, dtype):
    out = dt.default_collate(batch)
    assert out.dtype == dtype and torch.equal(out, torch.tensor(batch, dtype=dtype))


def test_default_collate_strings_are_kept():
    assert dt.default_collate(["a", "b", "c"]) == ["a", "b", "c"]


def test_default_collate_mapping_and_sequence_types():
    out = dt.default_collate([CustomDict({"a": 1, "b": 2}), CustomDict({"a": 3, "b": 4})])
    assert type(out) is CustomDict
    assert_same(dict(out), {"a": torch.tensor([1, 3]), "b": torch.tensor([2, 4])})
    out = dt.default_collate([CustomList([1, 2, 3]), CustomList([4, 5, 6])])
    assert type(out) is CustomList
    assert_same(list(out), [torch.tensor([1, 4]), torch.tensor([2, 5]), torch.tensor([3, 6])])
    assert_same(dt.default_collate([range(2), range(2)]), [torch.tensor([0, 0]), torch.tensor([1, 1])])


def test_default_collate_bad_numpy_types():
    arr = np.array(["a", "b", "c"])
    assert (dt.default_collate(arr) == arr).all()
    for bad in (np.array([[["a", "b", "c"]]]), np.array([object(), object()]), np.array([[[object(), object()]]])):
        with pytest.raises(TypeError):
            dt.default_collate(bad)


@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable:UserWarning")  # torch's own warning
def test_default_collate_numpy_memmap():
    with tempfile.TemporaryFile() as f:
        arr = np.array([[0, 1], [2, 3], [4, 5], [6, 7]])
        mm = np.memmap(f, dtype=arr.dtype, mode="w+", shape=arr.shape)
        mm[:] = arr
        ro = np.memmap(f, dtype=arr.dtype, mode="r", shape=arr.shape)
        out = dt.default_collate(list(ro))
    assert torch.equal(out, torch.as_tensor(arr))


def test_default_collate_unequal_sequences_raise_runtime_error():
    for batch in ([["X"], ["X", "X"]], [["X", "X"], ["X"]]):
        with pytest.raises(RuntimeError):
            dt.default_collate(batch)


class SharedCheck(tud.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.zeros(1), np.zeros(1)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_batches_are_never_in_shared_memory(num_workers):
    # torch's collate puts batches in shared memory inside worker processes; our workers are
    # threads of one process, so the batch stays ordinary memory (no extra copy).
    assert not dt.default_collate([torch.zeros(1)]).is_shared()
    with dt.DataLoader(SharedCheck(), batch_size=2, num_workers=num_workers) as loader:
        for t, n in loader:
            assert not t.is_shared() and not n.is_shared()


@pytest.mark.parametrize("np_type, tensor_type", [
    (np.float64, torch.DoubleTensor), (np.float32, torch.FloatTensor), (np.float16, torch.HalfTensor),
    (np.int64, torch.LongTensor), (np.int32, torch.IntTensor), (np.int16, torch.ShortTensor),
    (np.int8, torch.CharTensor), (np.uint8, torch.ByteTensor),
])
def test_numpy_scalars_collate_to_their_tensor_type(np_type, tensor_type):
    class Scalars(tud.Dataset):
        def __getitem__(self, i):
            return np_type()

        def __len__(self):
            return 4

    assert isinstance(next(iter(dt.DataLoader(Scalars(), batch_size=2))), tensor_type)


class DictDataset(tud.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return {"a_tensor": torch.empty(4, 2).fill_(i), "another_dict": {"a_number": i}}


@pytest.mark.parametrize("persistent", [False, True])
def test_dict_dataset_sequential_batches(persistent):
    loader = dt.DataLoader(DictDataset(), batch_size=2, persistent_workers=persistent, num_workers=1 if persistent else 0)
    for i, sample in enumerate(loader):
        assert set(sample) == {"a_tensor", "another_dict"} and set(sample["another_dict"]) == {"a_number"}
        t, n = sample["a_tensor"], sample["another_dict"]["a_number"]
        assert t.size() == torch.Size([2, 4, 2]) and (t[0] == 2 * i).all() and (t[1] == 2 * i + 1).all()
        assert n.size() == torch.Size([2]) and n.tolist() == [2 * i, 2 * i + 1]
    loader.close()


Batch = collections.namedtuple("Batch", ["data", "label", "random_tensor"])
Data = collections.namedtuple("Data", ["positive", "negative"])


class NamedTupleDataset(tud.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return Batch(data=Data(positive=i, negative=-i), label=str(i), random_tensor=torch.randn(3))


def test_namedtuples_keep_their_types():
    for batch in dt.DataLoader(NamedTupleDataset(), batch_size=2, pin_memory=CUDA):
        assert isinstance(batch, Batch) and isinstance(batch.data, Data)
        assert isinstance(batch.data.positive, torch.Tensor)
        assert batch.random_tensor.is_pinned() == CUDA
    for batch in dt.DataLoader(NamedTupleDataset(), batch_size=None):
        assert isinstance(batch, Batch) and isinstance(batch.data, Data)
        assert not isinstance(batch.data.positive, torch.Tensor)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")  # torch's own warning
def test_nested_tensors_need_a_custom_collate_fn():
    ds = [torch.nested.nested_tensor([torch.randn(5)]) for _ in range(6)]
    with dt.DataLoader(ds, batch_size=1, num_workers=2, collate_fn=lambda b: [x.clone() for x in b]) as loader:
        for i, batch in enumerate(loader):
            assert torch.equal(batch[0].values(), ds[i].values())
    with pytest.raises(RuntimeError, match="not currently supported by the default collate_fn"):
        next(iter(dt.DataLoader(ds, batch_size=1, num_workers=2)))


class StringDataset(tud.Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return "12345"[i], i


@pytest.mark.parametrize("num_workers", [0, 4])
def test_pin_memory_without_cuda_is_a_no_op_and_with_cuda_pins(num_workers):
    loader = dt.DataLoader(StringDataset(), batch_size=2, shuffle=True, num_workers=num_workers, pin_memory=True)
    for s, n in loader:
        assert isinstance(s[0], str)
        assert n.is_pinned() == CUDA
    loader.close()


def test_pin_memory_device_is_accepted():
    loader = dt.DataLoader(DictDataset(), batch_size=2, pin_memory=True, pin_memory_device="cuda" if CUDA else "")
    for sample in loader:
        assert sample["a_tensor"].is_pinned() == CUDA
        assert sample["another_dict"]["a_number"].is_pinned() == CUDA
    only_device = dt.DataLoader(DictDataset(), batch_size=2, pin_memory_device="cuda")
    for sample in only_device:  # pin_memory_device alone pins nothing, as in torch
        assert not sample["a_tensor"].is_pinned()


class CustomBatch:
    def __init__(self, data):
        inp, tgt = zip(*data, strict=True)
        self.inp, self.tgt = torch.stack(inp), torch.stack(tgt)

    def pin_memory(self):
        self.inp, self.tgt = self.inp.pin_memory(), self.tgt.pin_memory()
        return self

    def is_pinned(self):
        return self.inp.is_pinned() and self.tgt.is_pinned()


@pytest.mark.skipif(not CUDA, reason="pinned memory needs CUDA")
@pytest.mark.parametrize("num_workers", [0, 1])
def test_custom_batch_types_are_pinned_with_their_own_method(num_workers):
    ds = tud.TensorDataset(torch.arange(50.0).view(10, 5), torch.arange(50.0).view(10, 5))
    for sample in dt.DataLoader(ds, batch_size=2, collate_fn=CustomBatch, pin_memory=True, num_workers=num_workers):
        assert isinstance(sample, CustomBatch) and sample.is_pinned()


@pytest.mark.parametrize("columns", [
    (np.arange(12.0).reshape(6, 2), np.arange(6)),
    (np.arange(6, dtype=np.float32), np.arange(6, dtype=np.uint8) % 2 == 0),
    (np.zeros((6, 2, 2), dtype=np.int16),),
])
def test_array_dataset_batches_equal_torchs_tensordataset(columns):
    ours = dataloader.ArrayDataset(*columns)
    theirs = tud.TensorDataset(*(torch.from_numpy(c) for c in columns))
    for o, t in zip(dt.DataLoader(ours, batch_size=4), tud.DataLoader(theirs, batch_size=4), strict=True):
        assert_same(t, o)
