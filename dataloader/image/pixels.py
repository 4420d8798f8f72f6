"""Pixel-value transforms: ``uint8`` -> ``float32`` in [0, 1], and normalisation.

``ImageCollator(dtype=np.float32, mean=..., std=...)`` fuses both (and the CHW
transpose) into its one copy; use these only with another collate_fn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader.image._convert import as_image_array
from dataloader.transforms import Transform

__all__ = ["Normalize", "ToFloat", "channel_values"]


def channel_values(values: float | Sequence[float], name: str) -> np.ndarray:
    """Return a 1-D float64 array of per-channel values (a scalar gives one entry).

    Raises:
        ValueError: empty, more than 1-D, or not finite.
    """
    array = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if array.ndim != 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{name}={values!r} must be a finite scalar or 1-D sequence")
    return array


class ToFloat(Transform):
    """Convert to ``float32``: ``uint8`` becomes ``x / 255`` in [0, 1].

    Floating-point images are cast to ``float32`` unscaled (assumed in [0, 1]).

    Raises:
        TypeError: any other dtype.
    """

    __slots__ = ()

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        image = as_image_array(value, "ToFloat")
        if image.dtype == np.uint8:
            return np.divide(image, np.float32(255.0), dtype=np.float32)
        if image.dtype.kind == "f":
            return image.astype(np.float32, copy=False)
        raise TypeError(f"ToFloat supports uint8 and float images, got dtype {image.dtype}")


class Normalize(Transform):
    """``(x - mean) / std`` per channel (last axis) on a float ``(H, W, C)`` image.

    Args:
        mean: scalar or one value per channel.
        std: scalar or one value per channel, all non-zero.

    Output: ``float32`` (computed in float32).

    Raises:
        ValueError: ``std`` has a zero, or the channel counts do not match.
        TypeError: the image is not floating-point (apply ``ToFloat`` first).
    """

    __slots__ = ("mean", "std", "_mean32", "_std32")

    def __init__(self, mean: float | Sequence[float], std: float | Sequence[float]) -> None:
        self.mean = tuple(channel_values(mean, "mean").tolist())
        self.std = tuple(channel_values(std, "std").tolist())
        if 0.0 in self.std:
            raise ValueError(f"std={std!r} must not contain 0")
        self._mean32 = np.asarray(self.mean, dtype=np.float32)
        self._std32 = np.asarray(self.std, dtype=np.float32)

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        image = as_image_array(value, "Normalize")
        if image.dtype.kind != "f":
            raise TypeError(
                f"Normalize needs a float image, got dtype {image.dtype}; apply ToFloat() first"
            )
        channels = image.shape[2] if image.ndim == 3 else 1
        for name, values in (("mean", self._mean32), ("std", self._std32)):
            if values.size not in (1, channels):
                raise ValueError(
                    f"{name} has {values.size} values but the image has "
                    f"{channels} channels (shape {image.shape})"
                )
        mean, std = self._mean32, self._std32
        if image.ndim == 2:
            mean, std = mean[0], std[0]
        return (image.astype(np.float32, copy=False) - mean) / std
