# cython: freethreading_compatible=True
# The one validator of ``out=`` arrays (``_out.pyx``): every native entry and every Python
# face that fills a caller's array checks it here, so the same bad ``out`` raises the same
# exception everywhere (NumPy's rule: TypeError for the type or dtype, ValueError for the
# shape or layout).

cimport numpy as cnp


# ``out`` (named ``name`` in messages) as an array the kernels may fill: an ndarray of
# ``dtype`` (byte order included), of ``shape`` (or, with ``size >= 0``, of ``size``
# elements in any shape), C-contiguous and writeable.  Returns 0 or raises.
cdef int check_out(object out, str name, tuple shape, cnp.dtype dtype, Py_ssize_t size=*) except -1
