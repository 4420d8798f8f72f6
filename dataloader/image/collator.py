"""``ImageCollator``: a ``collate_fn`` that copies a batch's images once.

The per-item work (decode, crop, flip...) runs on the worker threads as
transforms; the only per-batch work is this one copy, done by
``dataloader._native._imgcopy`` with the GIL released, into a buffer that is
reused (see ``dataloader.image.batch`` for the buffer's lifetime).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._native import _imgcopy
from dataloader.image.batch import BufferPool, ImageBatch, fresh_buffer
from dataloader.image.pixels import channel_values

__all__ = ["ImageCollator"]

_LAYOUTS = ("NCHW", "NHWC")
_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32))


class ImageCollator:
    """Collate images into an ``ImageBatch``; ``(image, label)`` pairs into ``(images, labels)``.

    Like ``default_collate``, the result mirrors one item: a batch of images is
    one ``ImageBatch``; a batch of ``(image, label)`` pairs is the tuple
    ``(images, labels)`` (an ``ImageBatch`` and an ``int64`` array of shape
    ``(B,)``), so ``for x, y in loader`` works as in PyTorch.  The images are
    copied once into the batch buffer (zero-copy from there on: ``np.asarray``,
    DLPack); ``images.labels`` is the same ``labels`` array.

    Items are ``(H, W, C)`` or ``(H, W)`` arrays (``(H, W)`` counts as C=1) of
    ``uint8`` or ``float32``, all of the same shape and dtype, with any strides:
    crops, flips and other views are copied directly, without an intermediate
    contiguous copy.

    Args:
        layout: ``"NCHW"`` (default) transposes HWC items into ``(B, C, H, W)``;
            ``"NHWC"`` stacks items as they are into ``(B, H, W, C)``.
        dtype: ``np.uint8`` (default; items must be ``uint8``) or ``np.float32``.
            For ``float32``, ``uint8`` items are scaled to [0, 1] (``x / 255``)
            and ``float32`` items are taken as they are.
        mean: per-channel mean (or a scalar), only with ``dtype=np.float32``:
            the batch is then ``(x - mean) / std`` of the [0, 1] values, computed
            in the same single copy as the conversion and transpose.
        std: per-channel standard deviation (or a scalar), non-zero; given
            together with ``mean``.
        reuse_buffers: number of idle batch buffers to keep for reuse; 0 (the
            default) allocates a fresh buffer for every batch.  A buffer is
            reused only after its batch and every view of it are gone; when none
            is free a new one is allocated (never a wait).  Reuse avoids the page
            faults of fresh memory; size it to the batches alive at once
            (``num_workers + prefetch_depth`` plus the one you hold).

    Thread-safety: one collator may be called from several threads at once
    (each call writes its own buffer; the pool is locked).

    Raises:
        ValueError: unknown ``layout`` or ``dtype``; ``mean`` without ``std``
            (or the reverse), or with ``dtype=uint8``; a zero in ``std``;
            ``reuse_buffers < 0``.
        TypeError: ``reuse_buffers`` is not an int.
    """

    def __init__(
        self,
        layout: str = "NCHW",
        dtype: Any = np.uint8,
        mean: float | Sequence[float] | None = None,
        std: float | Sequence[float] | None = None,
        reuse_buffers: int = 0,
    ) -> None:
        if layout not in _LAYOUTS:
            raise ValueError(f"{layout=} must be one of {_LAYOUTS}")
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        if dt not in _DTYPES:
            raise ValueError(f"{dtype=} must be numpy.uint8 or numpy.float32")
        if (mean is None) != (std is None):
            raise ValueError("give mean and std together (or neither)")
        if mean is not None and dt != np.float32:
            raise ValueError(f"mean/std need dtype=numpy.float32, got {dt}")
        if isinstance(reuse_buffers, bool) or not isinstance(reuse_buffers, (int, np.integer)):
            raise TypeError(f"{reuse_buffers=} must be an int")
        if reuse_buffers < 0:
            raise ValueError(f"{reuse_buffers=} must be >= 0")
        self.layout = layout
        self.dtype = dt
        self.mean = None if mean is None else channel_values(mean, "mean")
        self.std = None if std is None else channel_values(std, "std")
        if self.std is not None and np.any(self.std == 0):
            raise ValueError(f"std={std!r} must not contain 0")
        self.reuse_buffers = int(reuse_buffers)
        self._pool = BufferPool(self.reuse_buffers) if self.reuse_buffers else None
        self._affine: dict[tuple[int, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._affine_lock = threading.Lock()

    @property
    def allocations(self) -> int | None:
        """Buffers allocated so far because none was free (``None`` without reuse)."""
        return None if self._pool is None else self._pool.allocations

    def __call__(self, batch: Sequence[Any]) -> ImageBatch | tuple[ImageBatch, np.ndarray]:
        """Collate ``batch`` into one buffer.

        Args:
            batch: images, or ``(image, label)`` pairs with integer labels.

        Returns:
            For images: the ``ImageBatch`` (its ``labels`` is ``None``).  For pairs:
            ``(images, labels)``, the ``ImageBatch`` and its labels (``int64``,
            shape ``(B,)``; also ``images.labels``).

        Raises:
            ValueError: empty batch; images of different shapes (the message names
                the first mismatching index and both shapes); items mixing images
                and pairs; ``mean``/``std`` length not 1 or the channel count.
            TypeError: an image's dtype is neither ``uint8`` nor (for float32
                batches) ``float32``, images of different dtypes, or labels that
                are not integers.
        """
        images, labels = _split(batch)
        first = images[0]
        if not isinstance(first, np.ndarray):
            images[0] = first = np.asarray(first)
        if first.ndim not in (2, 3):
            raise ValueError(f"image 0 has shape {first.shape}; expected (H, W, C) or (H, W)")
        height, width = first.shape[:2]
        channels = first.shape[2] if first.ndim == 3 else 1
        n = len(images)
        nchw = self.layout == "NCHW"
        shape = (n, channels, height, width) if nchw else (n, height, width, channels)
        nbytes = n * height * width * channels * self.dtype.itemsize
        holder = self._pool.take(nbytes) if self._pool is not None else fresh_buffer(nbytes)
        out = holder.array[:nbytes].view(self.dtype).reshape(shape)
        if self.dtype == np.uint8:
            _imgcopy.collate_u8(images, out, nchw)
        else:
            scale, bias = self._scale_bias(channels, first.dtype.kind == "f")
            _imgcopy.collate_f32(images, out, nchw, scale, bias)
        images_batch = ImageBatch(holder, shape, self.dtype, labels)
        return images_batch if labels is None else (images_batch, labels)

    def _scale_bias(self, channels: int, is_float: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per-channel ``scale, bias`` (float32) with ``out = x * scale + bias``."""
        key = (channels, is_float)
        cached = self._affine.get(key)
        if cached is not None:
            return cached
        mean = np.zeros(1) if self.mean is None else self.mean
        std = np.ones(1) if self.std is None else self.std
        for name, values in (("mean", mean), ("std", std)):
            if values.size not in (1, channels):
                raise ValueError(
                    f"{name} has {values.size} values but the images have {channels} channels"
                )
        unit = 1.0 if is_float else 255.0
        # (x / unit - mean) / std == x * (1 / (unit * std)) + (-mean / std), in float64
        scale = np.broadcast_to(1.0 / (unit * std), (channels,)).astype(np.float32)
        bias = np.broadcast_to(-mean / std, (channels,)).astype(np.float32)
        with self._affine_lock:
            self._affine[key] = (scale, bias)
        return scale, bias

    def __repr__(self) -> str:
        norm = ""
        if self.mean is not None and self.std is not None:
            norm = f", mean={self.mean.tolist()}, std={self.std.tolist()}"
        return (
            f"ImageCollator(layout={self.layout!r}, dtype={self.dtype.name}{norm}, "
            f"reuse_buffers={self.reuse_buffers})"
        )


def _split(batch: Sequence[Any]) -> tuple[list[Any], np.ndarray | None]:
    """Return ``(images, labels)``: labels as int64 when items are pairs, else None."""
    n = len(batch)
    if n == 0:
        raise ValueError("cannot collate an empty batch")
    if not isinstance(batch[0], tuple):
        images = list(batch)
        for i, item in enumerate(images):
            if isinstance(item, tuple):
                raise ValueError(f"item {i} is a tuple but item 0 is an image")
        return images, None
    images = [None] * n
    labels = [None] * n
    for i, item in enumerate(batch):
        if not isinstance(item, tuple) or len(item) != 2:
            raise ValueError(f"item {i} is not an (image, label) pair like item 0")
        images[i], labels[i] = item
    array = np.asarray(labels)
    if array.dtype.kind not in "iub" or array.shape != (n,):
        raise TypeError(f"labels must be integers, got dtype {array.dtype} and shape {array.shape}")
    if array.dtype == np.uint64 and n and int(array.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"label {int(array.max())} does not fit in int64")
    return images, array.astype(np.int64, copy=False)
