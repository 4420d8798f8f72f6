"""An ``ImageFolder`` with 1% corrupt JPEGs under ``on_error="skip"`` / ``"replace"``: the
epoch completes and ``loader.failures`` names exactly the corrupt files."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("PIL")

from tests._image_data import encode_jpeg, photo  # noqa: E402
from dataloader import DataLoader  # noqa: E402
from dataloader.image import CenterCrop, Decode, ImageCollator, ImageFolder  # noqa: E402

N_PER_CLASS = 100  # 200 files, 2 corrupt: 1%
BATCH = 16


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("folder")
    jpeg = encode_jpeg(photo((24, 24)))
    bad = []
    for c, name in enumerate(("cat", "dog")):
        (root / name).mkdir()
        for i in range(N_PER_CLASS):
            path = root / name / f"{i:03d}.jpg"
            data = jpeg
            if i == 37 + 20 * c:  # one corrupt file per class: the JPEG's entropy-coded data overwritten
                data = jpeg[:20] + bytes(range(256)) * 2
                bad.append(str(path))
            path.write_bytes(data)
    return root, sorted(bad)


def _loader(root, policy, num_workers):
    return DataLoader(ImageFolder(str(root)), batch_size=BATCH, shuffle=True, seed=4, num_workers=num_workers,
                      transform=Decode().then(CenterCrop(16)), collate_fn=ImageCollator(), on_error=policy)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("policy", ["skip", "replace"])
def test_one_percent_corrupt_jpegs_are_reported_by_path_and_the_epoch_completes(folder, policy, num_workers):
    root, bad = folder
    with _loader(root, policy, num_workers) as loader:
        sizes = [len(labels) for _, labels in loader]
        failures, stats = loader.failures, loader.stats
    assert sorted({r.location for r in failures}) == bad
    assert all(r.exc_type is ValueError and "cannot decode image" in r.message for r in failures)
    assert stats.failed == len(failures)
    if policy == "skip":
        assert sum(sizes) == 2 * N_PER_CLASS - len(bad) and len(failures) == len(bad)
    else:
        assert sizes == [BATCH] * (2 * N_PER_CLASS // BATCH) + [2 * N_PER_CLASS % BATCH]


@pytest.mark.timeout(120)
def test_the_batches_do_not_depend_on_the_worker_count(folder):
    root, _ = folder
    runs = []
    for num_workers in (0, 2):
        with _loader(root, "replace", num_workers) as loader:
            runs.append([(np.asarray(x).copy(), np.asarray(y).tolist()) for x, y in loader])
    assert len(runs[0]) == len(runs[1])
    for (xa, ya), (xb, yb) in zip(*runs):
        assert ya == yb and np.array_equal(xa, xb)
