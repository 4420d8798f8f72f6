# cython: freethreading_compatible=True
"""The one validator of ``out=`` arrays (declared in ``_out.pxd``).

Checks run in NumPy's order of exception types: what ``out`` is and its dtype
(``TypeError``), then its shape and layout (``ValueError``).  Native entries cimport
``check_out``; Python faces call ``check_out_array``.
"""

cimport numpy as cnp

import numpy as np

cnp.import_array()


cdef int check_out(object out, str name, tuple shape, cnp.dtype dtype, Py_ssize_t size=-1) except -1:
    cdef cnp.ndarray a
    cdef int i, ndim
    if not cnp.PyArray_Check(out):
        raise TypeError(f"{name} must be a numpy.ndarray, got {type(out).__name__}")
    a = <cnp.ndarray>out
    if not cnp.PyArray_EquivTypes(a.descr, dtype):
        raise TypeError(f"{name} must have dtype {dtype}, got dtype={a.dtype}")
    if size >= 0:
        if cnp.PyArray_SIZE(a) != size:
            raise ValueError(f"{name} must have {size} elements, got shape={(<object>a).shape}")
    else:
        ndim = cnp.PyArray_NDIM(a)
        if ndim != len(shape):
            raise ValueError(f"{name} must have shape {shape}, got shape={(<object>a).shape}")
        for i in range(ndim):
            if cnp.PyArray_DIM(a, i) != <Py_ssize_t>shape[i]:
                raise ValueError(f"{name} must have shape {shape}, got shape={(<object>a).shape}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(a):
        raise ValueError(f"{name} must be C-contiguous")
    if not cnp.PyArray_ISWRITEABLE(a):
        raise ValueError(f"{name} must be writeable")
    return 0


def check_out_array(object out, str name, tuple shape, object dtype):
    """``out`` once it is an array a kernel may fill with ``shape`` x ``dtype``.

    Args:
        out: the caller's ``out=`` argument.
        name: its name in messages (``"out_x"``, ``"out"``).
        shape: the shape it must have (elements).
        dtype: the dtype it must have, byte order included.

    Returns:
        ``out``.

    Raises:
        TypeError: ``out`` is not a ``numpy.ndarray``, or has another dtype.
        ValueError: ``out`` has another shape, is not C-contiguous, or is read-only.
    """
    check_out(out, name, shape, np.dtype(dtype))
    return out
