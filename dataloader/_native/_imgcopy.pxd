"""Image collation kernels: one copy of an HWC image into a batch buffer.

Only the ``noexcept nogil`` API lives here; the float kernel (``_affine``: uint8 or
float32 in, float32 out) is a fused ``inline`` function of the ``.pyx``.  ``scratch`` is
caller-owned space of at least ``16 * w * c`` bytes (one row, staged and converted).  Strides
are in elements of the source type (they may be negative, e.g. a horizontally flipped view).
"""

from libc.stdint cimport uint8_t


cdef void copy_u8_nhwc(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                       Py_ssize_t h, Py_ssize_t w, Py_ssize_t c,
                       uint8_t* scratch, uint8_t* dst) noexcept nogil

cdef void copy_u8_nchw(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                       Py_ssize_t h, Py_ssize_t w, Py_ssize_t c,
                       uint8_t* scratch, uint8_t* dst) noexcept nogil
