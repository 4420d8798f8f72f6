# cython: freethreading_compatible=True
"""Collate a batch of images into one preallocated, C-contiguous buffer.

Each image is an ``(H, W, C)`` NumPy array of ``uint8`` or ``float32`` with any
strides (crops, flips and ``CHW`` transposes are views, and this copy is the only
one they ever get).  The ``def`` entries validate every image while attached to the
interpreter, gather raw pointers and element strides into a C array, then copy the
whole batch with the GIL released:

- ``collate_u8``: ``uint8 -> uint8``, layout ``NHWC`` (a stack) or ``NCHW``;
- ``collate_f32``: ``uint8|float32 -> float32`` computing ``x * scale[c] + bias[c]``
  per channel ``c``, which fuses ``ToFloat``, ``Normalize`` and ``ToCHW`` into the
  one copy (no intermediate array).

Nothing here imports the Python layer.  The kernels keep no state, so concurrent
calls from several threads are safe as long as their output buffers differ.
"""

cimport numpy as cnp
from libc.stdint cimport uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

import numpy as np

cnp.import_array()


ctypedef fused src_t:
    uint8_t
    float


ctypedef struct _Image:
    const char* data
    Py_ssize_t sy, sx, sc      # element strides (may be negative)
    bint is_float


# ---------------------------------------------------------------- kernels (nogil)
#
# Every kernel works row by row.  A row whose pixels are not contiguous in memory
# (a flipped or otherwise strided view) is first *staged*: the memory span it
# covers is copied forward into scratch space (when that span is small), then
# gathered into HWC order from there.  Reading a flipped row backwards straight
# from RAM defeats the hardware prefetcher and is about 6x slower than this
# (measured on the 2-core reference machine: 10.2 ms vs 1.7 ms for 64 x 224x224x3).


cdef inline const src_t* _stage(const src_t* row, Py_ssize_t sx, Py_ssize_t sc,
                                Py_ssize_t w, Py_ssize_t c,
                                src_t* span, src_t* out) noexcept nogil:
    """Return row ``row`` as ``w * c`` contiguous HWC elements (``row`` or ``out``).

    ``span`` is scratch of ``2 * w * c`` elements; ``out`` holds ``w * c``.
    """
    cdef Py_ssize_t x, k, lo, hi
    if sc == 1 and sx == c:
        return row
    lo = (sx * (w - 1) if sx < 0 else 0) + (sc * (c - 1) if sc < 0 else 0)
    hi = (sx * (w - 1) if sx > 0 else 0) + (sc * (c - 1) if sc > 0 else 0)
    if hi - lo + 1 <= 2 * w * c:
        memcpy(span, row + lo, (hi - lo + 1) * sizeof(src_t))
        row = span - lo
    if c == 3 and sc == 1 and sx == -3:
        # a horizontal flip: a constant stride lets the compiler vectorize it
        for x in range(w):
            out[3 * x] = row[-3 * x]
            out[3 * x + 1] = row[-3 * x + 1]
            out[3 * x + 2] = row[-3 * x + 2]
    elif c == 3 and sc == 1:
        for x in range(w):
            out[3 * x] = row[x * sx]
            out[3 * x + 1] = row[x * sx + 1]
            out[3 * x + 2] = row[x * sx + 2]
    else:
        for x in range(w):
            for k in range(c):
                out[x * c + k] = row[x * sx + k * sc]
    return out


cdef void copy_u8_nhwc(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                       Py_ssize_t h, Py_ssize_t w, Py_ssize_t c,
                       uint8_t* scratch, uint8_t* dst) noexcept nogil:
    cdef Py_ssize_t y
    cdef Py_ssize_t row_len = w * c
    cdef const uint8_t* row
    if sc == 1 and sx == c and sy == row_len:
        memcpy(dst, src, h * row_len)
        return
    for y in range(h):
        row = _stage(src + y * sy, sx, sc, w, c, scratch, dst + y * row_len)
        if row != dst + y * row_len:
            memcpy(dst + y * row_len, row, row_len)


