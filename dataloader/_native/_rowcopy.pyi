"""Type stub for the private row-copy kernels (see _rowcopy.pyx).

The kernels are ``cdef ... noexcept nogil`` functions cimported by ``_gather.pyx`` (the
``.ndf`` Reader), ``_arrayrows.pyx`` (NumPy arrays) and ``_rowjobs.pyx``: nothing here is
called from Python.
"""
