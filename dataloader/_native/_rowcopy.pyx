# cython: freethreading_compatible=True
"""Row-copy kernels: from memory (an `.ndf` mapping, a NumPy array) or with preadv, no GIL.

Two ways to reach the rows of an `.ndf` file (``dataloader._native._gather.Reader``
picks one); the in-memory one also gathers NumPy arrays (``_arrayrows.take_rows``,
which ``ArrayDataset`` gathers C-contiguous columns with):

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

The NumPy-array side (``take_rows``, behind ``ArrayDataset``) is ``_arrayrows.pyx``.
"""

from libc.errno cimport EINTR, ENOMEM, errno
from libc.stdint cimport int64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy
from posix.uio cimport iovec, preadv

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
    ctypedef struct dl_bus_range:
        const char* lo
        const char* hi
    int dl_bus_install() noexcept nogil
    int dl_bus_guarded(const dl_bus_range* ranges, int nranges,
                       int (*fn)(void*) noexcept nogil, void* arg, int fault) noexcept nogil
    const char* dl_bus_fault_address() noexcept nogil


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
    const GuardRange* ranges, int nranges, const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil:
    cdef _MappedGather call = _MappedGather(
        data, n, row_bytes, indices, count, out_x, x_bytes, out_y, y_bytes, bad)
    # GuardRange is dl_bus_range declared again for cimporting modules (they must not
    # include _bus_guard.h: its handler state is this module's).
    return dl_bus_guarded(<const dl_bus_range*>ranges, nranges, _call_gather_mapped, &call,
                          GATHER_FAULT)


# The arguments of one memcpy, for dl_bus_guarded's callback.
cdef struct _Copy:
    char* dst
    const char* src
    size_t nbytes


cdef int _call_memcpy(void* arg) noexcept nogil:
    cdef _Copy* a = <_Copy*>arg
    memcpy(a.dst, a.src, a.nbytes)
    return 0


cdef int copy_guarded(const GuardRange* ranges, int nranges, char* dst, const char* src,
                      size_t nbytes) noexcept nogil:
    cdef _Copy call = _Copy(dst, src, nbytes)
    return dl_bus_guarded(<const dl_bus_range*>ranges, nranges, _call_memcpy, &call, GATHER_FAULT)


cdef const char* bus_fault_address() noexcept nogil:
    return dl_bus_fault_address()


cdef int install_bus_guard() noexcept nogil:
    return dl_bus_install()
