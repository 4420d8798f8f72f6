# cython: freethreading_compatible=True
"""Gather rows of an `.ndf` file into caller buffers without the GIL.

Two ways to reach the rows, chosen per `Reader`:

* ``mmap``: the file is mapped read-only once; a gather is one ``memcpy``
  per row (per run of consecutive rows when there are no labels) from the
  mapping, with software prefetch a few rows ahead.  No system call per
  row, so a page-cached file is gathered at memory speed.  Mapped pages
  count in the process's resident set (they are page cache, reclaimable by
  the kernel).  A file truncated by someone else while mapped makes the
  next access raise SIGBUS: do not truncate open files.
* ``pread``: one system call per run of consecutive indices.  A single
  row is scattered into the two outputs by one ``preadv`` (2 iovecs); a
  run is read whole, in place when there are no labels, otherwise into a
  64 KiB bounce buffer and split (a preadv with 2 iovecs per row was
  measured ~2x slower for runs).  Nothing is mapped, so the resident set
  stays flat however large the file.

`Reader` owns the file descriptor (and mapping).  It counts the reads in
flight under a mutex, so ``close()`` from any thread is safe while others
read: the descriptor is released by whoever finishes last, and reads that
start after ``close()`` raise ``ValueError``.
"""

cimport cython
cimport numpy as cnp
from libc.errno cimport EINTR, ENOMEM, errno
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from posix.fcntl cimport (
    POSIX_FADV_NORMAL, POSIX_FADV_RANDOM, POSIX_FADV_SEQUENTIAL, posix_fadvise,
)
from posix.mman cimport (
    MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MAP_FAILED, MAP_SHARED,
    PROT_READ, madvise, mmap, munmap,
)
from posix.uio cimport iovec, preadv
from posix.unistd cimport close

import os

