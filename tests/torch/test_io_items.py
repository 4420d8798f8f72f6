"""The bytes items of every built-in remote dataset through ``dataloader.torch``'s collation
(torch's rules: bytes are kept, in a list) and, decoded, stacked into a uint8 tensor."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tests._remote_items import KINDS, remote_images  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.image import Decode  # noqa: E402
from dataloader.io import ObjectStoreDataset  # noqa: E402
import dataloader.torch as dt  # noqa: E402

pytestmark = pytest.mark.timeout(60)
N = 4


@pytest.fixture(params=KINDS)
def remote(request, tmp_path):
    """(dataset, the encoded images it serves), one of each kind."""
    with remote_images(request.param, tmp_path, N) as pair:
        yield pair


def test_torch_collation_keeps_the_items_bytes_like_torchs_own(remote):
    ds, data = remote
    with DataLoader(ds, batch_size=2, collate_fn=dt.default_collate) as loader:
        batches = list(loader)
    assert batches == [data[:2], data[2:]]
    assert torch.utils.data.default_collate(data[:2]) == dt.default_collate(data[:2])


# Decode's arrays are read-only; torch's collate_numpy_array_fn warns once about that (its own
# behaviour, as in test_suite_collate.py's memmap test).
@pytest.mark.filterwarnings("ignore:The given NumPy array is not writable:UserWarning")
def test_decoded_items_collate_into_a_uint8_tensor(remote):
    ds, data = remote
    with DataLoader(ds, batch_size=2, transform=Decode(), collate_fn=dt.default_collate) as loader:
        batches = list(loader)
    assert all(isinstance(b, torch.Tensor) and b.dtype == torch.uint8 and b.shape == (2, 16, 20, 3) for b in batches)
    expected = np.stack([Decode()(d) for d in data])
    np.testing.assert_array_equal(torch.cat(batches).numpy(), expected)


def test_torch_dataloader_over_an_object_store_gives_bytes():
    obstore = pytest.importorskip("obstore")
    store = obstore.store.MemoryStore()
    obstore.put(store, "a", b"xy")
    with dt.DataLoader(ObjectStoreDataset(["a"], store=store), batch_size=1) as loader:
        assert list(loader) == [[b"xy"]]
    assert asyncio.iscoroutinefunction(ObjectStoreDataset.__getitem__)