cdef extern from "_planes.h":
    void dl_planes3_u8(const uint8_t* src, Py_ssize_t n,
                       uint8_t* o0, uint8_t* o1, uint8_t* o2) noexcept nogil
    void dl_planes4_u8(const uint8_t* src, Py_ssize_t n,
                       uint8_t* o0, uint8_t* o1, uint8_t* o2, uint8_t* o3) noexcept nogil


cdef inline void _planes_u8(const uint8_t* src, Py_ssize_t n, Py_ssize_t c,
                            uint8_t* dst, Py_ssize_t plane) noexcept nogil:
    """Split ``n`` contiguous ``c``-channel pixels into planes ``dst + k * plane``."""
    cdef Py_ssize_t x, k
    cdef uint8_t* o
    if c == 3:
        dl_planes3_u8(src, n, dst, dst + plane, dst + 2 * plane)
    elif c == 4:
        dl_planes4_u8(src, n, dst, dst + plane, dst + 2 * plane, dst + 3 * plane)
    else:
        for k in range(c):
            o = dst + k * plane
            for x in range(n):
                o[x] = src[x * c + k]


cdef void copy_u8_nchw(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                       Py_ssize_t h, Py_ssize_t w, Py_ssize_t c,
                       uint8_t* scratch, uint8_t* dst) noexcept nogil:
    # One channel: CHW is HWC.  A contiguous image is one run of h * w pixels
    # (four sequential streams: no blocking needed, measured at the memcpy
    # speed); any other image is split row by row from its staged (L1-resident)
    # row, so each row is read once from memory whatever its strides.
    cdef Py_ssize_t y
    cdef Py_ssize_t plane = h * w
    if c == 1:
        copy_u8_nhwc(src, sy, sx, sc, h, w, c, scratch, dst)
    elif sc == 1 and sx == c and sy == w * c:
        _planes_u8(src, plane, c, dst, plane)
    else:
        for y in range(h):
            _planes_u8(_stage(src + y * sy, sx, sc, w, c, scratch, scratch + 2 * w * c),
                       w, c, dst + y * w, plane)


cdef inline void _affine(const src_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                         Py_ssize_t h, Py_ssize_t w, Py_ssize_t c,
                         const float* scale, const float* bias, bint nchw,
                         src_t* scratch, float* tmp, float* dst) noexcept nogil:
    # Per row: stage it (see above), convert it to float into ``tmp``, then write
    # ``tmp * scale + bias``, deinterleaving channels for NCHW.  Both passes run
    # over L1-resident data and vectorize; the one-pass loop is 2x slower on SSE2
    # (deinterleaving bytes needs pshufb, which baseline x86-64 lacks).
    cdef Py_ssize_t y, x, k
    cdef Py_ssize_t plane = h * w
    cdef const src_t* row
    cdef float* o0
    cdef float* o1
    cdef float* o2
    cdef float s0 = scale[0], b0 = bias[0]
    cdef float s1 = 0, b1 = 0, s2 = 0, b2 = 0
    if c == 3:
        s1 = scale[1]
        b1 = bias[1]
        s2 = scale[2]
        b2 = bias[2]
    for y in range(h):
        row = _stage(src + y * sy, sx, sc, w, c, scratch, scratch + 2 * w * c)
        for x in range(w * c):
            tmp[x] = <float>row[x]
        if nchw:
            if c == 3:
                o0 = dst + y * w
                o1 = o0 + plane
                o2 = o1 + plane
                for x in range(w):
                    o0[x] = tmp[3 * x] * s0 + b0
                    o1[x] = tmp[3 * x + 1] * s1 + b1
                    o2[x] = tmp[3 * x + 2] * s2 + b2
            else:
                for k in range(c):
                    o0 = dst + k * plane + y * w
                    for x in range(w):
                        o0[x] = tmp[x * c + k] * scale[k] + bias[k]
        else:
            o0 = dst + y * w * c
            if c == 3:
                for x in range(w):
                    o0[3 * x] = tmp[3 * x] * s0 + b0
                    o0[3 * x + 1] = tmp[3 * x + 1] * s1 + b1
                    o0[3 * x + 2] = tmp[3 * x + 2] * s2 + b2
            else:
                for x in range(w):
                    for k in range(c):
                        o0[x * c + k] = tmp[x * c + k] * scale[k] + bias[k]


