# Rows of NumPy arrays (ArrayDataset), see _arrayrows.pyx; cimported by _rowjobs.pyx.

cimport numpy as cnp

from dataloader._native._rowcopy cimport GuardRange

# A NumPy array that the kernels can read: an ndarray or a numpy.memmap (not another
# subclass), C-contiguous, at least 1-D, and no Python objects in its items (needs the
# GIL: it reads the array's header).
cdef bint plain_array(object a) noexcept
# plain_array's view of ``a`` for an error message: type, shape, dtype, C-contiguity.
cdef str array_summary(object a)

# Whether a NumPy array's bytes lie in a block NumPy allocated (its default allocator),
# which never maps a file: else its gathers run guarded (needs the GIL: it reads the
# array's base chain).
cdef bint own_memory(cnp.ndarray a) noexcept
# The bytes of a C-contiguous array, as the guard takes them.
cdef GuardRange array_range(cnp.ndarray a) noexcept
# The OSError (EIO, naming the file where known) of a guarded gather from ``source`` into
# ``out`` (None: an array of ours) that faulted at ``at`` (NULL: unknown).
cdef object gather_fault(cnp.ndarray source, object out, const char* at)
# The same for a guarded copy into the caller's ``out`` (``.ndf`` reads with out_x/out_y).
cdef object out_fault(cnp.ndarray out, const char* at)
# install_bus_guard(), raising OSError when it fails.
cdef int ensure_bus_guard() except -1
