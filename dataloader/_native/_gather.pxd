# Row gathering kernels for `.ndf` files (see dataloader/ndf.py for the layout).
#
# All kernels work on raw pointers, never touch Python objects and never
# block on the GIL.  Sizes are in bytes; row indices are int64.  The
# gathers check each index as they load it (a caller may check them all
# first with first_bad_index so that nothing is copied on a bad index).

from libc.stdint cimport int64_t


# Statuses (GATHER_EOF, GATHER_BAD_INDEX), first_bad_index and the in-memory
# kernel used for mapped files (gather_rows) live in _rows.pxd.

# Copy rows `indices` of the file on `fd` (row 0 at byte `data_offset`, n rows
# of row_bytes) into `out_x` / `out_y` as _rows.gather_rows does, with
# preadv(2): one system call per run of consecutive indices, scattering x and
# y straight into the outputs.  Returns 0, -errno, GATHER_EOF (the file was
# truncated while open) or GATHER_BAD_INDEX.
cdef int gather_pread(
    int fd, int64_t data_offset, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil
