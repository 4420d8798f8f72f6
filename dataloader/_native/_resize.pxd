"""Separable resampling of HWC uint8 images, bit-exact with Pillow's ``Image.resize``.

Only the ``noexcept nogil`` API lives here.  Strides are in elements (bytes) and
may be negative.  ``filter_id``: a ``Filter`` of the ``.pyx`` (``BOX``,
``BILINEAR``, ``HAMMING``, ``BICUBIC``, ``LANCZOS``: Pillow's
convolution filters; nearest is not one of them).  ``order``:
0 horizontal pass first (Pillow < 13), 1 Pillow 13's choice.
"""

from libc.stdint cimport int32_t, uint8_t


cdef Py_ssize_t kernel_size(Py_ssize_t in_size, Py_ssize_t out_size, int filter_id) noexcept nogil

cdef void precompute(Py_ssize_t in_size, Py_ssize_t out_size, int filter_id, Py_ssize_t ksize,
                     double* work, int* bounds, int32_t* kk) noexcept nogil

cdef int resize_u8(const uint8_t* src, Py_ssize_t sy, Py_ssize_t sx, Py_ssize_t sc,
                   Py_ssize_t in_h, Py_ssize_t in_w, Py_ssize_t c,
                   uint8_t* dst, Py_ssize_t out_h, Py_ssize_t out_w,
                   int filter_id, int order) noexcept nogil
