# Row gathering from a row table in memory (an mmap'd `.ndf` file, a NumPy
# array): the one kernel both `_gather.Reader` and `_rows.take_rows` run.
#
# Works on raw pointers, never touches Python objects and never blocks on the
# GIL.  Sizes are in bytes; row indices are int64.  The gather checks each
# index as it loads it (a caller may check them all first with
# first_bad_index so that nothing is copied on a bad index).

from libc.stdint cimport int64_t


# Statuses besides 0 (success) and -errno (a failed read, `_gather`'s pread).
cdef enum:
    GATHER_EOF = 1          # the file ended before a requested row
    GATHER_BAD_INDEX = 2    # indices[*bad] is outside [0, n)


# Position of the first index outside [0, n), or -1 when all are in range.
cdef Py_ssize_t first_bad_index(
    const int64_t* indices, Py_ssize_t count, int64_t n
) noexcept nogil

# Length of the run first, first + 1, ... at position k (at most max_run, all
# rows < n); each index is loaded once.
cdef Py_ssize_t run_at(
    const int64_t* indices, Py_ssize_t k, Py_ssize_t count,
    int64_t first, int64_t n, Py_ssize_t max_run,
) noexcept nogil

# Copy rows `indices` of a table in memory (`data` = row 0, n rows of
# `row_bytes`) into `out_x` (count * x_bytes: the first x_bytes of each row)
# and `out_y` (count * y_bytes: the y_bytes after them).  With y_bytes == 0,
# x_bytes must equal row_bytes and runs of consecutive indices are copied with
# one memcpy.  Rows a few positions ahead are prefetched.
# Returns 0 or GATHER_BAD_INDEX (position in *bad; rows before it copied).
cdef int gather_rows(
    const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil
