"""Crops, flip, padding and CHW transposes against NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
from tests._image_data import photo

from dataloader.image import CenterCrop, PadTo, RandomCrop, RandomHorizontalFlip, ToCHW


@pytest.fixture
def image():
    return photo((60, 75))


@pytest.mark.parametrize("size", [(20, 30), (60, 75), 41, (59, 2)])
def test_center_crop_matches_reference(image, size):
    h, w = (size, size) if isinstance(size, int) else size
    top, left = int(round((60 - h) / 2.0)), int(round((75 - w) / 2.0))
    out = CenterCrop(size)(image)
    np.testing.assert_array_equal(out, image[top : top + h, left : left + w])
    assert np.shares_memory(out, image)


def test_center_crop_larger_than_image_zero_pads_like_torchvision():
    image = np.arange(2 * 3 * 1, dtype=np.uint8).reshape(2, 3, 1) + 1
    out = CenterCrop((4, 6))(image)
    expected = np.zeros((4, 6, 1), np.uint8)
    # torchvision pads (left, top) = ((6-3)//2, (4-2)//2) = (1, 1)
    expected[1:3, 1:4] = image
    np.testing.assert_array_equal(out, expected)


def test_random_crop_matches_reference(image):
    out = RandomCrop((20, 30))(image, rng=np.random.default_rng(5))
    rng = np.random.default_rng(5)
    top, left = rng.integers(0, 60 - 20 + 1), rng.integers(0, 75 - 30 + 1)
    np.testing.assert_array_equal(out, image[top : top + 20, left : left + 30])


def test_random_crop_covers_all_offsets_and_full_size_is_identity(image):
    rng = np.random.default_rng(0)
    small = np.arange(4 * 4, dtype=np.uint8).reshape(4, 4)
    corners = {int(RandomCrop(3)(small, rng=rng)[0, 0]) for _ in range(200)}
    assert corners == {0, 1, 4, 5}
    np.testing.assert_array_equal(RandomCrop((60, 75))(image, rng=rng), image)


def test_random_crop_too_large_raises(image):
    with pytest.raises(ValueError, match="larger than the image"):
        RandomCrop(61)(image, rng=np.random.default_rng(0))


def test_flip_probability_and_reference(image):
    np.testing.assert_array_equal(
        RandomHorizontalFlip(1.0)(image, rng=np.random.default_rng(0)), image[:, ::-1]
    )
    assert RandomHorizontalFlip(0.0)(image, rng=np.random.default_rng(0)) is image
    rng, ref = np.random.default_rng(9), np.random.default_rng(9)
    flip = RandomHorizontalFlip()
    flips = 0
    for _ in range(400):
        out = flip(image, rng=rng)
        expected = image[:, ::-1] if ref.random() < 0.5 else image
        np.testing.assert_array_equal(out, expected)
        flips += out is not image
    assert 150 < flips < 250
    with pytest.raises(ValueError, match="p="):
        RandomHorizontalFlip(1.5)


def test_flip_with_label(image):
    out, label = RandomHorizontalFlip(1.0)((image, 4), rng=np.random.default_rng(0))
    assert label == 4
    np.testing.assert_array_equal(out, image[:, ::-1])


@pytest.mark.parametrize("fill", [0, 7, (1, 2, 3)])
def test_pad_to_matches_reference(image, fill):
    out = PadTo(64, 80, fill)(image)
    expected = np.empty((64, 80, 3), np.uint8)
    expected[...] = np.asarray(fill, np.uint8)
    expected[:60, :75] = image
    np.testing.assert_array_equal(out, expected)


def test_pad_to_grayscale_and_float():
    gray = np.ones((2, 3), np.float32)
    out = PadTo(3, 4, 0.5)(gray)
    assert out.dtype == np.float32 and out.shape == (3, 4)
    assert out[2, 3] == 0.5 and out[:2, :3].min() == 1.0


def test_pad_to_errors(image):
    with pytest.raises(ValueError, match="larger than"):
        PadTo(50, 80)(image)
    with pytest.raises(ValueError, match="fill"):
        PadTo(64, 80, (1, 2))(image)


def test_to_chw_is_a_view(image):
    out = ToCHW()(image)
    assert out.shape == (3, 60, 75) and np.shares_memory(out, image)
    np.testing.assert_array_equal(out, np.moveaxis(image, 2, 0))
    assert ToCHW()(image[:, :, 0]).shape == (1, 60, 75)
