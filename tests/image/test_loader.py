"""The image pipeline through dataloader.DataLoader: per-batch errors, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from tests._image_data import encode_jpeg, photo

from dataloader.image import (
    CenterCrop,
    Decode,
    ImageBatch,
    ImageCollator,
    ImageFiles,
    RandomHorizontalFlip,
    RandomResizedCrop,
)

loader_module = pytest.importorskip("dataloader.loader")
DataLoader = loader_module.DataLoader

N_FILES = 100
BAD = 37


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("jpegs")
    paths = []
    for i in range(N_FILES):
        path = root / f"{i:03d}.jpg"
        data = encode_jpeg(photo((36, 44), index=i))
        path.write_bytes(data[: len(data) // 3] if i == BAD else data)
        paths.append(path)
    return paths


def drain(loader):
    """Every batch's labels, or the error it raised, in order."""
    results = []
    it = iter(loader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return results
        except ValueError as e:
            results.append(e)
        else:
            images, labels = batch
            results.append(labels.tolist())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_corrupt_jpeg_fails_exactly_its_batch(files, num_workers):
    loader = DataLoader(
        ImageFiles(files, labels=range(N_FILES)),
        batch_size=10,
        num_workers=num_workers,
        transform=Decode().then(CenterCrop(32)),
        collate_fn=ImageCollator(reuse_buffers=2),
    )
    results = drain(loader)
    assert len(results) == 10
    bad_batch = BAD // 10
    for b, result in enumerate(results):
        if b == bad_batch:
            assert isinstance(result, ValueError)
            assert f"cannot decode image (item {BAD})" in str(result)
        else:
            assert result == list(range(10 * b, 10 * b + 10))


@pytest.mark.timeout(60)
def test_random_transforms_are_identical_for_any_num_workers(files):
    good = [p for i, p in enumerate(files) if i != BAD][:48]
    pipeline = Decode().then(RandomResizedCrop(24)).then(RandomHorizontalFlip())

    def epoch(num_workers, **kwargs):
        loader = DataLoader(
            ImageFiles(good, labels=range(len(good))),
            batch_size=8,
            shuffle=True,
            num_workers=num_workers,
            seed=1234,
            transform=pipeline,
            collate_fn=ImageCollator(dtype=np.float32, mean=0.5, std=0.25),
            **kwargs,
        )
        return [(np.asarray(x).copy(), y.copy()) for x, y in loader]

    reference = epoch(0)
    assert len(reference) == 6
    for kwargs in ({"num_workers": 2}, {"num_workers": 2, "item_concurrency": 2}):
        other = epoch(**kwargs)
        for (x, y), (x2, y2) in zip(reference, other, strict=True):
            np.testing.assert_array_equal(y, y2)
            np.testing.assert_array_equal(x, x2)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_labelled_batches_unpack_into_images_and_labels(files, num_workers):
    good = [p for i, p in enumerate(files) if i != BAD][:20]
    loader = DataLoader(
        ImageFiles(good, labels=range(100, 120)),
        batch_size=8,
        num_workers=num_workers,
        transform=Decode().then(CenterCrop(32)),
        collate_fn=ImageCollator(reuse_buffers=2),
    )
    seen = []
    for x, y in loader:  # as with any PyTorch loader
        assert isinstance(x, ImageBatch) and x.shape[1:] == (3, 32, 32)
        assert y.dtype == np.int64 and y.shape == (len(x),)
        seen += y.tolist()
    assert seen == list(range(100, 120))
    unlabelled = DataLoader(
        ImageFiles(good[:4]),
        batch_size=4,
        num_workers=num_workers,
        transform=Decode().then(CenterCrop(32)),
        collate_fn=ImageCollator(),
    )
    (batch,) = list(unlabelled)
    assert isinstance(batch, ImageBatch) and batch.labels is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_undecodable_item_error_names_its_index_not_a_file_object(tmp_path, files, num_workers):
    paths = list(files[:6])
    paths[4] = tmp_path / "not-an-image.jpg"
    paths[4].write_bytes(b"this is not an image")
    loader = DataLoader(
        ImageFiles(paths, labels=range(6)),
        batch_size=3,
        num_workers=num_workers,
        transform=Decode().then(CenterCrop(32)),
        collate_fn=ImageCollator(),
    )
    it = iter(loader)
    next(it)
    with pytest.raises(ValueError, match=r"cannot decode image \(item 4\)") as info:
        next(it)
    assert "BytesIO" not in str(info.value) and "0x" not in str(info.value)
    loader.close()
