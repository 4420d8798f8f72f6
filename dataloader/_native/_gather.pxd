# Row gathering kernels for `.ndf` files (see dataloader/ndf.py for the layout).
#
# All kernels work on raw pointers, never touch Python objects and never
# block on the GIL.  Sizes are in bytes; row indices are int64 and must
# already be validated (first_bad_index) by the caller.

from libc.stdint cimport int64_t


# Status returned by gather_pread when the file ends before a requested row.
cdef enum:
    GATHER_EOF = 1


# Position of the first index outside [0, n), or -1 when all are in range.
cdef Py_ssize_t first_bad_index(
    const int64_t* indices, Py_ssize_t count, int64_t n
) noexcept nogil

# Copy rows `indices` of a mapped row table (`data` = first row) into
# `out_x` (count * x_bytes) and `out_y` (count * y_bytes).  Runs of
# consecutive indices are copied with one memcpy when y_bytes == 0.
cdef void gather_mapped(
    const char* data, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
) noexcept nogil

# Same with preadv(2) on `fd` (rows start at byte `data_offset`); one
# system call per run of consecutive indices.  Returns 0, -errno, or
# GATHER_EOF when the file ended early (it was truncated while open).
cdef int gather_pread(
    int fd, int64_t data_offset, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
) noexcept nogil
