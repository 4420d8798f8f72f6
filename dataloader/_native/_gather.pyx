# cython: freethreading_compatible=True
"""Gather rows of an `.ndf` file into caller buffers without the GIL: ``Reader``.

A `Reader` reaches the rows one of two ways (kernels in ``_rowcopy``):

* ``mmap``: the file is mapped read-only once; a gather is one ``memcpy`` per
  row from the mapping, so a page-cached file is gathered at memory speed.
  Mapped pages count in the process's resident set (they are page cache,
  reclaimable by the kernel).  A file truncated by someone else while mapped
  makes an access past its new end raise SIGBUS; the copy runs under a guard
  that turns that fault into an ``OSError`` naming the file (rows between the
  new end and the end of its page read as zeros; only ``pread`` detects every
  truncation).
* ``pread``: one system call per run of consecutive indices.  Nothing is
  mapped, so the resident set stays flat however large the file.

`Reader` owns the file descriptor (and mapping).  It counts the reads in
flight under a mutex, so ``close()`` from any thread is safe while others
read: the descriptor is released by whoever finishes last, and reads that
start after ``close()`` raise ``ValueError``.
"""

cimport cython
cimport numpy as cnp
from libc.errno cimport EIO, errno
from libc.stdint cimport int64_t
from posix.fcntl cimport (
    POSIX_FADV_NORMAL, POSIX_FADV_RANDOM, POSIX_FADV_SEQUENTIAL, posix_fadvise,
)
from posix.mman cimport (
    MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL, MAP_FAILED, MAP_SHARED,
    PROT_READ, madvise, mmap, munmap,
)
from posix.unistd cimport close

from dataloader._native._out cimport check_out
from dataloader._native._arrayrows cimport array_range, ensure_bus_guard, out_fault, own_memory
from dataloader._native._rowcopy cimport (
    GuardRange, bus_fault_address, copy_guarded, first_bad_index, gather_mapped_guarded, gather_pread,
    install_bus_guard,
)
from dataloader._native._status cimport GATHER_BAD_INDEX, GATHER_CLOSED, GATHER_EOF, GATHER_FAULT

import os

import numpy as np

cnp.import_array()

ADVICE = ("normal", "random", "sequential")
cdef int[3] _MADVICE = [MADV_NORMAL, MADV_RANDOM, MADV_SEQUENTIAL]
cdef int[3] _FADVICE = [POSIX_FADV_NORMAL, POSIX_FADV_RANDOM, POSIX_FADV_SEQUENTIAL]



cdef object _plain_dtype(object value, str name):
    """``value`` as a numpy dtype of native byte order: bool, integer or float, no fields."""
    dtype = np.dtype(value)
    if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None or not dtype.isnative:
        raise TypeError(f"{name} must be a native-order integer or float dtype, got {dtype!r}")
    return dtype


cdef int64_t _top_row(const int64_t* idx, Py_ssize_t count) noexcept:
    """The largest of ``idx[0:count]`` (0 for none)."""
    cdef int64_t top = 0
    cdef Py_ssize_t k
    for k in range(count):
        if idx[k] > top:
            top = idx[k]
    return top


