"""CachedDataset: a cache whose finish failed (its directory removed, a full disk at the
rename) starts a new file at the next batch instead of never being written again."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from dataloader import CachedDataset, DataLoader, Dataset

pytestmark = pytest.mark.timeout(60)


class Rows(Dataset):
    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int):
        return np.full(3, float(i)), i


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_failed_finish_is_an_error_and_the_next_epoch_completes_the_cache(tmp_path, num_workers):
    folder = tmp_path / "cache"
    folder.mkdir()
    cached = CachedDataset(Rows(), folder / "rows.ndf")
    loader = DataLoader(cached, batch_size=8, num_workers=num_workers)
    with pytest.raises(FileNotFoundError, match="rows.ndf"):
        for i, _ in enumerate(loader):
            if i == 0:
                shutil.rmtree(folder)  # the rename of the finished file fails
    assert not cached.complete
    folder.mkdir()
    labels = np.concatenate([y.numpy() if hasattr(y, "numpy") else np.asarray(y) for _, y in loader])
    assert sorted(labels.tolist()) == list(range(40))
    assert cached.complete and (folder / "rows.ndf").is_file()
    again = CachedDataset(Rows(), folder / "rows.ndf")
    assert again.complete and again[7][1] == 7
