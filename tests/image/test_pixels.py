"""ToFloat and Normalize against NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
from tests._image_data import photo

from dataloader.image import Normalize, ToFloat

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def test_to_float_is_x_over_255_in_float32():
    image = photo((20, 30))
    out = ToFloat()(image)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, image.astype(np.float32) / np.float32(255))
    assert out.min() >= 0.0 and out.max() <= 1.0


def test_to_float_casts_floats_and_rejects_other_ints():
    assert ToFloat()(np.ones((2, 2, 3), np.float64)).dtype == np.float32
    with pytest.raises(TypeError, match="int16"):
        ToFloat()(np.ones((2, 2, 3), np.int16))


def test_normalize_matches_reference():
    x = ToFloat()(photo((20, 30)))
    out = Normalize(MEAN, STD)(x)
    expected = (x - np.float32(MEAN)) / np.float32(STD)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)


def test_normalize_scalar_and_grayscale():
    x = np.full((4, 5), 0.5, np.float32)
    np.testing.assert_allclose(Normalize(0.25, 0.5)(x), np.full((4, 5), 0.5))


def test_normalize_errors():
    with pytest.raises(ValueError, match="std"):
        Normalize(MEAN, (1.0, 0.0, 1.0))
    with pytest.raises(TypeError, match="ToFloat"):
        Normalize(MEAN, STD)(photo((4, 4)))
    with pytest.raises(ValueError, match="channels"):
        Normalize((0.5, 0.5), (1.0, 1.0))(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="mean"):
        Normalize([], 1.0)
