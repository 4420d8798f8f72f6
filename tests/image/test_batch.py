"""ImageBatch: zero-copy views, DLPack, and the lifetime of pooled buffers."""

from __future__ import annotations

import copy
import gc
import pickle
import textwrap
import threading

import numpy as np
import pytest
from tests._support import run_python, run_threads

from dataloader.image import ImageBatch, ImageCollator


def items(value, n=4, shape=(8, 6, 3)):
    return [np.full(shape, (value + i) % 256, np.uint8) for i in range(n)]


def address(batch_or_array):
    return batch_or_array.__array_interface__["data"][0]


def test_array_interface_view_keeps_batch_alive():
    batch = ImageCollator("NHWC")(items(1))
    view = np.asarray(batch)
    assert view.base is batch
    assert view.flags.c_contiguous and view.flags.writeable
    assert address(view) == address(batch)
    view[0, 0, 0, 0] = 99
    assert np.asarray(batch)[0, 0, 0, 0] == 99
    assert batch.numpy()[0, 0, 0, 0] == 99
    assert len(batch) == 4 and batch.shape == (4, 8, 6, 3) and batch.dtype == np.uint8
    assert "shape=(4, 8, 6, 3)" in repr(batch)


def test_numpy_from_dlpack_shares_memory():
    batch = ImageCollator("NCHW", np.float32)(items(2))
    shared = np.from_dlpack(batch)
    assert shared.shape == (4, 3, 8, 6) and shared.dtype == np.float32
    assert address(shared) == address(batch)
    shared[1, 2, 3, 4] = -1.0
    assert np.asarray(batch)[1, 2, 3, 4] == -1.0
    assert batch.__dlpack_device__() == (1, 0)


def test_torch_from_dlpack_shares_memory():
    torch = pytest.importorskip("torch")
    collator = ImageCollator("NCHW", np.float32, reuse_buffers=1)
    batch = collator(items(3))
    tensor = torch.from_dlpack(batch)
    assert tuple(tensor.shape) == (4, 3, 8, 6) and tensor.dtype == torch.float32
    kept = address(batch)
    assert tensor.data_ptr() == kept
    tensor[0, 0, 0, 0] = 42.0
    assert np.asarray(batch)[0, 0, 0, 0] == 42.0
    del batch
    gc.collect()
    assert collator._pool.idle() == 0  # the tensor keeps the buffer
    other = collator(items(4))
    assert address(other) != kept and tensor[0, 0, 0, 0].item() == 42.0
    del tensor
    gc.collect()
    assert collator._pool.idle() == 1


def test_buffer_returns_to_pool_only_when_every_view_is_gone():
    collator = ImageCollator("NHWC", reuse_buffers=1)
    batch = collator(items(0))
    first = address(batch)
    view_of_view = np.asarray(batch)[1:, ::2]
    dl = np.from_dlpack(batch)
    del batch
    gc.collect()
    assert collator._pool.idle() == 0
    other = collator(items(50))
    assert address(other) != first
    del other
    gc.collect()
    del view_of_view
    gc.collect()
    assert collator._pool.idle() == 1  # `other`'s buffer; `dl` still holds the first
    del dl
    gc.collect()
    assert collator._pool.idle() == 1  # capacity 1: one of the two is kept
    again = collator(items(7))
    assert address(again) in (first, address(again))
    np.testing.assert_array_equal(np.asarray(again), np.stack(items(7)))


def test_held_batches_keep_their_values_across_50_later_batches():
    collator = ImageCollator("NHWC", reuse_buffers=2)
    held = collator(items(10))
    held_view = np.asarray(collator(items(20)))  # only a view of this one survives
    expected_held, expected_view = np.stack(items(10)), np.stack(items(20))
    seen = set()
    for k in range(50):
        batch = collator(items(100 + k))
        np.testing.assert_array_equal(np.asarray(batch), np.stack(items(100 + k)))
        seen.add(address(batch))
        del batch
    np.testing.assert_array_equal(np.asarray(held), expected_held)
    np.testing.assert_array_equal(held_view, expected_view)
    assert address(held) not in seen and address(held_view) not in seen
    assert collator.allocations <= 4  # 2 held + the reused ones, not 52


def test_taking_a_buffer_never_waits():
    collator = ImageCollator("NHWC", reuse_buffers=2)
    held = [collator(items(i)) for i in range(10)]
    assert len({address(b) for b in held}) == 10
    assert collator.allocations == 10
    for i, batch in enumerate(held):
        np.testing.assert_array_equal(np.asarray(batch), np.stack(items(i)))
    del held, batch
    gc.collect()
    assert collator._pool.idle() == 2


def test_smaller_batch_reuses_a_larger_buffer():
    collator = ImageCollator("NHWC", reuse_buffers=1)
    big = collator(items(0, n=8))
    big_address = address(big)
    del big
    small = collator(items(1, n=3))
    assert address(small) == big_address and small.shape == (3, 8, 6, 3)
    np.testing.assert_array_equal(np.asarray(small), np.stack(items(1, n=3)))
    assert collator.allocations == 1


