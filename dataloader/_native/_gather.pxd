# Declarations of the `.ndf` Reader (``_gather.pyx``): cimported by the native row-gather
# jobs (``_rowjobs.pyx``), which gather a batch of an ``NdfDataset`` with no Python.

cimport cython
cimport numpy as cnp
from libc.stdint cimport int64_t

from dataloader._native._rowcopy cimport GuardRange


from dataloader._native._status cimport GATHER_CLOSED


cdef class Reader:
    cdef int fd
    cdef bint owns_fd
    cdef char* base
    cdef size_t map_bytes
    cdef readonly int64_t n
    cdef int64_t data_offset
    cdef readonly Py_ssize_t d, l
    cdef readonly object x_dtype, y_dtype   # numpy dtypes (native byte order) of x and y
    cdef Py_ssize_t x_bytes, y_bytes, row_bytes
    cdef readonly object name
    cdef readonly bint mapped
    cdef cython.pymutex lock
    cdef Py_ssize_t readers
    cdef bint closed, released

    cdef void _free(self) noexcept nogil
    cdef bint _try_enter(self) noexcept nogil
    cdef void _leave(self) noexcept nogil
    # Rows idx[0:count] into px (count x d x_dtype) and py (count x l y_dtype): 0, or a status for
    # error() (GATHER_BAD_INDEX with *bad, GATHER_CLOSED, GATHER_EOF, GATHER_FAULT, -errno).
    # Any thread, no GIL needed; close() meanwhile waits for it to finish.
    cdef int gather_status(self, const int64_t* idx, Py_ssize_t count, char* px, char* py,
                           Py_ssize_t* bad) noexcept nogil
    cdef int _gather_status(self, const int64_t* idx, Py_ssize_t count, char* px, char* py,
                            Py_ssize_t* bad, const GuardRange* outs, int nouts) noexcept nogil
    cdef int _gather(self, const int64_t* idx, Py_ssize_t count, cnp.ndarray out_x,
                     cnp.ndarray out_y) except -1
    cdef object _out_fault(self, cnp.ndarray out_x, cnp.ndarray out_y, const char* at,
                           int64_t top_row)
