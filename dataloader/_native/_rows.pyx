# cython: freethreading_compatible=True
"""Gather rows of a row table in memory into a caller buffer, without the GIL.

One kernel, ``gather_rows``, serves both in-memory tables of the package: the
read-only mapping of an `.ndf` file (`_gather.Reader`, cimported from here)
and a C-contiguous NumPy array (``take_rows``, behind ``ArrayDataset``).  A
gather is one ``memcpy`` per row (per run of consecutive rows when there is
no second output), with software prefetch a few rows ahead: rows of a
shuffled batch are scattered in memory, and waiting for each row's cache
misses one after the other is what a plain loop (or NumPy's fancy index)
spends most of its time on.

``take_rows`` keeps no state: concurrent calls are safe as long as their
outputs differ.  A source array written by another thread while it is read
gives torn rows (as NumPy would), never an access outside it: each index is
checked as it is loaded.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.string cimport memcpy

import numpy as np

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    bint PyDataType_REFCHK(cnp.PyArray_Descr* descr) noexcept  # items hold objects

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define DL_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 1)
    #else
    #define DL_PREFETCH(p) ((void)(p))
    #endif
    """
    void DL_PREFETCH(const void* p) noexcept nogil

# Prefetch: every cache line of the row PREFETCH_ROWS positions ahead (up to
# PREFETCH_BYTES of it; the hardware streams the rest of a long row), with
# locality hint 1 (prefetcht2 on x86: into L2/L3, tracked by the L2's queue
# rather than L1's few fill buffers).  Measured on W1 (1M x 32 float64 rows,
# batch 256, shuffled; 2-core VM, 3.11, load ~5.5), us a batch vs NumPy's
# x[idx] at 18-21 us: hint 0 (prefetchnta) and 8 rows 16.7, the first and last
# line only 16-18; hint 1: 8 rows 9.0-9.6, 16 rows 7.6-9.6; hint 2: 8.2-10.6;
# hint 3: 10.1-11.1.  4 rows ahead was no better than 8 with hint 0.
cdef enum:
    PREFETCH_ROWS = 16
    CACHE_LINE_BYTES = 64
    PREFETCH_BYTES = 1024


cdef inline void _prefetch_row(const char* src, Py_ssize_t row_bytes) noexcept nogil:
    """Prefetch every cache line of a row (of its first PREFETCH_BYTES)."""
    cdef Py_ssize_t off = 0
    cdef Py_ssize_t end = row_bytes if row_bytes < PREFETCH_BYTES else PREFETCH_BYTES
    while off < end:
        DL_PREFETCH(src + off)
        off += CACHE_LINE_BYTES
    DL_PREFETCH(src + end - 1)


cdef Py_ssize_t first_bad_index(
    const int64_t* indices, Py_ssize_t count, int64_t n
) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(count):
        # One unsigned compare catches negatives and indices >= n.
        if <unsigned long long>indices[k] >= <unsigned long long>n:
            return k
    return -1


cdef Py_ssize_t run_at(
    const int64_t* indices, Py_ssize_t k, Py_ssize_t count,
    int64_t first, int64_t n, Py_ssize_t max_run,
) noexcept nogil:
    """Length of the run first, first + 1, ... at position k, all rows < n.

    Each index is loaded once and only the locally computed row numbers are
    used afterwards, so a caller mutating `indices` concurrently can make
    the result wrong but never make a copy leave the table.
    """
    cdef Py_ssize_t run = 1
    while (k + run < count and run < max_run and first + run < n
           and indices[k + run] == first + run):
        run += 1
    return run


