# cython: freethreading_compatible=True
"""Resize ``(H, W, C)`` ``uint8`` images without the GIL, bit-exact with Pillow.

The algorithm is Pillow's separable convolution resampling (``Image.resize`` with
the box, bilinear, hamming, bicubic or lanczos filter, no ``box``/``reducing_gap``):

- per output column (then row), the filter, widened by the downscaling factor,
  is sampled around the source position ``(i + 0.5) * in / out`` over the source
  pixels it covers, normalised to sum 1, and rounded to fixed point with
  ``PRECISION_BITS`` fractional bits;
- a horizontal pass writes the source rows the vertical filter needs into a
  temporary image, then a vertical pass writes the output; each sum starts at
  one half (rounding) and is shifted back and clamped to [0, 255].

Being an independent implementation of the same arithmetic, it produces the
same pixels as Pillow for 1- and 3-channel images (tests compare them), while
reading any strided view (a crop is free), handling any channel count, never
converting to Pillow's 4-bytes-per-pixel layout, and running with the GIL
released.  Pillow premultiplies alpha for LA/RGBA images; this does not.
"""

from libc.math cimport M_PI, ceil, cos, sin
from libc.stdint cimport int32_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy

cdef enum:
    # 8 bits of result and 2 bits of headroom (negative filter lobes) in an int32
    PRECISION_BITS = 32 - 8 - 2
    N_FILTERS = 5


cpdef enum Filter:
    # Pillow's convolution filters (nearest is not one of them); the filter_id of resize()
    BOX = 0
    BILINEAR = 1
    HAMMING = 2
    BICUBIC = 3
    LANCZOS = 4


cdef enum:
    # which pass runs first, as the Pillow version of that name (see _horizontal_first)
    _PILLOW_12 = 0
    _PILLOW_13 = 1

ORDER_PILLOW_12 = _PILLOW_12
ORDER_PILLOW_13 = _PILLOW_13


# ---------------------------------------------------------------- filters (nogil)

cdef inline double _support(int filter_id) noexcept nogil:
    if filter_id == BOX:
        return 0.5
    if filter_id == BICUBIC:
        return 2.0
    if filter_id == LANCZOS:
        return 3.0
    return 1.0


cdef inline double _sinc(double x) noexcept nogil:
    if x == 0.0:
        return 1.0
    x = x * M_PI
    return sin(x) / x


cdef inline double _filter(int filter_id, double x) noexcept nogil:
    if filter_id == BOX:
        return 1.0 if -0.5 < x <= 0.5 else 0.0
    if filter_id == LANCZOS:  # sinc windowed by sinc(x / 3)
        return _sinc(x) * _sinc(x / 3) if -3.0 <= x < 3.0 else 0.0
    if x < 0.0:
        x = -x
    if filter_id == BILINEAR:  # a triangle
        return 1.0 - x if x < 1.0 else 0.0
    if filter_id == HAMMING:  # windowed sinc; Pillow's window constants are floats
        if x == 0.0:
            return 1.0
        if x >= 1.0:
            return 0.0
        x = x * M_PI
        return sin(x) / x * (<double>(<float>0.54) + <double>(<float>0.46) * cos(x))
    # BICUBIC (Keys, a = -0.5)
    if x < 1.0:
        return (1.5 * x - 2.5) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * -0.5
    return 0.0


cdef inline uint8_t _clip8(int32_t v) noexcept nogil:
    v = v >> PRECISION_BITS
    if v < 0:
        return 0
    if v > 255:
        return 255
    return <uint8_t>v


# ---------------------------------------------------------------- coefficients

cdef Py_ssize_t kernel_size(Py_ssize_t in_size, Py_ssize_t out_size, int filter_id) noexcept nogil:
    """Taps per output pixel (the width of the widened filter, both sides)."""
    cdef double scale = <double>in_size / out_size
    if scale < 1.0:
        scale = 1.0
    return <Py_ssize_t>ceil(_support(filter_id) * scale) * 2 + 1


