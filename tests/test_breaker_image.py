"""Adversarial reproducers for the image pipeline (dataloader/image, _imgcopy.pyx).

Each test is a minimal failing case found by the breaker; ``xfail(strict=True)``
marks the ones not fixed yet (the reason gives the diagnosis).
"""

from __future__ import annotations

import copy
import gc
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dataloader.image import ImageCollator, RandomResizedCrop, Resize

REPO = Path(__file__).resolve().parents[1]


def _run_isolated(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("reuse", [0, 1])
def test_deepcopy_of_batch_outlives_original(reuse: int) -> None:
    # copy.deepcopy copied _Buffer.address (an int) with the array: the copy's
    # __array_interface__ pointed at the original's memory -> use after free (SIGSEGV).
    code = f"""
import copy, gc, numpy as np
from dataloader.image import ImageCollator
c = ImageCollator(reuse_buffers={reuse})
b = c([np.full((256, 256, 3), 9, np.uint8)] * 8)
dc = copy.deepcopy(b)
del b; gc.collect()
junk = [c([np.full((256, 256, 3), 77, np.uint8)] * 8) for _ in range(4)]
junk += [np.full(256 * 256 * 3 * 8, 55, np.uint8) for _ in range(4)]
a = np.asarray(dc)
assert a.shape == (8, 3, 256, 256) and (a == 9).all(), np.unique(a)
"""
    proc = _run_isolated(code)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])


def test_pickled_batch_owns_its_pixels() -> None:
    b = ImageCollator(reuse_buffers=1)([np.full((4, 5, 3), 3, np.uint8)] * 2)
    p = pickle.loads(pickle.dumps(b))
    assert p._buffer.address == p._buffer.array.__array_interface__["data"][0]
    assert p._buffer.address != b._buffer.address
    assert (np.asarray(p) == 3).all() and np.asarray(p).shape == (2, 3, 4, 5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_big_endian_float32_images(layout: str) -> None:
    # _imgcopy.pyx _gather checks PyArray_TYPE (NPY_FLOAT32 also for '>f4') and
    # collator.py tests `first.dtype == np.float32` (False for '>f4'): swapped
    # bytes were read as native floats and scaled by 1/255 -> silent garbage.
    x = np.linspace(0, 1, 2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)
    col = ImageCollator(layout=layout, dtype=np.float32)
    want = np.asarray(col([x, x]))
    got = np.asarray(col([x.astype(">f4"), x.astype(">f4")]))
    np.testing.assert_array_equal(got, want)
    mixed = np.asarray(col([x, x.astype(">f4")]))
    np.testing.assert_array_equal(mixed, want)


def test_uint64_labels_do_not_wrap() -> None:
    # collator.py _split: astype(np.int64) silently wraps labels >= 2**63 to negatives.
    item = (np.zeros((2, 2, 3), np.uint8), np.uint64(2**63 + 5))
    with pytest.raises((ValueError, TypeError, OverflowError)):
        ImageCollator()([item])


@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 0)])
def test_resize_shorter_side_of_empty_image(shape: tuple[int, ...]) -> None:
    # decode.py Resize.output_size divides by a zero side -> ZeroDivisionError.
    with pytest.raises(ValueError, match="empty|0"):
        Resize(4)(np.zeros(shape, np.uint8))


@pytest.mark.parametrize("shape", [(0, 5, 3), (0, 0)])
def test_random_resized_crop_of_empty_image(shape: tuple[int, ...]) -> None:
    # resized_crop.py get_params fallback: `width / height` -> ZeroDivisionError.
    with pytest.raises(ValueError, match="empty|0"):
        RandomResizedCrop(4)(np.zeros(shape, np.uint8), rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    "kwargs", [{"scale": (0.5, float("inf"))}, {"ratio": (1.0, float("inf"))}]
)
def test_random_resized_crop_rejects_infinite_ranges(kwargs: dict) -> None:
    # resized_crop.py _range accepts inf; apply() then fails with OverflowError.
    with pytest.raises(ValueError, match="scale|ratio"):
        RandomResizedCrop(4, **kwargs)


@pytest.mark.timeout(60)
def test_held_views_survive_reuse_across_threads() -> None:
    # Held up: a view held while 100 more batches reuse the pool is never overwritten.
    import threading

    col = ImageCollator(reuse_buffers=1)
    first = col([np.full((16, 16, 3), 7, np.uint8)] * 4)
    views = [np.asarray(first), np.from_dlpack(first), np.asarray(first)[1:, 0]]
    del first
    gc.collect()

    def churn(tid: int) -> None:
        for k in range(100):
            b = col([np.full((16, 16, 3), (tid + k) % 200 + 20, np.uint8)] * 4)
            assert (np.asarray(b) == (tid + k) % 200 + 20).all()

    threads = [threading.Thread(target=churn, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all((v == 7).all() for v in views)
    assert copy.copy(views[0]).shape == (4, 3, 16, 16)


@pytest.mark.parametrize("size", [(2.5, 3.7), ("3", "2"), (True, 2), 2.0])
def test_resize_sizes_must_be_ints_not_truncated(size):
    from dataloader.image import Resize

    with pytest.raises(TypeError, match="size="):
        Resize(size)