# ---------------------------------------------------------------- validation (GIL)

cdef str _shape_str(Py_ssize_t h, Py_ssize_t w, Py_ssize_t c, int ndim):
    if ndim == 2:
        return f"({h}, {w})"
    return f"({h}, {w}, {c})"


cdef list _gather(list images, _Image* info, Py_ssize_t* hwc, bint allow_float):
    """Fill ``info`` for every image; return the arrays to keep alive.

    ``hwc`` receives the shape of image 0; every other image must match it.
    """
    cdef Py_ssize_t n = len(images)
    cdef Py_ssize_t i, h, w, c, item
    cdef int ndim, ndim0 = 0, typenum, typenum0 = 0
    cdef cnp.ndarray arr
    cdef cnp.npy_intp* strides
    cdef list keep = [None] * n
    for i in range(n):
        obj = images[i]
        if not cnp.PyArray_Check(obj):
            obj = np.asarray(obj)
        arr = <cnp.ndarray>obj
        if not (<object>arr).dtype.isnative:  # '>f4' has NPY_FLOAT32 too: swap to native
            arr = (<object>arr).astype((<object>arr).dtype.newbyteorder("="))
        ndim = cnp.PyArray_NDIM(arr)
        if ndim != 2 and ndim != 3:
            raise ValueError(
                f"image {i} has shape {(<object>arr).shape}; expected (H, W, C) or (H, W)")
        typenum = cnp.PyArray_TYPE(arr)
        if i == 0:
            typenum0 = typenum
        elif typenum != typenum0:
            raise TypeError(f"image {i} has dtype {(<object>arr).dtype} but image 0 has "
                            f"dtype {(<object>keep[0]).dtype}; all images of a batch "
                            f"must have the same dtype")
        if typenum == cnp.NPY_UINT8:
            item = 1
        elif typenum == cnp.NPY_FLOAT32 and allow_float:
            item = 4
        else:
            allowed = "uint8 or float32" if allow_float else "uint8"
            raise TypeError(f"image {i} has dtype {(<object>arr).dtype}; expected {allowed}")
        strides = cnp.PyArray_STRIDES(arr)
        if item != 1 and (
            not cnp.PyArray_ISALIGNED(arr)
            or strides[0] % item != 0
            or strides[1] % item != 0
            or (ndim == 3 and strides[2] % item != 0)
        ):
            arr = np.ascontiguousarray(arr)
            strides = cnp.PyArray_STRIDES(arr)
        h = cnp.PyArray_DIM(arr, 0)
        w = cnp.PyArray_DIM(arr, 1)
        c = cnp.PyArray_DIM(arr, 2) if ndim == 3 else 1
        if i == 0:
            hwc[0] = h
            hwc[1] = w
            hwc[2] = c
            ndim0 = ndim
        elif h != hwc[0] or w != hwc[1] or c != hwc[2] or ndim != ndim0:
            raise ValueError(
                f"image {i} has shape {_shape_str(h, w, c, ndim)} but image 0 has shape "
                f"{_shape_str(hwc[0], hwc[1], hwc[2], ndim0)}; all images of a batch must "
                f"have the same shape (resize, crop or pad them first)")
        info[i].data = <const char*>cnp.PyArray_DATA(arr)
        info[i].sy = strides[0] // item
        info[i].sx = strides[1] // item
        # 2-D: one channel, whose stride is never used (1 lets contiguous images take memcpy)
        info[i].sc = (strides[2] // item) if ndim == 3 else 1
        info[i].is_float = item == 4
        keep[i] = arr
    return keep


cdef inline size_t _scratch_bytes(Py_ssize_t w, Py_ssize_t c) noexcept:
    # span (2 w c) + staged row (w c) + float row (w c), in elements of <= 4 bytes
    return <size_t>(4 * w * c * 4 + 64)


cdef int _check_out(tuple out_shape, Py_ssize_t n, Py_ssize_t* hwc, bint nchw) except -1:
    expected = (n, hwc[2], hwc[0], hwc[1]) if nchw else (n, hwc[0], hwc[1], hwc[2])
    if out_shape != expected:
        raise ValueError(f"out has shape {out_shape}; expected {expected}")
    return 0


ctypedef fused dst_t:
    uint8_t
    float


cdef int _collate(list images, dst_t[:, :, :, ::1] out, bint nchw,
                  const float[::1] scale, const float[::1] bias) except -1:
    """Validate ``images`` against ``out``, then copy them all with the GIL released.

    ``uint8`` output: a plain copy (``scale`` / ``bias`` unused, may be None); ``float32``
    output: ``x * scale[c] + bias[c]`` from ``uint8`` or ``float32`` images.
    """
    cdef Py_ssize_t n = len(images)
    cdef Py_ssize_t hwc[3]
    cdef Py_ssize_t i, size, row
    cdef _Image* info
    cdef void* scratch = NULL
    cdef dst_t* dst
    if n == 0:
        raise ValueError("cannot collate an empty batch")
    info = <_Image*>malloc(n * sizeof(_Image))
    if info == NULL:
        raise MemoryError()
    try:
        keep = _gather(images, info, hwc, dst_t is float)
        _check_out((out.shape[0], out.shape[1], out.shape[2], out.shape[3]), n, hwc, nchw)
        if dst_t is float:
            if scale.shape[0] != hwc[2] or bias.shape[0] != hwc[2]:
                raise ValueError(
                    f"scale has {scale.shape[0]} and bias {bias.shape[0]} entries; "
                    f"expected one per channel ({hwc[2]})")
        size = hwc[0] * hwc[1] * hwc[2]
        if size == 0:  # empty images: nothing to copy (and no row to stage)
            return 0
        scratch = malloc(_scratch_bytes(hwc[1], hwc[2]))
        if scratch == NULL:
            raise MemoryError()
        dst = &out[0, 0, 0, 0]
        row = hwc[1] * hwc[2]
        with nogil:
            for i in range(n):
                if dst_t is uint8_t:
                    (copy_u8_nchw if nchw else copy_u8_nhwc)(
                        <const uint8_t*>info[i].data, info[i].sy, info[i].sx, info[i].sc,
                        hwc[0], hwc[1], hwc[2], <uint8_t*>scratch, dst + i * size)
                elif info[i].is_float:  # scratch: staged source row, then the float row
                    _affine(<const float*>info[i].data, info[i].sy, info[i].sx, info[i].sc,
                            hwc[0], hwc[1], hwc[2], &scale[0], &bias[0], nchw,
                            <float*>scratch, <float*>scratch + 3 * row, dst + i * size)
                else:
                    _affine(<const uint8_t*>info[i].data, info[i].sy, info[i].sx, info[i].sc,
                            hwc[0], hwc[1], hwc[2], &scale[0], &bias[0], nchw,
                            <uint8_t*>scratch, <float*>scratch + 3 * row, dst + i * size)
        del keep
    finally:
        free(scratch)
        free(info)
    return 0


def collate_u8(list images, uint8_t[:, :, :, ::1] out, bint nchw):
    """Copy ``uint8`` images (any strides) into ``out``; see the module docstring.

    Raises:
        ValueError: an image is not 2-D/3-D, shapes differ, or ``out`` has the
            wrong shape.
        TypeError: an image is not ``uint8``.
    """
    _collate[uint8_t](images, out, nchw, None, None)


def collate_f32(list images, float[:, :, :, ::1] out, bint nchw,
                const float[::1] scale, const float[::1] bias):
    """Write ``image * scale[c] + bias[c]`` (``uint8`` or ``float32`` images) into ``out``.

    ``scale`` and ``bias`` have one entry per channel.

    Raises:
        ValueError: as ``collate_u8``, or ``scale``/``bias`` do not have C entries.
        TypeError: an image is neither ``uint8`` nor ``float32``.
    """
    _collate[float](images, out, nchw, scale, bias)