cdef int gather_rows(
    const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil:
    cdef Py_ssize_t k = 0, run = 1
    cdef int64_t row, ahead
    cdef const char* src
    while k < count:
        row = indices[k]
        if <unsigned long long>row >= <unsigned long long>n:
            bad[0] = k
            return GATHER_BAD_INDEX
        if k + PREFETCH_ROWS < count:
            ahead = indices[k + PREFETCH_ROWS]
            if <unsigned long long>ahead < <unsigned long long>n:
                src = data + ahead * row_bytes
                _prefetch_row(src, row_bytes)
        src = data + row * row_bytes
        if y_bytes == 0:
            # Output rows are contiguous, table rows too: one copy per run.
            run = run_at(indices, k, count, row, n, count)
            memcpy(out_x + k * x_bytes, src, run * x_bytes)
        else:
            memcpy(out_x + k * x_bytes, src, x_bytes)
            memcpy(out_y + k * y_bytes, src + x_bytes, y_bytes)
        k += run
    return 0


cdef inline bint _plain(cnp.ndarray a):
    """C-contiguous, at least 1-D, and no Python objects in its items."""
    return (cnp.PyArray_NDIM(a) >= 1 and cnp.PyArray_IS_C_CONTIGUOUS(a)
            and not PyDataType_REFCHK(cnp.PyArray_DESCR(a)))


def can_take(object source):
    """Whether ``take_rows`` can gather from ``source`` (else use NumPy's indexing)."""
    return cnp.PyArray_Check(source) and _plain(<cnp.ndarray>source)


def take_rows(cnp.ndarray source not None, cnp.ndarray indices not None, object out=None):
    """``source[indices]`` along axis 0, copied row by row with the GIL released.

    Args:
        source: C-contiguous array of shape ``(n, ...)``, any dtype without Python
            objects (see ``can_take``).
        indices: 1-D C-contiguous native int64 array of ``count`` rows; negative
            indices count from the end, as in NumPy.
        out: ``None`` (a new array is returned) or an array of shape
            ``(count,) + source.shape[1:]`` and ``source.dtype``, C-contiguous and
            writeable, not overlapping ``source``.

    Returns:
        ``out``, or the new array.

    Raises:
        IndexError: an index outside ``[-n, n)``, named (nothing is copied).
        ValueError: ``out`` has the wrong shape or dtype, is not C-contiguous or
            writeable, or overlaps ``source`` (named); ``source`` is not
            C-contiguous or holds objects.
        TypeError: ``indices`` is not a 1-D native int64 array.
    """
    if not _plain(source):
        raise ValueError("source must be a C-contiguous array of at least 1 dimension "
                         f"without Python objects, got dtype={source.dtype}")
    if (cnp.PyArray_TYPE(indices) != cnp.NPY_INT64 or cnp.PyArray_NDIM(indices) != 1
            or not cnp.PyArray_IS_C_CONTIGUOUS(indices)
            or not cnp.PyArray_ISALIGNED(indices)
            or not cnp.PyArray_ISNOTSWAPPED(indices)):
        raise TypeError("indices must be a 1-D C-contiguous native int64 array")
    cdef Py_ssize_t count = cnp.PyArray_DIM(indices, 0)
    cdef int64_t n = cnp.PyArray_DIM(source, 0)
    shape = (count,) + (<object>source).shape[1:]
    if out is None:
        out = np.empty(shape, source.dtype)
    else:
        _check_out(source, out, shape)
    cdef char* dst = <char*>cnp.PyArray_DATA(<cnp.ndarray>out)
    cdef const char* data = <const char*>cnp.PyArray_DATA(source)
    cdef Py_ssize_t row_bytes = cnp.PyArray_NBYTES(source) // n if n > 0 else 0
    cdef Py_ssize_t bad
    cdef cnp.ndarray wrapped
    with nogil:
        bad = _checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(indices),
                              count, dst)
    if bad >= 0:
        # Some index is negative or too large: count negatives from the end, as
        # NumPy does, and gather from the wrapped copy (or name the bad index).
        wrapped = <cnp.ndarray>np.where(indices < 0, indices + n, indices)
        with nogil:
            bad = _checked_gather(data, n, row_bytes,
                                  <const int64_t*>cnp.PyArray_DATA(wrapped), count, dst)
        if bad >= 0:
            raise IndexError(f"index {indices[bad]} is out of bounds for axis 0 with size {n}")
    return out


cdef Py_ssize_t _checked_gather(const char* data, int64_t n, Py_ssize_t row_bytes,
                                const int64_t* idx, Py_ssize_t count, char* dst) noexcept nogil:
    """Gather when every index is in [0, n): -1, else the position of a bad one."""
    cdef Py_ssize_t bad = first_bad_index(idx, count, n)
    if bad < 0 and gather_rows(data, n, row_bytes, idx, count, dst, row_bytes,
                               NULL, 0, &bad) == 0:
        return -1
    return bad


cdef int _check_out(cnp.ndarray source, object out, tuple shape) except -1:
    if not cnp.PyArray_Check(out):
        raise ValueError(f"out must be a NumPy array, got {type(out).__name__}")
    if (<object>out).shape != shape:
        raise ValueError(f"out has shape {(<object>out).shape}; expected {shape}")
    if (<object>out).dtype != source.dtype:
        raise ValueError(f"out has dtype {(<object>out).dtype}; expected {source.dtype}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>out):
        raise ValueError("out must be C-contiguous")
    if not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out):
        raise ValueError("out must be writeable")
    if np.may_share_memory(out, source):
        raise ValueError("out overlaps the array it gathers from")
    return 0
