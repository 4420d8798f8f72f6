"""Decoding encoded images (JPEG, PNG, ...) with Pillow, and resizing them.

Decoding is a transform, not part of a dataset: ``ImageFolder``/``ImageFiles``
return the encoded bytes and ``Decode()`` turns them into an ``(H, W, C)``
``uint8`` array on the worker thread (Pillow releases the GIL while it decodes).
"""

from __future__ import annotations

import io
import os
from typing import Any, TypeGuard

import numpy as np

from dataloader._context import current_item_index
from dataloader.image._convert import as_image_array, from_pil
from dataloader.image._pillow import check_interpolation, pillow
from dataloader.image._resample import resize_array
from dataloader.transforms import Transform

__all__ = ["Decode", "Resize", "size_pair"]

#: Pillow modes Decode can produce, each one byte per channel.
_MODES = ("L", "LA", "RGB", "RGBA")


def size_pair(size: int | tuple[int, int], name: str = "size") -> tuple[int, int]:
    """Validate an ``int`` or ``(height, width)`` size and return ``(height, width)``.

    Raises:
        TypeError: not an int or a pair of ints (floats, strings and bools are refused,
            not truncated or parsed).
        ValueError: a side below 1.
    """

    def is_int(v: object) -> TypeGuard[int | np.integer]:
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))

    if is_int(size):
        pair = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 2 and all(map(is_int, size)):
        pair = (int(size[0]), int(size[1]))
    else:
        raise TypeError(f"{name}={size!r} must be an int or a (height, width) pair of ints")
    if min(pair) < 1:
        raise ValueError(f"{name}={size!r} must be >= 1")
    return pair


def _current_item(nbytes: int) -> str:
    """`` (item N)`` for the item the loader is transforming on this thread, else the size."""
    # the loader records the index for item_rng(); there is no public getter yet
    index = current_item_index()
    return f" of {nbytes:,} bytes" if index is None else f" (item {index})"


class Decode(Transform):
    """Decode an encoded image into an ``(H, W, C)`` ``uint8`` array.

    Args:
        mode: Pillow mode of the result: ``"RGB"`` (C=3, the default; alpha is
            dropped and grayscale replicated, like torchvision's loader),
            ``"RGBA"`` (4), ``"L"`` (grayscale, C=1) or ``"LA"`` (2).
        draft: ``None``, or a minimum ``(height, width)`` (an int means both):
            JPEGs are then decoded at the smallest DCT scale (1/2, 1/4, 1/8) whose
            result is still at least that large, which is several times faster
            when the image is downscaled afterwards anyway.  Other formats ignore it.

    Input: encoded data in any buffer-protocol object (``bytes``, read in place;
    ``bytearray``, ``memoryview``, a ``uint8`` array, ``obstore.Bytes``, ``mmap``: copied
    once), or a path (``str``/``os.PathLike``).
    Output: a read-only, C-contiguous ``uint8`` array of shape ``(H, W, C)``.
    Thread-safety: stateless; safe to share.

    Raises:
        ValueError: the data is not a decodable image; the message names the
            item (inside a DataLoader) or the path.
        TypeError: the input is neither bytes-like nor a path.
    """

    __slots__ = ("mode", "draft")

    def __init__(self, mode: str = "RGB", draft: int | tuple[int, int] | None = None) -> None:
        if mode not in _MODES:
            raise ValueError(f"{mode=} is not one of {_MODES}")
        self.mode = mode
        self.draft = None if draft is None else size_pair(draft, "draft")

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        Image = pillow()
        if isinstance(value, (str, os.PathLike)):
            source: Any = value
            where = f" {os.fspath(value)!r}"
        else:  # bytes are read in place; another buffer (obstore.Bytes, mmap, array) is copied
            data = value.data if isinstance(value, np.ndarray) else value
            try:
                memoryview(data)  # the buffer protocol (io.BytesIO(None) would be an empty file)
            except TypeError:
                raise TypeError(
                    f"Decode expects bytes or a path (bytes: any buffer-protocol object), got {type(value).__name__}"
                ) from None
            source = io.BytesIO(data)
            where = _current_item(source.getbuffer().nbytes)
        try:
            with Image.open(source) as im:
                if self.draft is not None and im.format == "JPEG":
                    im.draft(self.mode, (self.draft[1], self.draft[0]))
                im = im.convert(self.mode) if im.mode != self.mode else im
                image = from_pil(im, 3)
        except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as e:
            # Pillow names its file object ("cannot identify image file <_io.BytesIO object
            # at 0x...>"), which tells the user nothing: name the item or path instead.
            reason = str(e).replace(f" {source!r}", "").replace(repr(source), "the data")
            raise ValueError(f"cannot decode image{where}: {reason}") from e
        return image


class Resize(Transform):
    """Resize with Pillow's resampling filters.

    Args:
        size: an int resizes the shorter side to ``size`` keeping the aspect ratio
            (the longer side becomes ``int(size * long / short)``, as in
            torchvision); ``(height, width)`` resizes to exactly that.
        interpolation: ``"bilinear"`` (default, antialiased like torchvision's
            PIL path), ``"nearest"``, ``"bicubic"``, ``"lanczos"``, ``"box"``,
            ``"hamming"``.

    The result equals the installed Pillow's ``Image.resize``; 1- and 3-channel
    images are resized natively with the GIL released (see
    ``dataloader.image._resample``).

    Input: ``uint8`` ``(H, W, C)`` or ``(H, W)``, any strides.  Output: a new array
    with the same number of dimensions.  Thread-safety: stateless.

    Raises:
        TypeError: the image is not ``uint8``.
        ValueError: the image has no rows or no columns.
    """

    __slots__ = ("size", "interpolation")

    def __init__(self, size: int | tuple[int, int], interpolation: str = "bilinear") -> None:
        if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
            if size < 1:
                raise ValueError(f"{size=} must be >= 1")
            self.size: int | tuple[int, int] = int(size)
        else:
            self.size = size_pair(size)
        self.interpolation = check_interpolation(interpolation)

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        """Return the ``(height, width)`` an image of this size is resized to."""
        if isinstance(self.size, tuple):
            return self.size
        if height <= width:
            return self.size, int(self.size * width / height)
        return int(self.size * height / width), self.size

    def apply(self, value: Any, rng: np.random.Generator | None) -> np.ndarray:
        image = as_image_array(value, "Resize")
        if 0 in image.shape[:2]:
            raise ValueError(f"Resize got an empty image of shape {image.shape}")
        out_h, out_w = self.output_size(image.shape[0], image.shape[1])
        if (out_h, out_w) == image.shape[:2]:
            return image
        return resize_array(image, out_h, out_w, self.interpolation, "Resize")
