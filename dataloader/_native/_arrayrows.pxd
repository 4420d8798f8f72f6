# Rows of NumPy arrays (ArrayDataset), see _arrayrows.pyx; cimported by _rowjobs.pyx.


# A NumPy array that the kernels can read: an ndarray or a numpy.memmap (not another
# subclass), C-contiguous, at least 1-D, and no Python objects in its items (needs the
# GIL: it reads the array's header).
cdef bint plain_array(object a) noexcept
# plain_array's view of ``a`` for an error message: type, shape, dtype, C-contiguity.
cdef str array_summary(object a)

# Whether a NumPy array's memory maps a file (a numpy.memmap, or an ndarray over an
# mmap.mmap): its gathers run guarded (needs the GIL: it reads the array's base chain).
cdef bint mapped_array(object a) noexcept
# The OSError (EIO, naming the file where known) of a guarded gather from ``a`` that faulted.
cdef object mapped_fault(object a)
# install_bus_guard(), raising OSError when it fails.
cdef int guard_mapped_arrays() except -1
