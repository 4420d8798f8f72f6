# cython: freethreading_compatible=True
# The claim window + reorder ring that epochs use: ``WindowCore`` (``_window_core.pxd``: the
# state, the protocol and its nogil internals) plus the Python-facing methods (``_ring.pyx``).

from libc.stdint cimport int64_t

from dataloader._native._window_core cimport WindowCore


cdef class Window(WindowCore):
    # -99: no Status has that value, so a status returned never costs an error check.
    cdef int64_t _block(self, int64_t k, double timeout_s) except? -99
