# Row-copy kernels for `.ndf` files (see dataloader/ndf.py for the layout), used by
# dataloader/_native/_gather.pyx (the Reader); gather_mapped also serves NumPy
# arrays (_arrayrows.take_rows behind ArrayDataset, and _rowjobs).
#
# All kernels work on raw pointers, never touch Python objects and never
# block on the GIL.  Sizes are in bytes; row indices are int64.  The
# gathers check each index as they load it (a caller may check them all
# first with first_bad_index so that nothing is copied on a bad index).

from libc.stdint cimport int64_t


# Statuses (_status.pxd): OK (0), -errno (a failed read), GATHER_EOF, GATHER_BAD_INDEX,
# GATHER_FAULT.
from dataloader._native._status cimport GATHER_BAD_INDEX, GATHER_EOF, GATHER_FAULT, OK


# Position of the first index outside [0, n), or -1 when all are in range.
cdef Py_ssize_t first_bad_index(
    const int64_t* indices, Py_ssize_t count, int64_t n
) noexcept nogil

# Copy rows `indices` of a row table in memory (`data` = row 0, n rows of
# row_bytes: a mapped `.ndf` file, a NumPy array) into `out_x` (count * x_bytes:
# the first x_bytes of each row) and `out_y` (count * y_bytes: the y_bytes after
# them).  With y_bytes == 0, x_bytes must equal row_bytes, and runs of
# consecutive indices are copied with one memcpy.  Rows 32 positions ahead are
# prefetched (the first 32 before the loop).
# Returns 0 or GATHER_BAD_INDEX (position in *bad; rows before it copied).
cdef int gather_mapped(
    const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil

# Same with preadv(2) on `fd` (row 0 at byte `data_offset`); one system
# call per run of consecutive indices, scattering x and y straight into the
# outputs.  Returns 0, -errno, GATHER_EOF (the file was truncated while
# open) or GATHER_BAD_INDEX.
cdef int gather_pread(
    int fd, int64_t data_offset, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil

# An address range a guarded gather may fault in: [lo, hi) (_bus_guard.h's dl_bus_range).
cdef struct GuardRange:
    const char* lo
    const char* hi

# gather_mapped with a SIGBUS in any of ranges[0 .. nranges) (a file truncated while mapped:
# the `.ndf` mapping; an array's source or destination bytes) turned into GATHER_FAULT (see
# _bus_guard.h; bus_fault_address() then says where).  Call install_bus_guard() first.
cdef int gather_mapped_guarded(
    const GuardRange* ranges, int nranges, const char* data, int64_t n, Py_ssize_t row_bytes,
    const int64_t* indices, Py_ssize_t count,
    char* out_x, Py_ssize_t x_bytes, char* out_y, Py_ssize_t y_bytes,
    Py_ssize_t* bad,
) noexcept nogil

# memcpy(dst, src, nbytes) with a SIGBUS in any of the ranges turned into GATHER_FAULT
# (else 0).  Call install_bus_guard() first.
cdef int copy_guarded(const GuardRange* ranges, int nranges, char* dst, const char* src,
                      size_t nbytes) noexcept nogil

# The address at which the calling thread's last GATHER_FAULT faulted; NULL when unknown
# (faulthandler, enabled after the guard, re-raised the fault without its address).
cdef const char* bus_fault_address() noexcept nogil

# Install the process-wide SIGBUS handler of the guard (idempotent; see _bus_guard.h).
# Returns 0 or an errno.
cdef int install_bus_guard() noexcept nogil
