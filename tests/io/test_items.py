"""The items of every built-in remote dataset are ``bytes``: they work with ``Decode()`` and
``default_collate`` as they come (FileDataset, HttpDataset against a local server,
ObjectStoreDataset on an in-memory store); torch's collation: tests/torch/."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests._remote_items import KINDS, remote_images
from dataloader import DataLoader
from dataloader.collate import default_collate
from dataloader.image import Decode
from dataloader.io import Retry

N = 4
FAST = Retry(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02, attempt_timeout_s=5.0)


@pytest.fixture(params=KINDS)
def remote(request, tmp_path):
    """(dataset, the encoded images it serves), one of each kind."""
    with remote_images(request.param, tmp_path, N, retry=FAST) as pair:
        yield pair


def items(ds, indices):
    """``[ds[i] for i in indices]``, awaited on one event loop for an async dataset."""
    if not asyncio.iscoroutinefunction(type(ds).__getitem__):
        return [ds[i] for i in indices]

    async def run():
        try:
            return [await ds[i] for i in indices]
        finally:
            if hasattr(ds, "aclose"):
                await ds.aclose()

    return asyncio.run(run())


@pytest.mark.timeout(60)
def test_items_are_bytes(remote):
    ds, data = remote
    assert [type(x) for x in items(ds, range(N))] == [bytes] * N
    with DataLoader(ds, batch_size=2, collate_fn=list) as loader:
        assert [x for batch in loader for x in batch] == data


@pytest.mark.timeout(60)
def test_items_collate_with_default_collate_as_bytes_do(remote):
    ds, data = remote
    with DataLoader(ds, batch_size=2) as loader:  # default_collate: bytes are kept, in a list
        assert list(loader) == [data[:2], data[2:]]
    assert default_collate(items(ds, [0, 1])) == data[:2]


@pytest.mark.timeout(60)
def test_items_decode_through_the_loader_and_stack(remote):
    ds, data = remote
    with DataLoader(ds, batch_size=2, transform=Decode()) as loader:
        batches = list(loader)
    expected = np.stack([Decode()(d) for d in data])
    assert [b.shape for b in batches] == [(2, 16, 20, 3)] * 2
    np.testing.assert_array_equal(np.concatenate(batches), expected)
