"""Decode and Resize against Pillow, on the committed photographs."""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytest.importorskip("PIL")
from tests._image_data import ALL_IMAGES, ALPHA_PNG, GRAY_PNG, JPEGS, photo, pillow_rgb
from PIL import Image

from dataloader.image import Decode, Resize


@pytest.mark.parametrize("path", ALL_IMAGES, ids=lambda p: p.name)
def test_decode_rgb_equals_pillow(path):
    image = Decode()(path.read_bytes())
    expected = pillow_rgb(path)
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    np.testing.assert_array_equal(image, expected)


@pytest.mark.parametrize("mode,channels", [("L", 1), ("LA", 2), ("RGB", 3), ("RGBA", 4)])
def test_decode_modes(mode, channels):
    image = Decode(mode)(ALPHA_PNG.read_bytes())
    assert image.shape == (150, 225, channels)
    np.testing.assert_array_equal(image, pillow_rgb(ALPHA_PNG, mode))


def test_decode_rgba_keeps_alpha_and_gray_stays_gray():
    rgba = Decode("RGBA")(ALPHA_PNG.read_bytes())
    assert rgba[..., 3].min() == 0 and rgba[..., 3].max() == 255
    gray = Decode("L")(GRAY_PNG.read_bytes())
    assert gray.shape == (256, 256, 1)
    rgb = Decode("RGB")(GRAY_PNG.read_bytes())
    np.testing.assert_array_equal(rgb[..., 0], rgb[..., 2])
    np.testing.assert_array_equal(rgb[..., :1], gray)


def test_decode_tuple_item_and_path_input():
    data = JPEGS[0].read_bytes()
    image, label = Decode()((data, 3))
    assert label == 3
    np.testing.assert_array_equal(Decode()(JPEGS[0]), image)
    np.testing.assert_array_equal(Decode()(str(JPEGS[0])), image)
    np.testing.assert_array_equal(Decode()(np.frombuffer(data, np.uint8)), image)


def test_decode_reads_any_buffer_protocol_object(tmp_path):
    import array
    import mmap

    data = JPEGS[0].read_bytes()
    expected = Decode()(data)
    path = tmp_path / "a.jpg"
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        buffers = [bytearray(data), memoryview(data), array.array("B", data), mapped]
        try:
            import obstore
        except ImportError:
            obstore = None
        if obstore is not None:  # what obstore's own get() returns: obstore.Bytes
            store = obstore.store.MemoryStore()
            obstore.put(store, "a.jpg", data)
            buffers.append(obstore.get(store, "a.jpg").bytes())
        for buffer in buffers:
            np.testing.assert_array_equal(Decode()(buffer), expected, err_msg=type(buffer).__name__)


@pytest.mark.parametrize("value", [None, 12, 1.5, [1, 2], object()])
def test_decode_refuses_what_is_neither_a_buffer_nor_a_path(value):
    with pytest.raises(TypeError, match=f"bytes or a path .*got {type(value).__name__}"):
        Decode()(value)


def test_decode_draft_keeps_at_least_the_requested_size():
    data = JPEGS[0].read_bytes()
    full = Decode()(data)
    small = Decode(draft=(100, 100))(data)
    assert small.shape[0] >= 100 and small.shape[1] >= 100
    assert small.shape[0] < full.shape[0] / 2 + 1
    with Image.open(JPEGS[0]) as im:
        im.draft("RGB", (100, 100))
        np.testing.assert_array_equal(small, np.asarray(im.convert("RGB")))


def test_decode_draft_is_ignored_for_png():
    assert Decode(draft=8)(GRAY_PNG.read_bytes()).shape == (256, 256, 3)


@pytest.mark.parametrize(
    "data",
    [b"", b"not an image", JPEGS[0].read_bytes()[:2000]],
    ids=["empty", "garbage", "truncated"],
)
def test_corrupt_data_is_a_value_error(data):
    with pytest.raises(ValueError, match="cannot decode image"):
        Decode()(data)


def test_corrupt_file_error_names_the_path(tmp_path):
    path = tmp_path / "bad.jpg"
    path.write_bytes(b"\xff\xd8\xff garbage")
    with pytest.raises(ValueError, match="bad.jpg"):
        Decode()(path)


def test_decode_bad_arguments():
    with pytest.raises(ValueError, match="mode="):
        Decode("CMYK")
    with pytest.raises(TypeError, match="bytes or a path"):
        Decode()(12)
    with pytest.raises(ValueError, match="draft"):
        Decode(draft=0)


def test_missing_pillow_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install Pillow .*pip install '\.\[image\]'"):
        Decode()(JPEGS[0].read_bytes())


@pytest.mark.parametrize("size,expected", [(32, (32, 40)), ((20, 30), (20, 30))])
def test_resize_matches_pillow(size, expected):
    image = photo((64, 80))
    out = Resize(size)(image)
    assert out.shape == (*expected, 3)
    ref = np.asarray(Image.fromarray(image).resize(expected[::-1], Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(out, ref)


def test_resize_int_is_the_shorter_side_like_torchvision():
    tall = np.zeros((100, 30, 3), np.uint8)
    assert Resize(10)(tall).shape == (int(10 * 100 / 30), 10, 3)
    assert Resize(16).output_size(480, 640) == (16, int(16 * 640 / 480))


def test_resize_grayscale_and_interpolation():
    gray = Decode("L")(GRAY_PNG.read_bytes())
    out = Resize((50, 60), interpolation="nearest")(gray)
    ref = np.asarray(Image.fromarray(gray[:, :, 0]).resize((60, 50), Image.Resampling.NEAREST))
    assert out.shape == (50, 60, 1)
    np.testing.assert_array_equal(out[:, :, 0], ref)
    assert Resize(8)(gray[:, :, 0]).shape == (8, 8)


def test_resize_same_size_returns_input():
    image = photo((32, 32))
    assert Resize(32)(image) is image


def test_resize_bad_input():
    with pytest.raises(TypeError, match="uint8"):
        Resize(8)(np.zeros((16, 16, 3), np.float32))
    with pytest.raises(ValueError, match="interpolation"):
        Resize(8, interpolation="cubic-ish")
    with pytest.raises(ValueError, match="size"):
        Resize(0)
    with pytest.raises(ValueError, match="shape"):
        Resize(8)(np.zeros((2, 2, 2, 2), np.uint8))


@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 0)])
def test_resize_shorter_side_of_empty_image(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="empty|0"):
        Resize(4)(np.zeros(shape, np.uint8))


@pytest.mark.parametrize("size", [(2.5, 3.7), ("3", "2"), (True, 2), 2.0])
def test_resize_sizes_must_be_ints_not_truncated(size):
    with pytest.raises(TypeError, match="size="):
        Resize(size)


def test_undecodable_bytes_error_gives_the_size_not_a_file_object():
    with pytest.raises(ValueError, match="cannot decode image of 12 bytes") as info:
        Decode()(b"not an image")
    assert "BytesIO" not in str(info.value)
