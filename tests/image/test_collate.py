"""ImageCollator and its native kernels: fused collation equals the unfused chain."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from tests._image_data import photo
from hypothesis import given, settings
from hypothesis import strategies as st

from dataloader.image import ImageBatch, ImageCollator, Normalize, ToCHW, ToFloat

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)

#: output dtype -> tolerance of the fused copy against the unfused NumPy chain.
#: float32: the fused x * (1 / (255 std)) + (-mean / std) and the chain's
#: ((x / 255) - mean) / std round differently, by a few ulps of values <= ~2.7.
TOLERANCE = {
    np.uint8: {"rtol": 0, "atol": 0},
    np.float32: {"rtol": 1e-6, "atol": 2e-6},
}


def images(n=5, size=(24, 32)):
    return [photo(size, index=i) for i in range(n)]


def reference(items, layout, dtype, mean=None, std=None):
    """The unfused chain: per-item ToFloat/Normalize/ToCHW, then np.stack."""
    chain = []
    if dtype == np.float32:
        chain.append(ToFloat())
        if mean is not None:
            chain.append(Normalize(mean, std))
    out = []
    for x in items:
        x = x[:, :, None] if x.ndim == 2 else x
        for t in chain:
            x = t(x)
        out.append(ToCHW()(x) if layout == "NCHW" else x)
    return np.stack(out)


def check(batch, expected, dtype):
    array = np.asarray(batch)
    assert array.dtype == dtype and array.shape == expected.shape
    assert array.flags.c_contiguous and array.flags.writeable
    np.testing.assert_allclose(array, expected, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_matches_unfused_chain(dtype, layout):
    items = images()
    check(ImageCollator(layout, dtype)(items), reference(items, layout, dtype), dtype)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_fused_normalize_matches_unfused_chain(layout):
    items = images()
    batch = ImageCollator(layout, np.float32, MEAN, STD)(items)
    check(batch, reference(items, layout, np.float32, MEAN, STD), np.float32)


VIEWS = {
    "flip": lambda x: x[:, ::-1],
    "vflip": lambda x: x[::-1],
    "crop": lambda x: x[3:19, 5:29],
    "step": lambda x: x[:, ::2],
    "bgr": lambda x: x[:, :, ::-1],
    "chw_back": lambda x: np.ascontiguousarray(x.transpose(2, 0, 1)).transpose(1, 2, 0),
    "fortran": lambda x: np.asfortranarray(x),
}


@pytest.mark.parametrize("view", VIEWS, ids=list(VIEWS))
@pytest.mark.parametrize("dtype,norm", [(np.uint8, False), (np.float32, False), (np.float32, True)])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_strided_views_are_copied_directly(view, dtype, norm, layout):
    items = [VIEWS[view](x) for x in images()]
    mean, std = (MEAN, STD) if norm else (None, None)
    batch = ImageCollator(layout, dtype, mean, std)(items)
    check(batch, reference(items, layout, dtype, mean, std), dtype)


@pytest.mark.parametrize("channels", [1, 2, 4, 5])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_other_channel_counts(channels, dtype, layout):
    rng = np.random.default_rng(channels)
    items = [rng.integers(0, 256, (7, 9, channels), dtype=np.uint8) for _ in range(3)]
    items[1] = items[1][:, ::-1]
    check(ImageCollator(layout, dtype)(items), reference(items, layout, dtype), dtype)


def test_grayscale_hw_images_become_one_channel():
    items = [x[:, :, 0] for x in images(3)]
    assert ImageCollator("NCHW")(items).shape == (3, 1, 24, 32)
    batch = ImageCollator("NHWC", np.float32, 0.5, 0.25)(items)
    expected = (np.stack(items)[..., None] / np.float32(255) - np.float32(0.5)) / np.float32(0.25)
    np.testing.assert_allclose(np.asarray(batch), expected, **TOLERANCE[np.float32])


def test_float32_items_are_taken_as_they_are():
    items = [ToFloat()(x) for x in images(3)]
    unaligned = np.frombuffer(b"\0" + items[2].tobytes(), np.float32, offset=1)
    items[2] = unaligned.reshape(items[2].shape)
    assert not items[2].flags.aligned
    expected = reference([x for x in images(3)], "NCHW", np.float32, MEAN, STD)
    batch = ImageCollator("NCHW", np.float32, MEAN, STD)(items)
    np.testing.assert_allclose(np.asarray(batch), expected, **TOLERANCE[np.float32])
    plain = ImageCollator("NHWC", np.float32)(items)
    np.testing.assert_array_equal(np.asarray(plain), np.stack(items))


def test_labels_collate_to_int64():
    items = images(4)
    batch, labels = ImageCollator()([(x, np.int32(i * 3)) for i, x in enumerate(items)])
    assert batch.labels.dtype == np.int64
    np.testing.assert_array_equal(batch.labels, [0, 3, 6, 9])
    assert labels is batch.labels
    assert ImageCollator()(items).labels is None


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_pairs_collate_to_an_images_labels_tuple_without_copying_the_images(layout):
    items = images(3)
    result = ImageCollator(layout)([(x, i) for i, x in enumerate(items)])
    assert isinstance(result, tuple) and len(result) == 2
    batch, labels = result
    assert isinstance(batch, ImageBatch)
    np.testing.assert_array_equal(labels, [0, 1, 2])
    expected = np.stack(items) if layout == "NHWC" else np.stack(items).transpose(0, 3, 1, 2)
    view = np.asarray(batch)
    np.testing.assert_array_equal(view, expected)
    assert view.base is batch  # a view of the batch buffer, not a copy
    assert view.__array_interface__["data"][0] == batch.__array_interface__["data"][0]


def test_images_only_collate_to_one_image_batch():
    result = ImageCollator()(images(3))
    assert isinstance(result, ImageBatch)
    assert result.labels is None and result.shape == (3, 3, 24, 32)


def test_shape_mismatch_names_first_bad_index_and_both_shapes():
    items = images(4)
    items[2] = items[2][:, :31]
    items[3] = items[3][:20]
    with pytest.raises(
        ValueError,
        match=r"image 2 has shape \(24, 31, 3\) but image 0 "
        r"has shape \(24, 32, 3\)",
    ):
        ImageCollator()(items)
    with pytest.raises(ValueError, match=r"image 1 has shape \(24, 32\) but image 0"):
        ImageCollator()([items[0], items[1][:, :, 0]])


def test_bad_items():
    items = images(3)
    with pytest.raises(ValueError, match="empty"):
        ImageCollator()([])
    with pytest.raises(TypeError, match="image 0 has dtype float32"):
        ImageCollator()([ToFloat()(x) for x in items])
    with pytest.raises(TypeError, match="image 1 has dtype float32 but image 0 has dtype uint8"):
        ImageCollator(dtype=np.float32)([items[0], ToFloat()(items[1])])
    with pytest.raises(TypeError, match="int16"):
        ImageCollator()([x.astype(np.int16) for x in items])
    with pytest.raises(ValueError, match="shape"):
        ImageCollator()([np.zeros((2, 2, 2, 2), np.uint8)])
    with pytest.raises(ValueError, match="item 1 is not an"):
        ImageCollator()([(items[0], 1), items[1]])
    with pytest.raises(ValueError, match="item 1 is a tuple"):
        ImageCollator()([items[0], (items[1], 1)])
    with pytest.raises(TypeError, match="labels must be integers"):
        ImageCollator()([(x, 0.5) for x in items])
    with pytest.raises(ValueError, match="mean has 3 values but the images have 4"):
        ImageCollator(dtype=np.float32, mean=MEAN, std=STD)([np.zeros((2, 2, 4), np.uint8)])


def test_bad_arguments():
    with pytest.raises(ValueError, match="layout"):
        ImageCollator("CHWN")
    with pytest.raises(ValueError, match="dtype"):
        ImageCollator(dtype=np.float64)
    with pytest.raises(ValueError, match="dtype"):
        ImageCollator(dtype="not a dtype")
    with pytest.raises(ValueError, match="together"):
        ImageCollator(dtype=np.float32, mean=MEAN)
    with pytest.raises(ValueError, match="float32"):
        ImageCollator(mean=MEAN, std=STD)
    with pytest.raises(ValueError, match="std"):
        ImageCollator(dtype=np.float32, mean=MEAN, std=(1, 0, 1))
    with pytest.raises(ValueError, match="reuse_buffers"):
        ImageCollator(reuse_buffers=-1)
    with pytest.raises(TypeError, match="reuse_buffers"):
        ImageCollator(reuse_buffers=1.5)


@pytest.mark.parametrize("shape", [(0, 5, 3), (4, 0, 3), (4, 5, 0)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_empty_images_give_an_empty_batch(shape, dtype):
    batch = ImageCollator("NCHW", dtype)([np.zeros(shape, np.uint8)[:, ::-1]] * 2)
    assert batch.shape == (2, shape[2], shape[0], shape[1]) and np.asarray(batch).size == 0


def test_pil_images_are_accepted():
    Image = pytest.importorskip("PIL.Image")
    items = images(2)
    batch = ImageCollator("NHWC")([Image.fromarray(x) for x in items])
    np.testing.assert_array_equal(np.asarray(batch), np.stack(items))


def test_native_rejects_wrong_out_shape():
    from dataloader._native import _imgcopy

    items = images(2)
    with pytest.raises(ValueError, match="out has shape"):
        _imgcopy.collate_u8(items, np.empty((2, 24, 32, 4), np.uint8), False)
    with pytest.raises(ValueError, match="scale has 1"):
        _imgcopy.collate_f32(
            items,
            np.empty((2, 3, 24, 32), np.float32),
            True,
            np.ones(1, np.float32),
            np.ones(3, np.float32),
        )


#: uint8 NCHW splits a contiguous image in one pass and any other row by row: widths around
#: the vector lengths (16, 32 pixels), a single pixel, and views that take each path.
NCHW_VIEWS = {
    "contiguous": lambda x: x,
    "flip": lambda x: x[:, ::-1],
    "crop": lambda x: x[1:, 1:],
    "step": lambda x: x[::2, ::3],
    "reversed_channels": lambda x: x[:, :, ::-1],
}


@pytest.mark.parametrize("view", NCHW_VIEWS, ids=list(NCHW_VIEWS))
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("hw", [(1, 1), (1, 33), (5, 1), (3, 15), (7, 31), (9, 65), (17, 100)])
def test_uint8_nchw_matches_transpose_at_odd_sizes(hw, channels, view):
    rng = np.random.default_rng(hw[0] * 1000 + hw[1] * 10 + channels)
    base = [rng.integers(0, 256, (hw[0] + 1, hw[1] + 1, channels), dtype=np.uint8)]
    items = [NCHW_VIEWS[view](x[: hw[0], : hw[1]] if view != "crop" else x) for x in base * 3]
    expected = np.stack([np.ascontiguousarray(x.transpose(2, 0, 1)) for x in items])
    check(ImageCollator("NCHW")(items), expected, np.uint8)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("view", ["contiguous", "flip", "step"])
def test_uint8_grayscale_hw_images_match_stack(layout, view):
    rng = np.random.default_rng(7)
    items = [NCHW_VIEWS[view](rng.integers(0, 256, (13, 37), dtype=np.uint8)) for _ in range(3)]
    stacked = np.stack(items)
    expected = stacked[:, None] if layout == "NCHW" else stacked[..., None]
    check(ImageCollator(layout)(items), expected, np.uint8)


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(1, 9),
    w=st.integers(1, 9),
    c=st.integers(1, 4),
    n=st.integers(1, 4),
    flip=st.booleans(),
    nchw=st.booleans(),
    f32=st.booleans(),
    seed=st.integers(0, 99),
)
def test_random_shapes_match_reference(h, w, c, n, flip, nchw, f32, seed):
    rng = np.random.default_rng(seed)
    items = [rng.integers(0, 256, (h, w, c), dtype=np.uint8) for _ in range(n)]
    if flip:
        items = [x[:, ::-1] for x in items]
    layout, dtype = ("NCHW" if nchw else "NHWC"), (np.float32 if f32 else np.uint8)
    batch = ImageCollator(layout, dtype)(items)
    assert isinstance(batch, ImageBatch)
    check(batch, reference(items, layout, dtype), dtype)


@pytest.mark.skipif(not hasattr(sys, "_is_gil_enabled"), reason="needs CPython >= 3.13")
def test_extensions_keep_gil_disabled():
    import sysconfig

    import dataloader._native._imgcopy  # noqa: F401
    import dataloader._native._resize  # noqa: F401

    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        assert sys._is_gil_enabled() is False


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_big_endian_float32_images(layout: str) -> None:
    # '>f4' images are byte-swapped to native before the copy (NumPy gives them NPY_FLOAT32 too).
    x = np.linspace(0, 1, 2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)
    col = ImageCollator(layout=layout, dtype=np.float32)
    want = np.asarray(col([x, x]))
    got = np.asarray(col([x.astype(">f4"), x.astype(">f4")]))
    np.testing.assert_array_equal(got, want)
    mixed = np.asarray(col([x, x.astype(">f4")]))
    np.testing.assert_array_equal(mixed, want)


def test_uint64_labels_do_not_wrap() -> None:
    # Labels are int64: one >= 2**63 is refused, never wrapped to a negative.
    item = (np.zeros((2, 2, 3), np.uint8), np.uint64(2**63 + 5))
    with pytest.raises((ValueError, TypeError, OverflowError)):
        ImageCollator()([item])
