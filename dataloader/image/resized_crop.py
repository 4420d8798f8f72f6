"""``RandomResizedCrop``: torchvision's random scale/aspect crop, resized with Pillow."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dataloader.image._convert import as_image_array
from dataloader.image._pillow import check_interpolation
from dataloader.image._resample import resize_array
from dataloader.image.decode import size_pair
from dataloader.transforms import Transform, resolve_rng

__all__ = ["RandomResizedCrop"]

#: torchvision's number of attempts before falling back to a center crop.
_ATTEMPTS = 10


class RandomResizedCrop(Transform):
    """Crop a random area and aspect ratio, then resize it to ``size``.

    The crop is chosen by torchvision's algorithm (:meth:`get_params`): up to 10
    attempts drawing an area fraction uniformly from ``scale`` and an aspect
    ratio log-uniformly from ``ratio``; the first that fits is placed uniformly
    at random; if none fits, the largest center crop whose ratio is within
    ``ratio`` is used.  The crop (a view, not copied) is then resized exactly as
    Pillow's ``Image.resize`` would (natively, without the GIL, for 1 and 3
    channels), which is what torchvision does with PIL images.

    Args:
        size: output int (square) or ``(height, width)``.
        scale: (min, max) fraction of the image area, 0 < min <= max < inf.
        ratio: (min, max) width / height of the crop, 0 < min <= max < inf.
        interpolation: see ``Resize``.

    Input: ``uint8`` ``(H, W, C)`` or ``(H, W)``.  Output: a new array.

    Raises:
        ValueError: a bad ``scale``/``ratio``; an image with no rows or columns.
    """

    __slots__ = ("size", "scale", "ratio", "interpolation")
    random = True

    def __init__(
        self,
        size: int | tuple[int, int],
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
        interpolation: str = "bilinear",
    ) -> None:
        self.size = size_pair(size)
        self.scale = _range(scale, "scale")
        self.ratio = _range(ratio, "ratio")
        self.interpolation = check_interpolation(interpolation)

    @staticmethod
    def get_params(
        height: int,
        width: int,
        rng: np.random.Generator,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0),
    ) -> tuple[int, int, int, int]:
        """Return the crop ``(top, left, height, width)`` for an image of this size."""
        area = height * width
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(_ATTEMPTS):
            target_area = area * rng.uniform(scale[0], scale[1])
            aspect = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
            w = int(round(math.sqrt(target_area * aspect)))
            h = int(round(math.sqrt(target_area / aspect)))
            if 0 < w <= width and 0 < h <= height:
                top = int(rng.integers(0, height - h + 1))
                left = int(rng.integers(0, width - w + 1))
                return top, left, h, w
        in_ratio = width / height
        if in_ratio < min(ratio):
            w = width
            h = int(round(w / min(ratio)))
        elif in_ratio > max(ratio):
            h = height
            w = int(round(h * max(ratio)))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        rng = resolve_rng(rng)
        image = as_image_array(value, "RandomResizedCrop")
        if 0 in image.shape[:2]:
            raise ValueError(f"RandomResizedCrop got an empty image of shape {image.shape}")
        top, left, h, w = self.get_params(
            image.shape[0], image.shape[1], rng, self.scale, self.ratio
        )
        crop = image[top : top + h, left : left + w]  # a view: the resize reads it in place
        out_h, out_w = self.size
        return resize_array(crop, out_h, out_w, self.interpolation, "RandomResizedCrop")


def _range(pair: tuple[float, float], name: str) -> tuple[float, float]:
    lo, hi = (float(x) for x in pair)
    if not 0.0 < lo <= hi < math.inf:
        raise ValueError(f"{name}={pair!r} must satisfy 0 < min <= max < inf")
    return lo, hi