cdef void precompute(Py_ssize_t in_size, Py_ssize_t out_size, int filter_id, Py_ssize_t ksize,
                     double* work, int* bounds, int32_t* kk) noexcept nogil:
    """Fill ``bounds`` (first tap, tap count per output) and fixed-point ``kk``."""
    cdef double scale = <double>in_size / out_size
    cdef double filterscale = scale if scale >= 1.0 else 1.0
    cdef double support = _support(filter_id) * filterscale
    cdef double inv = 1.0 / filterscale
    cdef double center, total, v
    cdef int xx, x, first, count
    cdef int32_t* k
    for xx in range(out_size):
        center = (xx + 0.5) * scale
        first = <int>(center - support + 0.5)
        if first < 0:
            first = 0
        count = <int>(center + support + 0.5)
        if count > in_size:
            count = <int>in_size
        count -= first
        total = 0.0
        for x in range(count):
            work[x] = _filter(filter_id, (x + first - center + 0.5) * inv)
            total += work[x]
        k = kk + xx * ksize
        for x in range(ksize):
            v = 0.0
            if x < count:
                v = work[x] / total if total != 0.0 else work[x]
            if v < 0:
                k[x] = <int32_t>(-0.5 + v * (1 << PRECISION_BITS))
            else:
                k[x] = <int32_t>(0.5 + v * (1 << PRECISION_BITS))
        bounds[2 * xx] = first
        bounds[2 * xx + 1] = count


# ---------------------------------------------------------------- passes (nogil)

cdef void _horizontal(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                      Py_ssize_t row0, Py_ssize_t rows, Py_ssize_t c,
                      uint8_t* tmp, Py_ssize_t out_w, Py_ssize_t ksize,
                      const int* bounds, const int32_t* kk) noexcept nogil:
    cdef Py_ssize_t y, xx, x, ch
    cdef const uint8_t* p
    cdef const int32_t* k
    cdef uint8_t* o
    cdef int32_t s0, s1, s2
    cdef int32_t half = 1 << (PRECISION_BITS - 1)
    for y in range(rows):
        o = tmp + y * out_w * c
        for xx in range(out_w):
            p = src + (row0 + y) * sy + bounds[2 * xx] * sx
            k = kk + xx * ksize
            if c == 3 and sx == 3 and sc == 1:  # contiguous pixels: constant strides
                s0 = s1 = s2 = half
                for x in range(bounds[2 * xx + 1]):
                    s0 += p[3 * x] * k[x]
                    s1 += p[3 * x + 1] * k[x]
                    s2 += p[3 * x + 2] * k[x]
                o[3 * xx] = _clip8(s0)
                o[3 * xx + 1] = _clip8(s1)
                o[3 * xx + 2] = _clip8(s2)
            elif c == 3:
                s0 = s1 = s2 = half
                for x in range(bounds[2 * xx + 1]):
                    s0 += p[x * sx] * k[x]
                    s1 += p[x * sx + sc] * k[x]
                    s2 += p[x * sx + 2 * sc] * k[x]
                o[3 * xx] = _clip8(s0)
                o[3 * xx + 1] = _clip8(s1)
                o[3 * xx + 2] = _clip8(s2)
            else:
                for ch in range(c):
                    s0 = half
                    for x in range(bounds[2 * xx + 1]):
                        s0 += p[x * sx + ch * sc] * k[x]
                    o[xx * c + ch] = _clip8(s0)


