"""One resize of an HWC ``uint8`` array: native (no GIL) where exact, else Pillow.

``dataloader._native._resize`` reimplements Pillow's convolution resampling and
gives the same pixels as the installed Pillow (it follows that version's pass
order) for 1- and 3-channel images, without converting to and from Pillow's
layout and with the GIL released.  Nearest-neighbour and 2/4-channel images
(Pillow resizes LA/RGBA with premultiplied alpha) go through Pillow.
"""

from __future__ import annotations

import functools

import numpy as np

from dataloader._native import _resize
from dataloader.image._convert import from_pil, to_pil
from dataloader.image._pillow import resample_filter

__all__ = ["resize_array"]

#: interpolation name -> filter of the native resampler
_NATIVE_FILTERS = {
    "box": _resize.Filter.BOX,
    "bilinear": _resize.Filter.BILINEAR,
    "hamming": _resize.Filter.HAMMING,
    "bicubic": _resize.Filter.BICUBIC,
    "lanczos": _resize.Filter.LANCZOS,
}


@functools.cache
def _pass_order() -> int:
    """The native pass order matching the installed Pillow (13's when absent)."""
    from importlib import metadata  # lazy: 17-22 ms of import dataloader on 3.11, for the first resize only

    try:
        major = int(metadata.version("pillow").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return _resize.ORDER_PILLOW_13
    return _resize.ORDER_PILLOW_13 if major >= 13 else _resize.ORDER_PILLOW_12


def resize_array(
    image: np.ndarray, height: int, width: int, interpolation: str, who: str
) -> np.ndarray:
    """Resize ``image`` ((H, W, C) or (H, W), uint8, any strides) to ``(height, width)``.

    Returns a new C-contiguous array with the same number of dimensions.

    Raises:
        TypeError: ``image`` is not ``uint8``.
    """
    if image.dtype != np.uint8:
        raise TypeError(
            f"{who} needs a uint8 image, got dtype {image.dtype}; resize before ToFloat/Normalize"
        )
    hwc = image[:, :, None] if image.ndim == 2 else image
    channels = hwc.shape[2]
    filter_id = _NATIVE_FILTERS.get(interpolation)
    if filter_id is None or channels in (2, 4):
        resized = to_pil(image, who).resize((width, height), resample_filter(interpolation))
        return from_pil(resized, image.ndim)
    out = np.empty((height, width, channels), dtype=np.uint8)
    _resize.resize(hwc, out, filter_id, _pass_order())
    return out[:, :, 0] if image.ndim == 2 else out
