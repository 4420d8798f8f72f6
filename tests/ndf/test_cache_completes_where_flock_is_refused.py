"""CachedDataset on a filesystem that refuses ``flock`` (ENOLCK: NFS without lockd;
EOPNOTSUPP, ENOSYS: some FUSE and network filesystems): the path guard's check and rename
run unlocked, as without ``fcntl``, and the cache completes (before, every build failed at
its rename with the ``flock``'s OSError, every epoch)."""

from __future__ import annotations

import errno
import fcntl
import os

import numpy as np
import pytest

from dataloader import CachedDataset, DataLoader, Dataset

pytestmark = pytest.mark.timeout(60)


class Rows(Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int):
        return np.full(3, float(i)), i


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS])
def test_a_directory_that_refuses_flock_still_gets_its_cache(tmp_path, monkeypatch, code):
    real = fcntl.flock
    refused = []

    def flock(fd, op):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            refused.append(fd)
            raise OSError(code, os.strerror(code))
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    cached = CachedDataset(Rows(), tmp_path / "c.ndf")
    for _ in DataLoader(cached, batch_size=4):
        pass
    assert refused and cached.complete
    assert [float(cached[i][0][0]) for i in range(16)] == [float(i) for i in range(16)]
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