cdef void _vertical(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                    Py_ssize_t w, Py_ssize_t c, uint8_t* dst, Py_ssize_t out_h,
                    Py_ssize_t ksize, const int* bounds, const int32_t* kk,
                    int32_t* acc) noexcept nogil:
    # Accumulates whole rows (integer sums, so the order does not change them)
    # so that the inner loop is contiguous and vectorizes.
    cdef Py_ssize_t yy, y, i, x, ch, n = w * c
    cdef const uint8_t* row
    cdef int32_t kv
    cdef int32_t half = 1 << (PRECISION_BITS - 1)
    cdef bint contiguous = sc == 1 and sx == c
    for yy in range(out_h):
        for i in range(n):
            acc[i] = half
        for y in range(bounds[2 * yy + 1]):
            row = src + (bounds[2 * yy] + y) * sy
            kv = kk[yy * ksize + y]
            if contiguous:
                for i in range(n):
                    acc[i] += row[i] * kv
            else:
                for x in range(w):
                    for ch in range(c):
                        acc[x * c + ch] += row[x * sx + ch * sc] * kv
        for i in range(n):
            dst[yy * n + i] = _clip8(acc[i])


cdef void _copy(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                Py_ssize_t h, Py_ssize_t w, Py_ssize_t c, uint8_t* dst) noexcept nogil:
    cdef Py_ssize_t y, x, ch
    for y in range(h):
        if sc == 1 and sx == c:
            memcpy(dst + y * w * c, src + y * sy, w * c)
        else:
            for x in range(w):
                for ch in range(c):
                    dst[(y * w + x) * c + ch] = src[y * sy + x * sx + ch * sc]


cdef int resize_u8(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                   Py_ssize_t in_h, Py_ssize_t in_w, Py_ssize_t c,
                   uint8_t* dst, Py_ssize_t out_h, Py_ssize_t out_w,
                   int filter_id, int order) noexcept nogil:
    """Resize ``src`` into C-contiguous ``dst``; 0 on success, -1 when out of memory."""
    cdef Py_ssize_t kh = kernel_size(in_w, out_w, filter_id)
    cdef Py_ssize_t kv = kernel_size(in_h, out_h, filter_id)
    cdef int status = -1
    cdef double* work = <double*>malloc((kh if kh > kv else kv) * sizeof(double))
    cdef int* bounds_h = <int*>malloc(2 * out_w * sizeof(int))
    cdef int* bounds_v = <int*>malloc(2 * out_h * sizeof(int))
    cdef int32_t* kk_h = <int32_t*>malloc(out_w * kh * sizeof(int32_t))
    cdef int32_t* kk_v = <int32_t*>malloc(out_h * kv * sizeof(int32_t))
    # one row of sums for the vertical pass, which may run over the input width
    cdef int32_t* acc = <int32_t*>malloc((in_w if in_w > out_w else out_w) * c * sizeof(int32_t))
    if not (work == NULL or bounds_h == NULL or bounds_v == NULL or kk_h == NULL
            or kk_v == NULL or acc == NULL):
        status = _resize(src, sy, sx, sc, in_h, in_w, c, dst, out_h, out_w, filter_id,
                         _horizontal_first(in_h, in_w, out_h, out_w, order),
                         kh, kv, work, bounds_h, bounds_v, kk_h, kk_v, acc)
    free(acc)
    free(kk_v)
    free(kk_h)
    free(bounds_v)
    free(bounds_h)
    free(work)
    return status


cdef inline bint _horizontal_first(Py_ssize_t in_h, Py_ssize_t in_w, Py_ssize_t out_h,
                                   Py_ssize_t out_w, int order) noexcept nogil:
    # Pillow < 13 always runs the horizontal pass first; Pillow 13 runs the
    # vertical one first when the height shrinks by more than twice as many pixels
    # as the width.  The order changes the rounding of the intermediate image.
    if order == _PILLOW_12:
        return True
    return not (in_h - out_h > 0 and in_h - out_h > (in_w - out_w) * 2)


