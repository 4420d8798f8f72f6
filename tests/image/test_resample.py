"""The native resampler against the installed Pillow's Image.resize, pixel for pixel."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("PIL")
from tests._image_data import photo
from tests._support import run_threads
from PIL import Image

from dataloader._native import _resize
from dataloader.image._resample import _pass_order, resize_array

FILTERS = {
    "box": Image.Resampling.BOX,
    "bilinear": Image.Resampling.BILINEAR,
    "hamming": Image.Resampling.HAMMING,
    "bicubic": Image.Resampling.BICUBIC,
    "lanczos": Image.Resampling.LANCZOS,
    "nearest": Image.Resampling.NEAREST,
}


def pillow_resize(image, height, width, interpolation):
    pil = Image.fromarray(np.ascontiguousarray(image[:, :, 0] if image.shape[2] == 1 else image))
    out = np.asarray(pil.resize((width, height), FILTERS[interpolation]))
    return out.reshape(height, width, image.shape[2])


@pytest.mark.parametrize("interpolation", list(FILTERS))
@pytest.mark.parametrize("out_size", [(224, 224), (37, 300), (90, 41), (160, 128)])
def test_photo_matches_pillow(interpolation, out_size):
    image = photo((160, 128), index=1)
    out = resize_array(image, *out_size, interpolation, "test")
    assert out.shape == (*out_size, 3) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, pillow_resize(image, *out_size, interpolation))


@settings(max_examples=150, deadline=None)
@given(
    h=st.integers(1, 48),
    w=st.integers(1, 48),
    oh=st.integers(1, 64),
    ow=st.integers(1, 64),
    channels=st.sampled_from([1, 2, 3, 4]),
    interpolation=st.sampled_from(list(FILTERS)),
    flip=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_random_sizes_and_views_match_pillow(h, w, oh, ow, channels, interpolation, flip, seed):
    image = np.random.default_rng(seed).integers(0, 256, (h, w, channels), dtype=np.uint8)
    view = image[:, ::-1] if flip else image
    out = resize_array(view, oh, ow, interpolation, "test")
    np.testing.assert_array_equal(out, pillow_resize(view, oh, ow, interpolation))


def test_crop_view_is_read_in_place():
    image = photo((120, 140))
    crop = image[13:101, 7:133]
    assert not crop.flags.c_contiguous
    out = resize_array(crop, 50, 60, "bilinear", "test")
    np.testing.assert_array_equal(out, pillow_resize(crop, 50, 60, "bilinear"))


def test_grayscale_2d_and_many_channels():
    gray = photo((40, 30))[:, :, 0]
    out = resize_array(gray, 20, 25, "bicubic", "test")
    assert out.shape == (20, 25)
    np.testing.assert_array_equal(out, pillow_resize(gray[:, :, None], 20, 25, "bicubic")[..., 0])
    five = np.random.default_rng(0).integers(0, 256, (30, 20, 5), dtype=np.uint8)
    out5 = resize_array(five, 17, 23, "bilinear", "test")
    for c in range(5):  # channels are resized independently
        np.testing.assert_array_equal(
            out5[:, :, c], resize_array(five[:, :, c], 17, 23, "bilinear", "test")
        )


@pytest.mark.parametrize("order", [_resize.ORDER_PILLOW_12, _resize.ORDER_PILLOW_13])
def test_pass_orders_differ_only_in_rounding(order):
    image = photo((120, 60))
    out = np.empty((30, 50, 3), np.uint8)
    _resize.resize(image, out, 1, order)
    reference = pillow_resize(image, 30, 50, "bilinear")
    assert np.abs(out.astype(int) - reference).max() <= (0 if order == _pass_order() else 1)


def test_native_entry_validates():
    image = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="filter_id"):
        _resize.resize(image, np.empty((2, 2, 3), np.uint8), 7)
    with pytest.raises(ValueError, match="order"):
        _resize.resize(image, np.empty((2, 2, 3), np.uint8), 1, 5)
    with pytest.raises(ValueError, match="channels"):
        _resize.resize(image, np.empty((2, 2, 1), np.uint8), 1)
    with pytest.raises(ValueError, match="cannot resize"):
        _resize.resize(np.zeros((0, 4, 3), np.uint8), np.empty((2, 2, 3), np.uint8), 1)
    with pytest.raises(TypeError, match="uint8"):
        resize_array(np.zeros((4, 4, 3), np.float32), 2, 2, "bilinear", "test")


@pytest.mark.timeout(60)
def test_concurrent_resizes_from_4_threads_are_correct():
    images = [photo((96, 128), index=i) for i in range(4)]
    expected = [pillow_resize(x, 70, 50, "bicubic") for x in images]

    def work(i):
        for _ in range(20):
            np.testing.assert_array_equal(
                resize_array(images[i], 70, 50, "bicubic", "test"), expected[i]
            )

    assert run_threads(work, 4) == []