def test_no_reuse_by_default():
    collator = ImageCollator()
    assert collator.allocations is None and collator._pool is None
    assert isinstance(collator(items(0)), ImageBatch)


def test_finalizer_on_a_thread_that_holds_the_pool_lock_does_not_deadlock():
    collator = ImageCollator("NHWC", reuse_buffers=2)
    batch = collator(items(0))
    with collator._pool._lock:  # e.g. the GC ran a finalizer inside take()
        del batch
    assert collator._pool.idle() == 1


@pytest.mark.timeout(20)
def test_finalizer_gives_up_on_a_lock_held_forever(monkeypatch):
    import dataloader.image.batch as batch_module

    monkeypatch.setattr(batch_module, "BUFFER_RETURN_TIMEOUT_S", 0.05)
    collator = ImageCollator("NHWC", reuse_buffers=2)
    made, locked = threading.Event(), threading.Event()

    def make_and_drop():
        # created and dropped on this thread: on free-threaded builds an object
        # dropped by another thread than its creator is freed later, by its creator
        batch = collator(items(0))
        made.set()
        locked.wait(10)
        del batch

    dropper = threading.Thread(target=make_and_drop)
    dropper.start()
    made.wait(10)
    with collator._pool._lock:
        locked.set()
        dropper.join(10)
        assert not dropper.is_alive()
    assert collator._pool.idle() == 0  # freed, not pooled


@pytest.mark.timeout(60)
def test_interpreter_exit_with_a_frozen_lock_holder_does_not_hang():
    script = textwrap.dedent("""
        import threading, numpy as np
        from dataloader.image import ImageCollator
        collator = ImageCollator("NHWC", reuse_buffers=2)
        held = [collator([np.zeros((4, 4, 3), np.uint8)]) for _ in range(3)]
        locked = threading.Event()
        def hold_forever():
            collator._pool._lock.acquire()
            locked.set()
            threading.Event().wait()
        threading.Thread(target=hold_forever, daemon=True).start()
        locked.wait()
        print("exiting")
    """)
    result = run_python("-c", script, timeout=50)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "exiting"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_concurrent_collation_from_4_threads(dtype):
    collator = ImageCollator("NCHW", dtype, reuse_buffers=2)
    start = threading.Barrier(4)

    def work(tid):
        try:
            start.wait()
            held = []
            for k in range(40):
                value = tid * 50 + k
                batch, labels = collator([(x, value) for x in items(value, n=6, shape=(16, 12, 3))])
                expected = np.stack(items(value, n=6, shape=(16, 12, 3))).transpose(0, 3, 1, 2)
                if dtype == np.float32:
                    expected = expected / np.float32(255)
                np.testing.assert_allclose(np.asarray(batch), expected, rtol=1e-6)
                np.testing.assert_array_equal(labels, [value] * 6)
                assert batch.labels is labels
                if k % 10 == 0:
                    held.append((batch, expected))
            for batch, expected in held:  # not overwritten by the other threads
                np.testing.assert_allclose(np.asarray(batch), expected, rtol=1e-6)
        except Exception as e:  # carried to the main thread
            errors.append(e)

    errors = run_threads(work, 4)
    assert errors == []
    gc.collect()
    assert collator._pool.idle() <= 2


@pytest.mark.timeout(120)
@pytest.mark.parametrize("reuse", [0, 1])
def test_deepcopy_of_batch_outlives_original(reuse: int) -> None:
    # The copy owns its pixels: it never points into the original's (reused) buffer.
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
    proc = run_python("-c", code)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])


def test_pickled_batch_owns_its_pixels() -> None:
    b = ImageCollator(reuse_buffers=1)([np.full((4, 5, 3), 3, np.uint8)] * 2)
    p = pickle.loads(pickle.dumps(b))
    assert p._buffer.address == p._buffer.array.__array_interface__["data"][0]
    assert p._buffer.address != b._buffer.address
    assert (np.asarray(p) == 3).all() and np.asarray(p).shape == (2, 3, 4, 5)


@pytest.mark.timeout(60)
def test_held_views_survive_reuse_across_threads() -> None:
    # A view held while 100 more batches reuse the pool is never overwritten.
    col = ImageCollator(reuse_buffers=1)
    first = col([np.full((16, 16, 3), 7, np.uint8)] * 4)
    views = [np.asarray(first), np.from_dlpack(first), np.asarray(first)[1:, 0]]
    del first
    gc.collect()

    def churn(tid: int) -> None:
        for k in range(100):
            b = col([np.full((16, 16, 3), (tid + k) % 200 + 20, np.uint8)] * 4)
            assert (np.asarray(b) == (tid + k) % 200 + 20).all()

    assert run_threads(churn, 4) == []
    assert all((v == 7).all() for v in views)
    assert copy.copy(views[0]).shape == (4, 3, 16, 16)
