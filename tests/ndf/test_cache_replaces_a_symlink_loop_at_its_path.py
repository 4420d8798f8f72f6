"""CachedDataset whose path is a symbolic link: the path guard (``_ndf/cache_path``) looks
at the link itself, which is what the rename replaces.  A link loop or a dangling link at
the path is a stale file the cache replaces (before, the guard's ``stat`` raised ELOOP on
every batch and the cache was never built); a link to another dataset's file is replaced
by the cache too, the linked file left as it was."""

from __future__ import annotations

import os

import pytest

from dataloader import CachedDataset, DataLoader
from tests.ndf._rows import Rows

pytestmark = pytest.mark.timeout(60)


def one_epoch(cached: CachedDataset) -> None:
    for _ in DataLoader(cached, batch_size=4):
        pass


@pytest.mark.parametrize("target", ["itself", "missing"])
def test_a_looping_or_dangling_link_at_the_path_is_replaced(tmp_path, target):
    path = tmp_path / "c.ndf"
    os.symlink(path if target == "itself" else tmp_path / "gone.ndf", path)
    cached = CachedDataset(Rows(), path)
    assert not cached.complete
    one_epoch(cached)
    assert cached.complete and not os.path.islink(path)
    assert [float(cached[i][0][0]) for i in range(16)] == [float(i) for i in range(16)]


def test_a_link_to_another_file_is_replaced_and_the_file_kept(tmp_path):
    other = tmp_path / "other.bin"
    other.write_bytes(b"not a cache")
    path = tmp_path / "c.ndf"
    os.symlink(other, path)
    cached = CachedDataset(Rows(), path)
    one_epoch(cached)
    assert cached.complete and not os.path.islink(path)
    assert other.read_bytes() == b"not a cache"
