"""Image pipeline: datasets of image files, per-item transforms, batch collation.

Datasets return encoded bytes; decoding and the other per-item steps are
transforms that run on the loader's worker threads; ``ImageCollator`` copies each
batch once, without the GIL, into a reusable buffer exposed as an ``ImageBatch``::

    from dataloader.image import (Decode, ImageCollator, ImageFolder,
                                  RandomHorizontalFlip, RandomResizedCrop)
    loader = DataLoader(ImageFolder("train/"), batch_size=32, shuffle=True,
                        num_workers=2,
                        transform=Decode().then(RandomResizedCrop(224))
                                          .then(RandomHorizontalFlip()),
                        collate_fn=ImageCollator(dtype=np.float32,
                                                 mean=(0.485, 0.456, 0.406),
                                                 std=(0.229, 0.224, 0.225),
                                                 reuse_buffers=4))
    for images, labels in loader:   # ImageBatch (32, 3, 224, 224) float32, int64 (32,)
        x = torch.from_dlpack(images)   # or np.asarray(images): no copy

Pillow is needed to decode and resize (``pip install Pillow``, or ``pip install '.[image]'`` from a checkout); it is
imported on first use.
"""

from __future__ import annotations

from dataloader.image.batch import ImageBatch
from dataloader.image.collator import ImageCollator
from dataloader.image.decode import Decode, Resize
from dataloader.image.folder import IMG_EXTENSIONS, ImageFiles, ImageFolder
from dataloader.image.geometry import CenterCrop, PadTo, RandomCrop, RandomHorizontalFlip, ToCHW
from dataloader.image.pixels import Normalize, ToFloat
from dataloader.image.resized_crop import RandomResizedCrop

__all__ = [
    "CenterCrop",
    "Decode",
    "IMG_EXTENSIONS",
    "ImageBatch",
    "ImageCollator",
    "ImageFiles",
    "ImageFolder",
    "Normalize",
    "PadTo",
    "RandomCrop",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "Resize",
    "ToCHW",
    "ToFloat",
]
assert sorted(__all__) == __all__
