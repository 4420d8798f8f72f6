"""CachedDataset on a filesystem that refuses ``flock`` (ENOLCK: NFS without lockd;
EOPNOTSUPP, ENOSYS: some FUSE and network filesystems): the path guard's check and rename
run unlocked, as without ``fcntl``, and the cache completes (before, every build failed at
its rename with the ``flock``'s OSError, every epoch)."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest

from dataloader import CachedDataset, DataLoader
from tests.ndf._rows import Rows

pytestmark = pytest.mark.timeout(60)


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
