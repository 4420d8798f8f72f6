"""Paths of the committed test photographs (see tests/data/README.md) and helpers."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"
JPEGS = sorted(DATA.glob("*.jpg"))
ALPHA_PNG = DATA / "chelsea_alpha.png"
GRAY_PNG = DATA / "camera_gray.png"
ALL_IMAGES = [*JPEGS, ALPHA_PNG, GRAY_PNG]


def pillow_rgb(path: Path, mode: str = "RGB") -> np.ndarray:
    """Reference decode: what torchvision's pil_loader gives, as an HWC array."""
    from PIL import Image

    with Image.open(path) as im:
        array = np.array(im.convert(mode))
    return array[:, :, None] if array.ndim == 2 else array


def encode_jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def photo(size: tuple[int, int] = (64, 80), index: int = 0) -> np.ndarray:
    """A real photo's pixels, resized to ``(height, width)``: uint8 HWC, contiguous."""
    from PIL import Image

    with Image.open(JPEGS[index % len(JPEGS)]) as im:
        return np.array(im.convert("RGB").resize((size[1], size[0])))