cdef int _resize(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                 Py_ssize_t in_h, Py_ssize_t in_w, Py_ssize_t c,
                 uint8_t* dst, Py_ssize_t out_h, Py_ssize_t out_w, int filter_id,
                 bint h_first, Py_ssize_t kh, Py_ssize_t kv, double* work, int* bounds_h,
                 int* bounds_v, int32_t* kk_h, int32_t* kk_v, int32_t* acc) noexcept nogil:
    cdef bint need_h = out_w != in_w
    cdef bint need_v = out_h != in_h
    cdef Py_ssize_t row0, rows, i
    cdef uint8_t* tmp
    if not need_h and not need_v:
        _copy(src, sy, sx, sc, in_h, in_w, c, dst)
        return 0
    precompute(in_h, out_h, filter_id, kv, work, bounds_v, kk_v)
    if not need_h:
        _vertical(src, sy, sx, sc, in_w, c, dst, out_h, kv, bounds_v, kk_v, acc)
        return 0
    precompute(in_w, out_w, filter_id, kh, work, bounds_h, kk_h)
    if not need_v:  # then the vertical bounds cover exactly the in_h == out_h rows
        _horizontal(src, sy, sx, sc, 0, in_h, c, dst, out_w, kh, bounds_h, kk_h)
        return 0
    if not h_first:
        tmp = <uint8_t*>malloc(out_h * in_w * c + 1)
        if tmp == NULL:
            return -1
        _vertical(src, sy, sx, sc, in_w, c, tmp, out_h, kv, bounds_v, kk_v, acc)
        _horizontal(tmp, in_w * c, c, 1, 0, out_h, c, dst, out_w, kh, bounds_h, kk_h)
        free(tmp)
        return 0
    # only the source rows the vertical pass reads go through the horizontal pass
    row0 = bounds_v[0]
    rows = bounds_v[2 * out_h - 2] + bounds_v[2 * out_h - 1] - row0
    for i in range(out_h):
        bounds_v[2 * i] -= <int>row0
    tmp = <uint8_t*>malloc(rows * out_w * c + 1)
    if tmp == NULL:
        return -1
    _horizontal(src, sy, sx, sc, row0, rows, c, tmp, out_w, kh, bounds_h, kk_h)
    _vertical(tmp, out_w * c, c, 1, out_w, c, dst, out_h, kv, bounds_v, kk_v, acc)
    free(tmp)
    return 0


# ---------------------------------------------------------------- entry (GIL)

def resize(const uint8_t[:, :, :] src, uint8_t[:, :, ::1] out, int filter_id,
           int order=_PILLOW_13):
    """Resize ``src`` ((H, W, C) uint8, any strides) into ``out`` ((h, w, C), C-contiguous).

    ``filter_id`` is a :class:`Filter` (``Filter.BOX`` ... ``Filter.LANCZOS``).

    ``order`` picks the pass order of that Pillow version, which the result then
    matches bit for bit.

    Raises:
        ValueError: unknown ``filter_id``, empty image, or channel counts differ.
        MemoryError: scratch space could not be allocated.
    """
    cdef int status
    if not 0 <= filter_id < N_FILTERS:
        raise ValueError(f"{filter_id=} must be in [0, {N_FILTERS})")
    if order != _PILLOW_12 and order != _PILLOW_13:
        raise ValueError(f"{order=} must be ORDER_PILLOW_12 or ORDER_PILLOW_13")
    if src.shape[0] < 1 or src.shape[1] < 1 or out.shape[0] < 1 or out.shape[1] < 1:
        raise ValueError(f"cannot resize from ({src.shape[0]}, {src.shape[1]}) "
                         f"to ({out.shape[0]}, {out.shape[1]})")
    if src.shape[2] != out.shape[2] or src.shape[2] < 1:
        raise ValueError(f"src has {src.shape[2]} channels and out {out.shape[2]}")
    with nogil:
        status = resize_u8(&src[0, 0, 0], src.strides[0], src.strides[1], src.strides[2],
                           src.shape[0], src.shape[1], src.shape[2],
                           &out[0, 0, 0], out.shape[0], out.shape[1], filter_id, order)
    if status != 0:
        raise MemoryError("cannot allocate resize scratch space")
