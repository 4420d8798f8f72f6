"""W4 workload shared by bench_image.py and image_torch_w4.py (no dataloader imports).

512 JPEGs of 256x256 made from the committed test photographs (random crops at
random scales, resized), and the per-item reference pipeline written the way a
PyTorch user would with Pillow + NumPy: decode, RandomResizedCrop(224) with
torchvision's parameter algorithm, horizontal flip, to float, normalize, CHW.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from PIL import Image

PHOTOS = Path(__file__).resolve().parents[1] / "tests" / "data"
N_IMAGES = 512
SIZE_PX = 256
CROP_PX = 224
BATCH = 32
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def make_jpegs(directory: Path, n: int = N_IMAGES, seed: int = 0) -> list[Path]:
    """Write ``n`` 256x256 JPEGs (quality 90) into ``directory``; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    sources = [Image.open(p).convert("RGB") for p in sorted(PHOTOS.glob("*.jpg"))]
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        src = sources[i % len(sources)]
        side = int(rng.integers(160, min(src.size) + 1))
        left = int(rng.integers(0, src.size[0] - side + 1))
        top = int(rng.integers(0, src.size[1] - side + 1))
        tile = src.resize(
            (SIZE_PX, SIZE_PX), Image.Resampling.BILINEAR, box=(left, top, left + side, top + side)
        )
        path = directory / f"{i:04d}.jpg"
        tile.save(path, quality=90)
        paths.append(path)
    return paths


def rrc_params(height, width, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params with a NumPy generator."""
    area = height * width
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    return 0, 0, height, width  # torchvision's fallback for a square image (ratio 1 fits)


_MEAN32 = np.asarray(MEAN, np.float32)
_STD32 = np.asarray(STD, np.float32)


def reference_item(path, rng: np.random.Generator) -> np.ndarray:
    """Pillow + NumPy, as in a torch Dataset: float32 (3, 224, 224), normalized."""
    with Image.open(path) as im:
        im = im.convert("RGB")
        top, left, h, w = rrc_params(im.height, im.width, rng)
        im = im.crop((left, top, left + w, top + h)).resize(
            (CROP_PX, CROP_PX), Image.Resampling.BILINEAR
        )
        if rng.random() < 0.5:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    x = np.asarray(im, dtype=np.float32) / np.float32(255)
    x = (x - _MEAN32) / _STD32
    return np.ascontiguousarray(x.transpose(2, 0, 1))
