"""Crops, flips, padding and the HWC -> CHW transpose, on NumPy images.

Crops, flips and ``ToCHW`` return *views* (no copy): ``ImageCollator`` copies any
strides, so its one copy into the batch buffer is the only one they ever get.
All take ``(H, W, C)`` or ``(H, W)`` arrays of any dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader.image._convert import as_image_array
from dataloader.image.decode import size_pair
from dataloader.transforms import Transform, resolve_rng

__all__ = ["CenterCrop", "PadTo", "RandomCrop", "RandomHorizontalFlip", "ToCHW"]


class CenterCrop(Transform):
    """Crop the center ``(height, width)``, as torchvision's ``CenterCrop``.

    Args:
        size: int (square) or ``(height, width)``.

    The crop's top-left corner is ``round((H - h) / 2), round((W - w) / 2)``.  An
    image smaller than ``size`` is first zero-padded around (torchvision's rule),
    which copies; otherwise the result is a view.
    """

    __slots__ = ("size",)

    def __init__(self, size: int | tuple[int, int]) -> None:
        self.size = size_pair(size)

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        image = as_image_array(value, "CenterCrop")
        crop_h, crop_w = self.size
        height, width = image.shape[:2]
        if crop_h > height or crop_w > width:
            top = (crop_h - height) // 2 if crop_h > height else 0
            left = (crop_w - width) // 2 if crop_w > width else 0
            padded = np.zeros(
                (max(height, crop_h), max(width, crop_w), *image.shape[2:]), dtype=image.dtype
            )
            padded[top : top + height, left : left + width] = image
            image = padded
            height, width = image.shape[:2]
        top = int(round((height - crop_h) / 2.0))
        left = int(round((width - crop_w) / 2.0))
        return image[top : top + crop_h, left : left + crop_w]


class RandomCrop(Transform):
    """Crop a random ``(height, width)`` window, as torchvision's ``RandomCrop``.

    Args:
        size: int (square) or ``(height, width)``.

    Draws ``top = rng.integers(0, H - h + 1)`` then ``left = rng.integers(0, W - w + 1)``.
    Output: a view.

    Raises:
        ValueError: the image is smaller than ``size`` (pad it first with ``PadTo``).
    """

    __slots__ = ("size",)
    random = True

    def __init__(self, size: int | tuple[int, int]) -> None:
        self.size = size_pair(size)

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        rng = resolve_rng(rng)
        image = as_image_array(value, "RandomCrop")
        crop_h, crop_w = self.size
        height, width = image.shape[:2]
        if height < crop_h or width < crop_w:
            raise ValueError(
                f"crop size {(crop_h, crop_w)} is larger than the image "
                f"{(height, width)}; pad it first (PadTo)"
            )
        top = int(rng.integers(0, height - crop_h + 1))
        left = int(rng.integers(0, width - crop_w + 1))
        return image[top : top + crop_h, left : left + crop_w]


class RandomHorizontalFlip(Transform):
    """Mirror the image left-right with probability ``p`` (a view, no copy).

    Args:
        p: probability in [0, 1]; flips when ``rng.random() < p`` (torchvision's rule).
    """

    __slots__ = ("p",)
    random = True

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{p=} must be in [0, 1]")
        self.p = float(p)

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        rng = resolve_rng(rng)
        image = as_image_array(value, "RandomHorizontalFlip")
        return image[:, ::-1] if rng.random() < self.p else image


class PadTo(Transform):
    """Pad at the bottom and right up to ``(height, width)`` (a new array).

    Use it to batch images of different sizes: pixel coordinates are unchanged.

    Args:
        height: target height in pixels (>= the image's).
        width: target width in pixels (>= the image's).
        fill: value of the new pixels: a scalar, or one value per channel.

    Raises:
        ValueError: the image is larger than ``(height, width)``, or ``fill`` has
            the wrong number of values.
    """

    __slots__ = ("height", "width", "fill")

    def __init__(self, height: int, width: int, fill: float | Sequence[float] = 0) -> None:
        self.height, self.width = size_pair((height, width), "(height, width)")
        self.fill = fill

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        image = as_image_array(value, "PadTo")
        height, width = image.shape[:2]
        if height > self.height or width > self.width:
            raise ValueError(
                f"image of size {(height, width)} is larger than PadTo's "
                f"{(self.height, self.width)}"
            )
        out = np.empty((self.height, self.width, *image.shape[2:]), dtype=image.dtype)
        fill = np.asarray(self.fill, dtype=image.dtype)
        if fill.ndim > 1 or (fill.ndim == 1 and (image.ndim == 2 or fill.size != image.shape[2])):
            raise ValueError(
                f"fill={self.fill!r} must be a scalar or have one value per "
                f"channel of an image of shape {image.shape}"
            )
        out[:height, width:] = fill
        out[height:] = fill
        out[:height, :width] = image
        return out


class ToCHW(Transform):
    """Transpose ``(H, W, C)`` to ``(C, H, W)`` (``(H, W)`` becomes ``(1, H, W)``); a view.

    Only needed with ``default_collate``: ``ImageCollator(layout="NCHW")`` does
    this transpose inside its one copy.
    """

    __slots__ = ()

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        image = as_image_array(value, "ToCHW")
        if image.ndim == 2:
            return image[None]
        return image.transpose(2, 0, 1)
