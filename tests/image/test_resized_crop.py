"""RandomResizedCrop: torchvision's parameter algorithm and the Pillow resize."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("PIL")
from tests._image_data import photo
from PIL import Image

from dataloader.image import RandomResizedCrop


def reference_params(height, width, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision.transforms.RandomResizedCrop.get_params, written out again."""
    area = height * width
    for _ in range(10):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect_ratio = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            i = int(rng.integers(0, height - h + 1))
            j = int(rng.integers(0, width - w + 1))
            return i, j, h, w
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


@pytest.mark.parametrize("seed", range(20))
def test_params_follow_torchvision(seed):
    got = RandomResizedCrop.get_params(120, 200, np.random.default_rng(seed))
    assert got == reference_params(120, 200, np.random.default_rng(seed))
    top, left, h, w = got
    assert 0 <= top <= 120 - h and 0 <= left <= 200 - w and h > 0 and w > 0


@pytest.mark.parametrize(
    "shape,ratio,expected",
    [
        ((100, 10), (1.0, 1.0), (45, 0, 10, 10)),  # too tall: width kept
        ((10, 100), (1.0, 1.0), (0, 45, 10, 10)),  # too wide: height kept
        ((10, 10), (1.0, 1.0), (0, 0, 10, 10)),  # ratio fits: whole image
    ],
)
def test_fallback_to_center_crop(shape, ratio, expected):
    # an area fraction of 2.0 never fits, so all 10 attempts fail
    params = RandomResizedCrop.get_params(*shape, np.random.default_rng(0), (2.0, 2.0), ratio)
    assert params == expected


def test_output_matches_crop_then_pillow_resize():
    image = photo((96, 128))
    t = RandomResizedCrop((32, 40))
    for seed in range(5):
        out = t(image, rng=np.random.default_rng(seed))
        top, left, h, w = reference_params(96, 128, np.random.default_rng(seed))
        crop = np.ascontiguousarray(image[top : top + h, left : left + w])
        ref = np.asarray(Image.fromarray(crop).resize((40, 32), Image.Resampling.BILINEAR))
        assert out.shape == (32, 40, 3)
        np.testing.assert_array_equal(out, ref)


def test_grayscale_hw1_and_label():
    image = photo((50, 50))[:, :, :1]
    out, label = RandomResizedCrop(16)((image, 2), rng=np.random.default_rng(0))
    assert out.shape == (16, 16, 1) and label == 2


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale"):
        RandomResizedCrop(8, scale=(0.5, 0.1))
    with pytest.raises(ValueError, match="ratio"):
        RandomResizedCrop(8, ratio=(0.0, 1.0))
    with pytest.raises(TypeError, match="uint8"):
        RandomResizedCrop(8)(np.zeros((9, 9, 3), np.float32), rng=np.random.default_rng(0))


@pytest.mark.parametrize("shape", [(0, 5, 3), (0, 0)])
def test_random_resized_crop_of_empty_image(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="empty|0"):
        RandomResizedCrop(4)(np.zeros(shape, np.uint8), rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs", [{"scale": (0.5, float("inf"))}, {"ratio": (1.0, float("inf"))}]
)
def test_random_resized_crop_rejects_infinite_ranges(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="scale|ratio"):
        RandomResizedCrop(4, **kwargs)