cnp.import_array()

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define DL_PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 0)
    #else
    #define DL_PREFETCH(p) ((void)(p))
    #endif
    """
    void DL_PREFETCH(const void* p) noexcept nogil

# Rows prefetched ahead of the copy in gather_mapped: enough to cover DRAM
# latency (~100 ns) with ~10-40 ns of copying per row; measured on
# benchmarks/bench_ndf.py (3.11): 8 rows ahead 12.2 us a batch of 256, none
# 14.0 us; 4 and 16 were no better than 8.
cdef enum:
    PREFETCH_ROWS = 8
    # Bounce buffer for runs of consecutive rows with labels (bytes): one
    # read per run of up to this size, then x and y are split by memcpy.
    BOUNCE_BYTES = 1 << 16
    # Largest single run read by one preadv when there are no labels (bytes).
    MAX_RUN_BYTES = 1 << 30

ADVICE = ("normal", "random", "sequential")
cdef int[3] _MADVICE = [MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL]
cdef int[3] _FADVICE = [POSIX_FADV_NORMAL, POSIX_FADV_RANDOM, POSIX_FADV_SEQUENTIAL]


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
    cdef Py_ssize_t k = 0, run
    cdef int64_t row, ahead
    cdef const char* src
    while k < count:
        row = indices[k]
        if <unsigned long long>row >= <unsigned long long>n:
            bad[0] = k
            return GATHER_BAD_INDEX
        if y_bytes == 0:
            # Output rows are contiguous, file rows too: one copy per run.
            run = _run_at(indices, k, count, row, n, count)
            memcpy(out_x + k * x_bytes, data + row * row_bytes, run * x_bytes)
            k += run
            continue
        if k + PREFETCH_ROWS < count:
            ahead = indices[k + PREFETCH_ROWS]
            if <unsigned long long>ahead < <unsigned long long>n:
                src = data + ahead * row_bytes
                DL_PREFETCH(src)
                DL_PREFETCH(src + row_bytes - 1)
        src = data + row * row_bytes
        memcpy(out_x + k * x_bytes, src, x_bytes)
        memcpy(out_y + k * y_bytes, src + x_bytes, y_bytes)
        k += 1
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


cdef inline int _check_out(cnp.ndarray out, str name, Py_ssize_t rows, Py_ssize_t cols,
                           bint flat=False) except -1:
    """Writeable C-contiguous native float64, (rows, cols); ``flat``: rows * cols elements."""
    if cnp.PyArray_TYPE(out) != cnp.NPY_DOUBLE or not cnp.PyArray_ISNOTSWAPPED(out):
        raise TypeError(f"{name} must have dtype float64, got dtype={out.dtype}")
    if flat and cnp.PyArray_SIZE(out) != rows * cols:
        raise ValueError(f"{name} must be a writeable C-contiguous array of {rows * cols} elements")
    if not flat and (cnp.PyArray_NDIM(out) != 2 or out.shape[0] != rows or out.shape[1] != cols):
        raise ValueError(f"{name} must have shape {(rows, cols)}, got shape={(<object>out).shape}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(out) or not cnp.PyArray_ISWRITEABLE(out):
        what = f"array of {rows * cols} elements" if flat else "array"
        raise ValueError(f"{name} must be a writeable C-contiguous {what}")
    return 0


@cython.final
cdef class Reader:
    """Owner of an open `.ndf` descriptor; gathers rows without the GIL.

    Args:
        fd: open read-only descriptor; the Reader owns it from the call on
            (closes it on close() or when garbage collected, also if this
            constructor raises after parsing its arguments).
        name: file name used in error messages.
        n, d, l: rows, features per row, labels per row (validated header).
        data_offset: byte offset of row 0 (the header size).
        use_mmap: map the file (True) or read with preadv (False).
        advice: index into ADVICE, passed to madvise / posix_fadvise.
    """

    cdef int fd
    cdef bint owns_fd
    cdef char* base
    cdef size_t map_bytes
    cdef int64_t n
    cdef int64_t data_offset
    cdef Py_ssize_t x_bytes, y_bytes, row_bytes, d, l
    cdef readonly object name
    cdef readonly bint mapped
    cdef cython.pymutex lock
    cdef Py_ssize_t readers
    cdef bint closed, released

    def __cinit__(self, int fd, object name, int64_t n, Py_ssize_t d, Py_ssize_t l,
                  int64_t data_offset, bint use_mmap, int advice):
        cdef void* mapped
        self.fd = fd
        self.owns_fd = True
        self.name = name
        if n < 0 or d < 1 or l < 0 or data_offset < 0 or not 0 <= advice < 3:
            raise ValueError(f"bad reader geometry {n=} {d=} {l=} {data_offset=} {advice=}")
        self.n = n
        self.d = d
        self.l = l
        self.x_bytes = d * 8
        self.y_bytes = l * 8
        self.row_bytes = (d + l) * 8
        self.data_offset = data_offset
        self.base = NULL
        if use_mmap and n > 0:
            self.map_bytes = <size_t>(data_offset + n * self.row_bytes)
            mapped = mmap(NULL, self.map_bytes, PROT_READ, MAP_SHARED, fd, 0)
            if mapped == MAP_FAILED:
                code = errno
                raise OSError(code, os.strerror(code), name)
            self.base = <char*>mapped
            self.mapped = True
            madvise(mapped, self.map_bytes, _MADVICE[advice])  # advice only
        else:
            posix_fadvise(fd, 0, 0, _FADVICE[advice])  # advice only

    def __dealloc__(self):
        if not self.released:  # no other reference exists: no lock needed
            self.released = True
            self._free()

    cdef void _free(self) noexcept nogil:
        """Unmap and close; the caller has set `released` (exactly once)."""
        if self.base != NULL:
            munmap(self.base, self.map_bytes)
            self.base = NULL
        if self.owns_fd:
            self.owns_fd = False
            close(self.fd)

    @property
    def closed(self):
        """True once close() was called."""
        cdef bint closed
        with self.lock:
            closed = self.closed
        return closed

    def close(self):
        """Close now, or when the last read in flight finishes. Idempotent."""
        cdef bint free_now = False
        with self.lock:
            if not self.closed:
                self.closed = True
                free_now = self.readers == 0
                if free_now:
                    self.released = True
        if free_now:
            self._free()

    cdef int _enter(self) except -1:
        cdef bint ok = False
        with self.lock:
            if not self.closed:
                self.readers += 1
                ok = True
        if not ok:
            raise ValueError(f"I/O operation on closed .ndf file {self.name!r}")
        return 0

    cdef void _leave(self) noexcept nogil:
        cdef bint free_now = False
        with self.lock:
            self.readers -= 1
            if self.closed and self.readers == 0 and not self.released:
                self.released = True
                free_now = True
        if free_now:
            self._free()

    def gather(self, cnp.ndarray indices not None, cnp.ndarray out_x not None,
               cnp.ndarray out_y not None):
        """Copy rows ``indices`` into ``out_x`` (B, d) and ``out_y`` (B, l).

        indices: 1-D C-contiguous aligned native int64; out_x / out_y:
        C-contiguous writeable native float64.  Raises IndexError naming the
        first index outside [0, n), ValueError on a closed reader or bad
        shapes, TypeError on bad dtypes, OSError on read failures.
        """
        if (cnp.PyArray_TYPE(indices) != cnp.NPY_INT64 or cnp.PyArray_NDIM(indices) != 1
                or not cnp.PyArray_IS_C_CONTIGUOUS(indices)
                or not cnp.PyArray_ISALIGNED(indices)
                or not cnp.PyArray_ISNOTSWAPPED(indices)):
            raise TypeError("indices must be a 1-D C-contiguous native int64 array")
        cdef Py_ssize_t count = indices.shape[0]
        _check_out(out_x, "out_x", count, self.d)
        _check_out(out_y, "out_y", count, self.l)
        self._gather(<const int64_t*>cnp.PyArray_DATA(indices), count,
                     <char*>cnp.PyArray_DATA(out_x), <char*>cnp.PyArray_DATA(out_y))

    def gather_one(self, int64_t index, cnp.ndarray out_x not None,
                   cnp.ndarray out_y not None):
        """Copy row ``index`` into ``out_x`` and ``out_y`` (any C-contiguous
        writeable float64 arrays of d and l elements)."""
        _check_out(out_x, "out_x", 1, self.d, flat=True)
        _check_out(out_y, "out_y", 1, self.l, flat=True)
        self._gather(&index, 1, <char*>cnp.PyArray_DATA(out_x), <char*>cnp.PyArray_DATA(out_y))

    cdef int _gather(self, const int64_t* idx, Py_ssize_t count, char* px, char* py) except -1:
        cdef Py_ssize_t bad = -1
        cdef int status = 0
        self._enter()
        with nogil:
            # Check all first so that nothing is read when an index is bad;
            # the kernels check again as they load each index.
            bad = first_bad_index(idx, count, self.n)
            if bad >= 0:
                status = GATHER_BAD_INDEX
            elif self.base != NULL:
                status = gather_mapped(self.base + self.data_offset, self.n, self.row_bytes,
                                       idx, count, px, self.x_bytes, py, self.y_bytes, &bad)
            else:
                status = gather_pread(self.fd, self.data_offset, self.n, self.row_bytes,
                                      idx, count, px, self.x_bytes, py, self.y_bytes, &bad)
            self._leave()
        if status == GATHER_BAD_INDEX:
            raise IndexError(
                f"index {idx[bad]} is out of range for {self.n} rows in {self.name!r}")
        if status == GATHER_EOF:
            raise OSError(f"unexpected end of file in {self.name!r} (truncated while open?)")
        if status != 0:
            raise OSError(-status, os.strerror(-status), self.name)
        return 0
