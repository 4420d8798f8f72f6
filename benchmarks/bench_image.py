"""W5 image collation and W4 JPEG pipeline benchmarks.

Commands (repository root, after ``python setup.py build_ext --inplace -q``)::

    python -m pytest benchmarks/bench_image.py --benchmark-only \\
        --benchmark-columns=median,iqr,rounds --benchmark-group-by=group

or, without pytest-benchmark, one JSON line of the same figures::

    python -m benchmarks.bench_image            # W5 and W4
    python -m benchmarks.bench_image w5         # only W5

and the torch baseline for W4 (torch lives in its own venv, never a dependency)::

    PYTHONPATH=. /work/venvs/torch311/bin/python benchmarks/image_torch_w4.py

W5 (collation, 64 images of 224x224x3 uint8, the images already in memory):

* ``uint8 NHWC``: ``ImageCollator("NHWC", reuse_buffers=2)`` against
  ``np.stack`` (a fresh array per batch) and ``np.copyto`` of each image into one
  reused buffer (the memory-copy limit); also ``np.stack(out=buf)``.  Each result
  is dropped at once, so the collator reuses one hot buffer (and so does
  ``np.stack``: malloc hands back the block just freed, without page faults).
  The ``_hold1`` / ``_2buffers`` variants keep the previous batch alive, as a
  consumer does: two buffers take turns, and ``np.stack`` gets fresh memory.
* ``uint8 NCHW``: ``ImageCollator("NCHW", reuse_buffers=2)`` (the channel
  deinterleave of ``_native/_planes.h``) against the NHWC collator (the target is
  >= 0.7x its speed), the same on horizontally flipped views, and NumPy's
  per-image contiguous transpose + ``np.stack``.
* ``float32 NCHW normalized``: ``ImageCollator("NCHW", np.float32, mean, std,
  reuse_buffers=2)`` (one fused copy) against the unfused NumPy chain, per item
  (``ToFloat``, ``Normalize``, ``ToCHW`` then ``np.stack``) and per batch (stack,
  astype, in-place ``/=``, ``-=``, ``/=``, contiguous transpose).

W4 (512 JPEGs of 256x256 made from tests/data photos; decode, RandomResizedCrop
224, horizontal flip, normalize, NCHW float32, batch 32; seconds per epoch,
median of 3 epochs after a warm-up):

* ``ours_sequential``: our transforms + ImageCollator in a plain loop;
* ``ours_loader_{0,2}w``: the same through ``dataloader.DataLoader`` (skipped
  until ``dataloader.loader`` exists);
* ``ours_threads_2``: a 2-thread ``ThreadPoolExecutor`` over batches (no
  DataLoader; what two worker threads can do);
* ``reference_sequential``: the Pillow + NumPy per-item code the torch baseline
  runs (``_w4_data.reference_item``), in a plain loop.

Machine caveats: 2 shared cores; absolute figures move +-20% with other load,
compare ratios taken in one run.  Keep runs short.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _w4_data import BATCH, CROP_PX, MEAN, STD, make_jpegs, reference_item

from dataloader.image import (
    Decode,
    ImageCollator,
    ImageFiles,
    Normalize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    ToCHW,
    ToFloat,
)

W5_N, W5_PX = 64, 224
W4_SEED = 1234


# ---------------------------------------------------------------------- W5


def w5_images(n: int = W5_N) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(0, 256, (W5_PX, W5_PX, 3), dtype=np.uint8) for _ in range(n)]


def w5_methods(images: list[np.ndarray]) -> dict[str, Callable[[], None]]:
    """Name -> zero-argument callable collating ``images`` once (the result is dropped).

    ``*_hold1`` variants keep the previous batch alive while the next is made, as a
    consumer does, so two buffers take turns (and share the CPU caches).
    """
    bufs = [np.empty((len(images), W5_PX, W5_PX, 3), np.uint8) for _ in range(2)]
    buf = bufs[0]
    u8 = ImageCollator("NHWC", reuse_buffers=2)
    u8_hold = ImageCollator("NHWC", reuse_buffers=2)
    u8_nchw = ImageCollator("NCHW", reuse_buffers=2)
    flipped = [x[:, ::-1] for x in images]
    f32 = ImageCollator("NCHW", np.float32, MEAN, STD, reuse_buffers=2)
    to_float, normalize, to_chw = ToFloat(), Normalize(MEAN, STD), ToCHW()
    mean32, std32 = np.float32(MEAN), np.float32(STD)
    held: list[object] = [None]
    turn = [0]

    def copyto(out):
        for i, image in enumerate(images):
            np.copyto(out[i], image)

    def copyto_2buffers():
        turn[0] ^= 1
        copyto(bufs[turn[0]])

    def collator_hold1():
        held[0] = u8_hold(images)

    def stack_hold1():
        held[0] = np.stack(images)

    def transpose_stack():
        np.stack([np.ascontiguousarray(x.transpose(2, 0, 1)) for x in images])

    def chain_per_item():
        np.stack([to_chw(normalize(to_float(x))) for x in images])

    def chain_per_batch():
        x = np.stack(images).astype(np.float32)
        x /= np.float32(255)
        x -= mean32
        x /= std32
        np.ascontiguousarray(x.transpose(0, 3, 1, 2))

    return {
        "u8_np_stack": lambda: None if np.stack(images) is None else None,
        "u8_np_copyto_reused": lambda: copyto(buf),
        "u8_np_stack_out_reused": lambda: None if np.stack(images, out=buf) is None else None,
        "u8_collator_reuse2": lambda: None if u8(images) is None else None,
        "u8_np_copyto_2buffers": copyto_2buffers,
        "u8_np_stack_hold1": stack_hold1,
        "u8_collator_reuse2_hold1": collator_hold1,
        "u8_nchw_collator_reuse2": lambda: None if u8_nchw(images) is None else None,
        "u8_nchw_collator_flipped_reuse2": lambda: None if u8_nchw(flipped) is None else None,
        "u8_nchw_np_transpose_stack": transpose_stack,
        "f32_chain_per_item": chain_per_item,
        "f32_chain_per_batch": chain_per_batch,
        "f32_collator_fused_reuse2": lambda: None if f32(images) is None else None,
    }


def run_w5(rounds: int = 30) -> dict[str, float]:
    """Milliseconds per batch (median of ``rounds`` after warm-up) per method."""
    result = {}
    for name, method in w5_methods(w5_images()).items():
        for _ in range(3):
            method()
        times = []
        for _ in range(rounds if name.startswith("u8") else max(rounds // 3, 5)):
            start = time.perf_counter()
            method()
            times.append(time.perf_counter() - start)
        result[name] = statistics.median(times) * 1e3
    return result


# ---------------------------------------------------------------------- W4


def w4_pipeline():
    transform = Decode().then(RandomResizedCrop(CROP_PX)).then(RandomHorizontalFlip())
    collator = ImageCollator("NCHW", np.float32, MEAN, STD, reuse_buffers=4)
    return transform, collator


def w4_methods(paths: list[Path]) -> dict[str, Callable[[], None]]:
    """Name -> callable running one W4 epoch."""
    dataset = ImageFiles(paths)
    transform, collator = w4_pipeline()
    batches = [range(s, min(s + BATCH, len(paths))) for s in range(0, len(paths), BATCH)]

    def one_batch(indices):
        return collator(
            [transform(dataset[i], rng=np.random.default_rng((W4_SEED, i))) for i in indices]
        )

    def ours_sequential():
        for indices in batches:
            one_batch(indices)

    pool = ThreadPoolExecutor(2, thread_name_prefix="bench-image")

    def ours_threads_2():
        for batch in pool.map(one_batch, batches):
            del batch

    def reference_sequential():
        for indices in batches:
            np.stack(
                [reference_item(paths[i], np.random.default_rng((W4_SEED, i))) for i in indices]
            )

    methods = {
        "ours_sequential": ours_sequential,
        "ours_threads_2": ours_threads_2,
        "reference_sequential": reference_sequential,
    }
    try:
        from dataloader.loader import DataLoader
    except ImportError:
        return methods
    for workers in (0, 2):
        loader = DataLoader(
            dataset,
            batch_size=BATCH,
            num_workers=workers,
            seed=W4_SEED,
            transform=transform,
            collate_fn=collator,
            persistent_workers=workers > 0,
        )

        def through_loader(loader=loader):
            for batch in loader:
                del batch

        methods[f"ours_loader_{workers}w"] = through_loader
    return methods


def run_w4(rounds: int = 3) -> dict[str, float]:
    """Seconds per epoch (median of ``rounds`` after one warm-up epoch) per method."""
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_jpegs(Path(tmp))
        for name, epoch in w4_methods(paths).items():
            epoch()
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                epoch()
                times.append(time.perf_counter() - start)
            result[name] = statistics.median(times)
    return result


# ---------------------------------------------------------------------- pytest-benchmark


@pytest.fixture(scope="module")
def w5():
    return w5_methods(w5_images())


@pytest.mark.benchmark(group="W5 uint8 NHWC and NCHW 64x224x224x3")
@pytest.mark.parametrize(
    "name",
    [
        "u8_np_stack",
        "u8_np_copyto_reused",
        "u8_np_stack_out_reused",
        "u8_collator_reuse2",
        "u8_np_copyto_2buffers",
        "u8_np_stack_hold1",
        "u8_collator_reuse2_hold1",
        "u8_nchw_collator_reuse2",
        "u8_nchw_collator_flipped_reuse2",
        "u8_nchw_np_transpose_stack",
    ],
)
def test_w5_uint8(benchmark, w5, name):
    benchmark.pedantic(w5[name], rounds=30, warmup_rounds=3)


@pytest.mark.benchmark(group="W5 float32 NCHW normalize 64x224x224x3")
@pytest.mark.parametrize(
    "name", ["f32_chain_per_item", "f32_chain_per_batch", "f32_collator_fused_reuse2"]
)
def test_w5_float32(benchmark, w5, name):
    benchmark.pedantic(w5[name], rounds=10, warmup_rounds=2)


@pytest.fixture(scope="module")
def w4(tmp_path_factory):
    return w4_methods(make_jpegs(tmp_path_factory.mktemp("w4")))


@pytest.mark.benchmark(group="W4 512 JPEG 256px -> 224 float32 NCHW, batch 32")
@pytest.mark.parametrize(
    "name",
    [
        "reference_sequential",
        "ours_sequential",
        "ours_threads_2",
        "ours_loader_0w",
        "ours_loader_2w",
    ],
)
def test_w4(benchmark, w4, name):
    if name not in w4:
        pytest.skip("needs dataloader.loader")
    benchmark.pedantic(w4[name], rounds=3, warmup_rounds=1)


if __name__ == "__main__":
    which = sys.argv[1:] or ["w5", "w4"]
    report: dict[str, object] = {
        "python": sys.version.split()[0],
        "gil": getattr(sys, "_is_gil_enabled", lambda: True)(),
    }
    if "w5" in which:
        w5_ms = run_w5()
        report["w5_ms_per_batch"] = {k: round(v, 3) for k, v in w5_ms.items()}
        report["w5_ratios"] = {
            "collator_vs_copyto_limit": round(
                w5_ms["u8_np_copyto_reused"] / w5_ms["u8_collator_reuse2"], 3
            ),
            "collator_vs_np_stack": round(w5_ms["u8_np_stack"] / w5_ms["u8_collator_reuse2"], 3),
            "collator_hold1_vs_copyto_2buffers": round(
                w5_ms["u8_np_copyto_2buffers"] / w5_ms["u8_collator_reuse2_hold1"], 3
            ),
            "collator_hold1_vs_np_stack_hold1": round(
                w5_ms["u8_np_stack_hold1"] / w5_ms["u8_collator_reuse2_hold1"], 3
            ),
            "nchw_vs_nhwc_collator": round(
                w5_ms["u8_collator_reuse2"] / w5_ms["u8_nchw_collator_reuse2"], 3
            ),
            "nchw_vs_np_transpose_stack": round(
                w5_ms["u8_nchw_np_transpose_stack"] / w5_ms["u8_nchw_collator_reuse2"], 2
            ),
            "fused_vs_chain_per_item": round(
                w5_ms["f32_chain_per_item"] / w5_ms["f32_collator_fused_reuse2"], 2
            ),
            "fused_vs_chain_per_batch": round(
                w5_ms["f32_chain_per_batch"] / w5_ms["f32_collator_fused_reuse2"], 2
            ),
        }
    if "w4" in which:
        w4_s = run_w4()
        report["w4_s_per_epoch"] = {k: round(v, 4) for k, v in w4_s.items()}
    print(json.dumps(report))
