# cython: freethreading_compatible=True
"""Row-copy kernels: from memory (an `.ndf` mapping, a NumPy array) or with preadv, no GIL.

Two ways to reach the rows of an `.ndf` file (``dataloader._native._gather.Reader``
picks one), and the same in-memory kernel for NumPy arrays (``take_rows``, which
``ArrayDataset`` gathers C-contiguous columns with):

* mapped: one ``memcpy`` per row (per run of consecutive rows when there are
  no labels) from a read-only mapping, with software prefetch of the rows 32
  positions ahead: rows of a shuffled batch are scattered in memory, and
  waiting for each row's cache misses in turn is what a plain loop (or
  NumPy's fancy index) spends most of its time on.  No system call per row, so a page-cached file is gathered at memory
  speed.  The copy runs inside ``dl_bus_guarded`` (``_bus_guard.h``): a
  SIGBUS from the mapping (the file was truncated while mapped) becomes the
  status ``GATHER_FAULT``; a SIGBUS anywhere else reaches the handler
  installed before ours (faulthandler's, or the default action), as without
  us.  Cost: one ``sigsetjmp`` without the signal mask (no system call) per
  gather.  Rows between a truncated file's new end and the end of its page
  read as zeros (the kernel zero-fills that page).
* ``preadv``: one system call per run of consecutive indices.  A single row
  is scattered into the two outputs by one ``preadv`` (2 iovecs); a run is
  read whole, in place when there are no labels, otherwise into a 64 KiB
  bounce buffer and split (a preadv with 2 iovecs per row was measured ~2x
  slower for runs).  Detects every truncation (``GATHER_EOF``).

``take_rows`` of an array whose memory maps a file (a ``numpy.memmap``, an array over an
``mmap.mmap``: ``mapped_array``) runs under the same SIGBUS guard: a file truncated while
mapped fails the gather with ``OSError`` naming it (``mapped_fault``), where NumPy's own
indexing ends the process.  ``take_rows`` keeps no state: concurrent calls are safe as long
as their outputs differ.  A source array written by another thread while it is read gives torn
rows (as NumPy would), never an access outside it: each index is checked as it is
loaded.
"""

cimport numpy as cnp
from cpython.object cimport PyObject
from libc.errno cimport EINTR, EIO, ENOMEM, errno
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from posix.uio cimport iovec, preadv

import mmap
import os

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


cdef extern from "_bus_guard.h":
    int dl_bus_install() noexcept nogil
    int dl_bus_guarded(const char* lo, const char* hi, int (*fn)(void*) noexcept nogil,
                       void* arg, int fault) noexcept nogil


# The arguments of one gather_mapped call, for dl_bus_guarded's callback.
cdef struct _MappedGather:
    const char* data
    int64_t n
    Py_ssize_t row_bytes
    const int64_t* indices
    Py_ssize_t count
    char* out_x
    Py_ssize_t x_bytes
    char* out_y
    Py_ssize_t y_bytes
    Py_ssize_t* bad


cdef int _call_gather_mapped(void* arg) noexcept nogil:
    cdef _MappedGather* a = <_MappedGather*>arg
    return gather_mapped(a.data, a.n, a.row_bytes, a.indices, a.count,
                         a.out_x, a.x_bytes, a.out_y, a.y_bytes, a.bad)

# gather_mapped's prefetch: every cache line of the row PREFETCH_ROWS positions ahead (up to
# PREFETCH_BYTES of it; the hardware streams the rest of a long row), with
# locality hint 1 (prefetcht2 on x86: into L2/L3, tracked by the L2's queue
# rather than L1's few fill buffers).  Measured on W1 (1M x 32 float64 rows,
# batch 256, shuffled; 2-core VM, 3.11, load ~5.5), us a batch vs NumPy's
# x[idx] at 18-21 us: hint 0 (prefetchnta) and 8 rows 16.7, the first and last
# line only 16-18; hint 1: 8 rows 9.0-9.6, 16 rows 7.6-9.6; hint 2: 8.2-10.6;
# hint 3: 10.1-11.1.  4 rows ahead was no better than 8 with hint 0.  Later (3.13t, load
# 5-7, 6 interleaved pairs): 32 rows ahead, the first 32 prefetched before the loop,
# 10.0-10.4 against 16 rows' 10.4-10.9; 64 rows no better than 32.
cdef enum:
    PREFETCH_ROWS = 32
    CACHE_LINE_BYTES = 64
    PREFETCH_BYTES = 1024
    # Bounce buffer for runs of consecutive rows with labels (bytes): one
    # read per run of up to this size, then x and y are split by memcpy.
    BOUNCE_BYTES = 1 << 16
    # Largest single run read by one preadv when there are no labels (bytes).
    MAX_RUN_BYTES = 1 << 30

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


