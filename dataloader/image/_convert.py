"""NumPy <-> Pillow conversions shared by the image transforms."""

from __future__ import annotations

from typing import Any

import numpy as np

from dataloader.image._pillow import pillow

__all__ = ["as_image_array", "from_pil", "to_pil"]


def as_image_array(image: Any, who: str) -> np.ndarray:
    """Return ``image`` as an ``(H, W)`` or ``(H, W, C)`` array (a PIL image is converted).

    Raises:
        ValueError: not 2-D or 3-D.
    """
    if not isinstance(image, np.ndarray):
        image = np.asarray(image)
    if image.ndim not in (2, 3):
        raise ValueError(f"{who} expects an (H, W, C) or (H, W) image, got shape {image.shape}")
    return image


def to_pil(image: np.ndarray, who: str) -> Any:
    """Wrap an HWC/HW ``uint8`` array as a PIL image (Pillow copies it).

    Raises:
        TypeError: not ``uint8``.
        ValueError: a channel count Pillow cannot hold (not 1 to 4).
    """
    if image.dtype != np.uint8:
        raise TypeError(
            f"{who} needs a uint8 image, got dtype {image.dtype}; resize before ToFloat/Normalize"
        )
    if image.ndim == 3:
        if image.shape[2] == 1:
            image = image[:, :, 0]
        elif image.shape[2] not in (2, 3, 4):
            raise ValueError(f"{who} supports 1 to 4 channels, got shape {image.shape}")
    return pillow().fromarray(image)


def from_pil(image: Any, ndim: int) -> np.ndarray:
    """Return a PIL image's pixels as an array with ``ndim`` dimensions (HW -> HW1)."""
    array = np.asarray(image)
    if ndim == 3 and array.ndim == 2:
        array = array[:, :, None]
    return array
