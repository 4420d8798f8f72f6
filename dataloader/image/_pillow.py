"""Lazy import of Pillow, the optional ``image`` extra."""

from __future__ import annotations

from types import ModuleType

__all__ = ["check_interpolation", "pillow", "resample_filter"]

_INSTALL_HINT = (
    "dataloader.image needs Pillow to decode and resize images; "
    "install it with: pip install Pillow (or, from a checkout of this project, pip install '.[image]')"
)

#: interpolation name -> Pillow ``Image.Resampling`` member name
_RESAMPLE = {
    "nearest": "NEAREST",
    "bilinear": "BILINEAR",
    "bicubic": "BICUBIC",
    "lanczos": "LANCZOS",
    "box": "BOX",
    "hamming": "HAMMING",
}


def pillow() -> ModuleType:
    """Return ``PIL.Image``, importing it on first use.

    Raises:
        ImportError: Pillow is not installed; the message says how to install it.
    """
    try:
        from PIL import Image  # lazy: Pillow is optional (the "image" extra)
    except ImportError as e:
        raise ImportError(_INSTALL_HINT) from e
    return Image


def resample_filter(interpolation: str) -> int:
    """Map an interpolation name (``"bilinear"``...) to Pillow's resampling filter.

    Raises:
        ValueError: unknown name.
    """
    try:
        name = _RESAMPLE[interpolation]
    except KeyError:
        raise ValueError(f"{interpolation=} is not one of {sorted(_RESAMPLE)}") from None
    return int(getattr(pillow().Resampling, name))


def check_interpolation(interpolation: str) -> str:
    """Validate an interpolation name without importing Pillow; return it."""
    if interpolation not in _RESAMPLE:
        raise ValueError(f"{interpolation=} is not one of {sorted(_RESAMPLE)}")
    return interpolation