cdef inline Py_ssize_t _run_at(
    const int64_t* indices, Py_ssize_t k, Py_ssize_t count,
    int64_t first, int64_t n, Py_ssize_t max_run,
) noexcept nogil:
    """Length of the run first, first + 1, ... at position k, all rows < n.

    Each index is loaded once and only the locally computed row numbers are
    used afterwards, so a caller mutating `indices` concurrently can make
    the result wrong but never make a read leave the file.
    """
    cdef Py_ssize_t run = 1
    while (k + run < count and run < max_run and first + run < n
           and indices[k + run] == first + run):
        run += 1
    return run


cdef int gather_mapped(
    const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil:
    cdef Py_ssize_t k = 0, run = 1
    cdef int64_t row, ahead
    cdef const char* src
    for k in range(PREFETCH_ROWS if PREFETCH_ROWS < count else count):
        ahead = indices[k]  # the rows the loop below does not prefetch
        if <unsigned long long>ahead < <unsigned long long>n:
            _prefetch_row(data + ahead * row_bytes, row_bytes)
    k = 0
    while k < count:
        row = indices[k]
        if <unsigned long long>row >= <unsigned long long>n:
            bad[0] = k
            return GATHER_BAD_INDEX
        if k + PREFETCH_ROWS < count:
            ahead = indices[k + PREFETCH_ROWS]
            if <unsigned long long>ahead < <unsigned long long>n:
                _prefetch_row(data + ahead * row_bytes, row_bytes)
        src = data + row * row_bytes
        if y_bytes == 0:
            # Output rows are contiguous, table rows too: one copy per run.
            run = _run_at(indices, k, count, row, n, count)
            memcpy(out_x + k * x_bytes, src, run * x_bytes)
        else:
            memcpy(out_x + k * x_bytes, src, x_bytes)
            memcpy(out_y + k * y_bytes, src + x_bytes, y_bytes)
        k += run
    return 0


cdef int _preadv_full(int fd, iovec* iov, int niov, int64_t offset) noexcept nogil:
    """preadv until every iovec is filled: 0, -errno or GATHER_EOF."""
    cdef ssize_t got
    while niov > 0:
        got = preadv(fd, iov, niov, offset)
        if got < 0:
            if errno == EINTR:
                continue
            return -errno
        if got == 0:
            return GATHER_EOF
        offset += got
        while niov > 0 and <size_t>got >= iov[0].iov_len:
            got -= iov[0].iov_len
            iov += 1
            niov -= 1
        if niov > 0 and got > 0:
            iov[0].iov_base = <char*>iov[0].iov_base + got
            iov[0].iov_len -= got
    return 0


cdef int _read_split(
    int fd, int64_t offset, Py_ssize_t rows, Py_ssize_t row_bytes, char* bounce,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
) noexcept nogil:
    """Read `rows` consecutive rows into `bounce` with one pread, then split."""
    cdef iovec iov
    cdef Py_ssize_t j
    cdef int status
    iov.iov_base = bounce
    iov.iov_len = rows * row_bytes
    status = _preadv_full(fd, &iov, 1, offset)
    if status != 0:
        return status
    for j in range(rows):
        memcpy(out_x + j * x_bytes, bounce + j * row_bytes, x_bytes)
        memcpy(out_y + j * y_bytes, bounce + j * row_bytes + x_bytes, y_bytes)
    return 0


cdef int gather_pread(
    int fd, int64_t data_offset, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil:
    cdef iovec iov[2]
    cdef Py_ssize_t k = 0, run, max_run
    cdef int64_t row
    cdef int status = 0
    cdef char* bounce = NULL
    if y_bytes == 0:
        max_run = MAX_RUN_BYTES // x_bytes if x_bytes < MAX_RUN_BYTES else 1
    else:
        max_run = BOUNCE_BYTES // row_bytes
    while k < count and status == 0:  # one exit: the bounce buffer is freed there
        row = indices[k]
        if <unsigned long long>row >= <unsigned long long>n:
            bad[0] = k
            status = GATHER_BAD_INDEX
            break
        run = _run_at(indices, k, count, row, n, max_run) if max_run > 1 else 1
        if y_bytes == 0:
            # x rows are contiguous in the file and in out_x: read in place.
            iov[0].iov_base = out_x + k * x_bytes
            iov[0].iov_len = run * x_bytes
            status = _preadv_full(fd, iov, 1, data_offset + row * row_bytes)
        elif run == 1:
            # One row: scatter x and y with one preadv, no extra copy.
            iov[0].iov_base = out_x + k * x_bytes
            iov[0].iov_len = x_bytes
            iov[1].iov_base = out_y + k * y_bytes
            iov[1].iov_len = y_bytes
            status = _preadv_full(fd, iov, 2, data_offset + row * row_bytes)
        else:
            # A run: one contiguous read into a bounce buffer, then split.
            # Sequential batches of 256 x 33 float64, 3.11: 15-17 us a batch
            # (numpy.memmap 14-17 us); a preadv with 2 iovecs a row: 25-32 us.
            if bounce == NULL:
                bounce = <char*>malloc(BOUNCE_BYTES)
            status = -ENOMEM if bounce == NULL else _read_split(
                fd, data_offset + row * row_bytes, run, row_bytes, bounce,
                out_x + k * x_bytes, x_bytes, out_y + k * y_bytes, y_bytes)
        k += run
    free(bounce)
    return status


cdef int gather_mapped_guarded(
    const char* map_start, size_t map_bytes, const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil:
    cdef _MappedGather call = _MappedGather(
        data, n, row_bytes, indices, count, out_x, x_bytes, out_y, y_bytes, bad)
    return dl_bus_guarded(map_start, map_start + map_bytes, _call_gather_mapped, &call,
                          GATHER_FAULT)


cdef int install_bus_guard() noexcept nogil:
    return dl_bus_install()


# ---------------------------------------------------------------- NumPy arrays (ArrayDataset)


cdef object _memmap = np.memmap
cdef object _mmap = mmap.mmap


cdef bint plain_array(object a) noexcept:
    """A NumPy array, C-contiguous, at least 1-D, and no Python objects in its items.

    Only an ``ndarray`` itself or a ``numpy.memmap``: a subclass's indexing may differ from
    its buffer's rows (a ``numpy.ma.MaskedArray`` keeps its mask beside the data; a gather
    of the buffer would drop it), so NumPy indexes it.
    """
    return ((cnp.PyArray_CheckExact(a) or type(a) is _memmap) and cnp.PyArray_NDIM(<cnp.ndarray>a) >= 1
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and not PyDataType_REFCHK(cnp.PyArray_DESCR(<cnp.ndarray>a)))


cdef str array_summary(object a):
    """What ``plain_array`` looked at, for an error: type, shape, dtype, C-contiguity."""
    if not cnp.PyArray_Check(a):
        return f"a {type(a).__name__}, not a NumPy array"
    return (f"{type(a).__name__} of shape {(<object>a).shape}, dtype={(<object>a).dtype}, "
            f"C-contiguous={bool(cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a))}")


cdef bint mapped_array(object a) noexcept:
    """Whether ``a``'s memory maps a file: a ``numpy.memmap``, or an ndarray whose base chain
    (arrays' ``base``, memoryviews' ``obj``) reaches a ``numpy.memmap`` or an ``mmap.mmap``.
    A few pointer reads for an array of its own memory (no base): cheap enough for every
    batch."""
    cdef object obj = a
    cdef PyObject* base
    while True:
        if cnp.PyArray_Check(obj):
            if type(obj) is _memmap:
                return True
            base = cnp.PyArray_BASE(<cnp.ndarray>obj)
            if base == NULL:
                return False
            obj = <object>base
        elif type(obj) is memoryview:
            try:
                obj = obj.obj  # np.asarray(memoryview(a memmap)): the view's exporter
            except ValueError:  # a released view: nothing to follow
                return False
        else:
            return isinstance(obj, _mmap)


cdef object mapped_fault(object a):
    """The ``OSError`` of a gather from ``a`` (a ``mapped_array``) that faulted: its file
    is shorter than the array (truncated while mapped), named where ``a`` knows it."""
    cdef object obj = a
    name = None
    while name is None and (cnp.PyArray_Check(obj) or type(obj) is memoryview):
        if type(obj) is memoryview:
            try:
                obj = obj.obj
            except ValueError:
                break
            continue
        name = getattr(obj, "filename", None) if type(obj) is _memmap else None
        obj = obj.base
    message = ("the array's memory-mapped file is shorter than the array (truncated while "
               f"mapped?); rows past its end cannot be read ({array_summary(a)})")
    return OSError(EIO, message) if name is None else OSError(EIO, message, os.fspath(name))


cdef int guard_mapped_arrays() except -1:
    """Install the SIGBUS guard (idempotent) before a gather from a ``mapped_array``."""
    cdef int code = install_bus_guard()
    if code != 0:
        raise OSError(code, f"cannot install the SIGBUS guard: {os.strerror(code)}")
    return 0


def can_take(object source):
    """Whether ``take_rows`` can gather from ``source`` (else use NumPy's indexing)."""
    return plain_array(source)


def take_rows(cnp.ndarray source not None, cnp.ndarray indices not None, object out=None):
    """``source[indices]`` along axis 0, copied row by row with the GIL released.

    Args:
        source: C-contiguous array of shape ``(n, ...)``, any dtype without Python
            objects (see ``can_take``).
        indices: 1-D int64 array of ``count`` rows (a strided or byte-swapped one is
            copied first); negative indices count from the end, as in NumPy.
        out: ``None`` (a new array is returned) or an array of shape
            ``(count,) + source.shape[1:]`` and ``source.dtype``, C-contiguous and
            writeable, not overlapping ``source``.

    Returns:
        ``out``, or the new array.

    Raises:
        IndexError: an index outside ``[-n, n)``, named (nothing is copied).
        OSError: ``source`` maps a file (a ``numpy.memmap``, an array over an
            ``mmap.mmap``) truncated while mapped, and a row lies past its new end
            (EIO, naming the file where known; rows before it are copied).
        ValueError: ``out`` has the wrong shape or dtype, is not C-contiguous or
            writeable, or overlaps ``source`` (named); ``source`` is not
            C-contiguous or holds objects.
        TypeError: ``indices`` is not a 1-D int64 array.
    """
    return _take_rows(source, _index_array(indices), out)


def take_columns(object arrays not None, cnp.ndarray indices not None):
    """``tuple(take_rows(a, indices) for a in arrays)``, or None when ``can_take`` refuses one.

    One call for a whole ``ArrayDataset`` batch (``arrays``: a sequence of arrays): the loop
    and its checks run in C (the Python loop it replaces cost ~1.7 us a batch on 3.13t).
    Raises what ``take_rows`` does.
    """
    arrays = tuple(arrays)
    for a in arrays:
        if not plain_array(a):
            return None
    indices = _index_array(indices)
    return tuple([_take_rows(<cnp.ndarray>a, indices, None) for a in arrays])


cdef cnp.ndarray _index_array(cnp.ndarray indices):
    """``indices`` as the kernel reads them: 1-D C-contiguous aligned native int64."""
    if cnp.PyArray_TYPE(indices) != cnp.NPY_INT64 or cnp.PyArray_NDIM(indices) != 1:
        raise TypeError("indices must be a 1-D int64 array")
    if (not cnp.PyArray_IS_C_CONTIGUOUS(indices) or not cnp.PyArray_ISALIGNED(indices)
            or not cnp.PyArray_ISNOTSWAPPED(indices)):
        return np.ascontiguousarray(indices, dtype=np.int64)  # a strided view: one copy
    return indices


cdef object _take_rows(cnp.ndarray source, cnp.ndarray indices, object out):
    # ``indices`` went through _index_array.
    if not plain_array(source):
        raise ValueError("source must be a C-contiguous numpy.ndarray or numpy.memmap of at least "
                         f"1 dimension without Python objects, got {array_summary(source)}")
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
    cdef int status
    cdef bint guarded = mapped_array(source)
    cdef cnp.ndarray wrapped
    if guarded:
        guard_mapped_arrays()
    with nogil:
        status = checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(indices),
                                count, dst, guarded, &bad)
    if status == GATHER_BAD_INDEX:
        # Some index is negative or too large: count negatives from the end, as
        # NumPy does, and gather from the wrapped copy (or name the bad index).
        wrapped = <cnp.ndarray>np.where(indices < 0, indices + n, indices)
        with nogil:
            status = checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(wrapped),
                                    count, dst, guarded, &bad)
        if status == GATHER_BAD_INDEX:
            raise IndexError(f"index {indices[bad]} is out of bounds for axis 0 with size {n}")
    if status == GATHER_FAULT:
        raise mapped_fault(source)
    return out


cdef int checked_gather(const char* data, int64_t n, Py_ssize_t row_bytes, const int64_t* idx,
                        Py_ssize_t count, char* dst, bint guarded, Py_ssize_t* bad) noexcept nogil:
    bad[0] = first_bad_index(idx, count, n)
    if bad[0] >= 0:
        return GATHER_BAD_INDEX
    if guarded:
        return gather_mapped_guarded(data, <size_t>n * <size_t>row_bytes, data, n, row_bytes, idx, count,
                                     dst, row_bytes, NULL, 0, bad)
    return gather_mapped(data, n, row_bytes, idx, count, dst, row_bytes, NULL, 0, bad)


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