cdef int _copy_into(const GuardRange* outs, int nouts, cnp.ndarray dst, cnp.ndarray src) noexcept nogil:
    """``dst[...] = src`` (same size, C-contiguous) guarded over ``outs``: 0 or GATHER_FAULT."""
    return copy_guarded(outs, nouts, <char*>cnp.PyArray_DATA(dst),
                        <const char*>cnp.PyArray_DATA(src), cnp.PyArray_NBYTES(src))


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
        x_dtype, y_dtype: the dtypes of x and y (a plain integer or float numpy dtype of
            native byte order; the file holds them little-endian); float64 by default.
            A gather copies bytes: out arrays have these dtypes.
    """

    def __cinit__(self, int fd, object name, int64_t n, Py_ssize_t d, Py_ssize_t l,
                  int64_t data_offset, bint use_mmap, int advice,
                  object x_dtype=np.float64, object y_dtype=np.float64):
        cdef void* mapped
        self.fd = fd
        self.owns_fd = True
        self.name = name
        if n < 0 or d < 1 or l < 0 or data_offset < 0 or not 0 <= advice < 3:
            raise ValueError(f"bad reader geometry {n=} {d=} {l=} {data_offset=} {advice=}")
        self.x_dtype = _plain_dtype(x_dtype, "x_dtype")
        self.y_dtype = _plain_dtype(y_dtype, "y_dtype")
        self.n = n
        self.d = d
        self.l = l
        self.x_bytes = d * (<cnp.dtype>self.x_dtype).itemsize
        self.y_bytes = l * (<cnp.dtype>self.y_dtype).itemsize
        self.row_bytes = self.x_bytes + self.y_bytes
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
            code = install_bus_guard()
            if code != 0:
                raise OSError(code, f"cannot install the SIGBUS guard: {os.strerror(code)}", name)
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

    cdef bint _try_enter(self) noexcept nogil:
        cdef bint ok = False
        with self.lock:
            if not self.closed:
                self.readers += 1
                ok = True
        return ok

    cdef void _leave(self) noexcept nogil:
        cdef bint free_now = False
        with self.lock:
            self.readers -= 1
            if self.closed and self.readers == 0 and not self.released:
                self.released = True
                free_now = True
        if free_now:
            self._free()

    def error(self, int status, int64_t index=-1):
        """The exception a gather that returned ``status`` (not 0) raises; ``index``: the bad
        index of ``GATHER_BAD_INDEX``."""
        if status == GATHER_BAD_INDEX:
            return IndexError(f"index {index} is out of range for {self.n} rows in {self.name!r}")
        if status == GATHER_CLOSED:
            return ValueError(f"I/O operation on closed .ndf file {self.name!r}")
        if status == GATHER_EOF:
            return OSError(f"unexpected end of file in {self.name!r} (truncated while open?)")
        if status == GATHER_FAULT:
            return OSError(
                EIO,
                "the mapped file is shorter than its header says (truncated while open?); "
                "rows past its end cannot be read",
                self.name,
            )
        return OSError(-status, os.strerror(-status), self.name)

    def gather(self, cnp.ndarray indices not None, object out_x, object out_y):
        """Copy rows ``indices`` into ``out_x`` (B, d) and ``out_y`` (B, l).

        indices: 1-D C-contiguous aligned native int64; out_x / out_y:
        C-contiguous writeable, of dtypes x_dtype / y_dtype.  Raises IndexError naming the
        first index outside [0, n), ValueError on a closed reader or bad shapes or layout,
        TypeError on out arrays that are not ndarrays of those dtypes (``_out.check_out``),
        OSError on read failures.
        """
        if (cnp.PyArray_TYPE(indices) != cnp.NPY_INT64 or cnp.PyArray_NDIM(indices) != 1
                or not cnp.PyArray_IS_C_CONTIGUOUS(indices)
                or not cnp.PyArray_ISALIGNED(indices)
                or not cnp.PyArray_ISNOTSWAPPED(indices)):
            raise TypeError("indices must be a 1-D C-contiguous native int64 array")
        cdef Py_ssize_t count = indices.shape[0]
        check_out(out_x, "out_x", (count, self.d), self.x_dtype)
        check_out(out_y, "out_y", (count, self.l), self.y_dtype)
        self._gather(<const int64_t*>cnp.PyArray_DATA(indices), count, <cnp.ndarray>out_x,
                     <cnp.ndarray>out_y)

    def gather_one(self, int64_t index, object out_x, object out_y):
        """Copy row ``index`` into ``out_x`` and ``out_y`` (any C-contiguous
        writeable arrays of d and l elements, of dtypes x_dtype and y_dtype)."""
        check_out(out_x, "out_x", (), self.x_dtype, self.d)
        check_out(out_y, "out_y", (), self.y_dtype, self.l)
        self._gather(&index, 1, <cnp.ndarray>out_x, <cnp.ndarray>out_y)

    cdef int gather_status(self, const int64_t* idx, Py_ssize_t count, char* px, char* py,
                           Py_ssize_t* bad) noexcept nogil:
        return self._gather_status(idx, count, px, py, bad, NULL, 0)

    cdef int _gather_status(self, const int64_t* idx, Py_ssize_t count, char* px, char* py,
                            Py_ssize_t* bad, const GuardRange* outs, int nouts) noexcept nogil:
        # gather_status, with ``outs[0 .. nouts)`` (at most 2) guarded besides the mapping.
        cdef int status, k
        cdef GuardRange ranges[3]
        bad[0] = -1
        if not self._try_enter():
            return GATHER_CLOSED
        # Check all first so that nothing is read when an index is bad;
        # the kernels check again as they load each index.
        bad[0] = first_bad_index(idx, count, self.n)
        if bad[0] >= 0:
            status = GATHER_BAD_INDEX
        elif self.base != NULL:
            ranges[0].lo = self.base
            ranges[0].hi = self.base + self.map_bytes
            for k in range(nouts):
                ranges[1 + k] = outs[k]
            status = gather_mapped_guarded(
                ranges, 1 + nouts, self.base + self.data_offset, self.n,
                self.row_bytes, idx, count, px, self.x_bytes, py, self.y_bytes, bad)
        else:
            status = gather_pread(self.fd, self.data_offset, self.n, self.row_bytes,
                                  idx, count, px, self.x_bytes, py, self.y_bytes, bad)
        self._leave()
        return status

    cdef int _gather(self, const int64_t* idx, Py_ssize_t count, cnp.ndarray out_x,
                     cnp.ndarray out_y) except -1:
        # Into the caller's out_x / out_y (checked).  Those that are not NumPy's own memory
        # are written under the guard too, as ArrayDataset's out= is (a memmap whose file
        # was truncated while mapped: the writes fault): the mapped copy guards them beside
        # the mapping; pread reads into arrays of ours first, then copies them over guarded.
        cdef Py_ssize_t bad = -1
        cdef int status
        cdef GuardRange outs[2]
        cdef int nouts = 0
        cdef const char* at = NULL
        cdef cnp.ndarray into_x = out_x, into_y = out_y
        for out in (out_x, out_y):
            if cnp.PyArray_NBYTES(<cnp.ndarray>out) > 0 and not own_memory(<cnp.ndarray>out):
                outs[nouts] = array_range(<cnp.ndarray>out)
                nouts += 1
        if nouts:
            ensure_bus_guard()
            if self.base == NULL:  # pread: its bounce-buffer copies are not guarded
                into_x, into_y = np.empty_like(out_x), np.empty_like(out_y)
        cdef bint staged = into_x is not out_x
        cdef char* px = <char*>cnp.PyArray_DATA(into_x)
        cdef char* py = <char*>cnp.PyArray_DATA(into_y)
        with nogil:
            status = self._gather_status(idx, count, px, py, &bad, outs, 0 if staged else nouts)
            if status == 0 and staged:
                status = _copy_into(outs, nouts, out_x, into_x)
                if status == 0:
                    status = _copy_into(outs, nouts, out_y, into_y)
            if status == GATHER_FAULT:
                at = bus_fault_address()
        if status == 0:
            return 0
        if status == GATHER_FAULT and nouts:
            error = self._out_fault(out_x, out_y, at, _top_row(idx, count))
            if error is not None:
                raise error
        raise self.error(status, idx[bad] if bad >= 0 else -1)

    cdef object _out_fault(self, cnp.ndarray out_x, cnp.ndarray out_y, const char* at,
                           int64_t top_row):
        # The error of a gather of rows up to ``top_row`` that faulted at ``at`` when it was
        # in an out (else None: the file's own error).
        cdef GuardRange x = array_range(out_x)
        cdef GuardRange y = array_range(out_y)
        if at != NULL:
            return (out_fault(out_x, at) if x.lo <= at < x.hi
                    else out_fault(out_y, at) if y.lo <= at < y.hi else None)
        if self.base != NULL:  # re-raised by faulthandler, without its address
            try:
                size = os.fstat(self.fd).st_size
            except OSError:  # closed meanwhile
                return None
            if size < self.data_offset + (top_row + 1) * self.row_bytes:
                return None  # the rows reach past the file's end: its own fault, maybe
        return out_fault(out_x if not own_memory(out_x) else out_y, NULL)
