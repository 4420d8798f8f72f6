"""Type stub for the private row-copy kernels (see _rowcopy.pyx): no Python-level API.

The kernels are ``cdef ... noexcept nogil`` functions cimported by ``_gather.pyx``.
"""
