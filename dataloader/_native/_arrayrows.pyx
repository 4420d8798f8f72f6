# cython: freethreading_compatible=True
"""Rows of NumPy arrays (``ArrayDataset``): ``take_rows`` / ``take_columns``, no GIL.

``ArrayDataset`` gathers every C-contiguous column (``plain_array``) with the in-memory
kernel of `.ndf` mappings (``_rowcopy.gather_mapped``: one ``memcpy`` a row, prefetching
rows ahead), the GIL released; ``_rowjobs.RowJobs`` runs the same kernel in workers.
A gather from an array whose memory maps a file (a ``numpy.memmap``, an array over an
``mmap.mmap``: ``mapped_array``) runs under the `.ndf` SIGBUS guard (``_bus_guard.h``): a
file truncated while mapped fails the gather with ``OSError`` naming it (``mapped_fault``),
where NumPy's own indexing ends the process.  ``take_rows`` keeps no state: concurrent calls
are safe as long as their outputs differ.  A source array written by another thread while
it is read gives torn rows (as NumPy would), never an access outside it: each index is
checked as it is loaded.
"""

cimport numpy as cnp
from cpython.object cimport PyObject
from libc.errno cimport EIO
from libc.stdint cimport int64_t

from dataloader._native._rowcopy cimport (
    GATHER_BAD_INDEX, GATHER_FAULT, first_bad_index, gather_mapped, gather_mapped_guarded, install_bus_guard,
)

import mmap
import os

import numpy as np

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    bint PyDataType_REFCHK(cnp.PyArray_Descr* descr) noexcept  # items hold objects

cdef object _memmap = np.memmap
cdef object _mmap = mmap.mmap


cdef bint plain_array(object a) noexcept:
    """A NumPy array, C-contiguous, at least 1-D, and no Python objects in its items.

    Only an ``ndarray`` itself or a ``numpy.memmap``: a subclass's indexing may differ from
    its buffer's rows (a ``numpy.ma.MaskedArray`` keeps its mask beside the data; a gather
    of the buffer would drop it), so NumPy indexes it.
    """
    return ((cnp.PyArray_CheckExact(a) or type(a) is _memmap) and cnp.PyArray_NDIM(<cnp.ndarray>a) >= 1
            and cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a)
            and not PyDataType_REFCHK(cnp.PyArray_DESCR(<cnp.ndarray>a)))


cdef str array_summary(object a):
    """What ``plain_array`` looked at, for an error: type, shape, dtype, C-contiguity."""
    if not cnp.PyArray_Check(a):
        return f"a {type(a).__name__}, not a NumPy array"
    return (f"{type(a).__name__} of shape {(<object>a).shape}, dtype={(<object>a).dtype}, "
            f"C-contiguous={bool(cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>a))}")


cdef bint mapped_array(object a) noexcept:
    """Whether ``a``'s memory maps a file: a ``numpy.memmap``, or an ndarray whose base chain
    (arrays' ``base``, memoryviews' ``obj``) reaches a ``numpy.memmap`` or an ``mmap.mmap``.
    A few pointer reads for an array of its own memory (no base): cheap enough for every
    batch."""
    cdef object obj = a
    cdef PyObject* base
    while True:
        if cnp.PyArray_Check(obj):
            if type(obj) is _memmap:
                return True
            base = cnp.PyArray_BASE(<cnp.ndarray>obj)
            if base == NULL:
                return False
            obj = <object>base
        elif type(obj) is memoryview:
            try:
                obj = obj.obj  # np.asarray(memoryview(a memmap)): the view's exporter
            except ValueError:  # a released view: nothing to follow
                return False
        else:
            return isinstance(obj, _mmap)


cdef object mapped_fault(object a):
    """The ``OSError`` of a gather from ``a`` (a ``mapped_array``) that faulted: its file
    is shorter than the array (truncated while mapped), named where ``a`` knows it."""
    cdef object obj = a
    name = None
    while name is None and (cnp.PyArray_Check(obj) or type(obj) is memoryview):
        if type(obj) is memoryview:
            try:
                obj = obj.obj
            except ValueError:
                break
            continue
        name = getattr(obj, "filename", None) if type(obj) is _memmap else None
        obj = obj.base
    message = ("the array's memory-mapped file is shorter than the array (truncated while "
               f"mapped?); rows past its end cannot be read ({array_summary(a)})")
    return OSError(EIO, message) if name is None else OSError(EIO, message, os.fspath(name))


cdef int guard_mapped_arrays() except -1:
    """Install the SIGBUS guard (idempotent) before a gather from a ``mapped_array``."""
    cdef int code = install_bus_guard()
    if code != 0:
        raise OSError(code, f"cannot install the SIGBUS guard: {os.strerror(code)}")
    return 0


def can_take(object source):
    """Whether ``take_rows`` can gather from ``source`` (else use NumPy's indexing)."""
    return plain_array(source)


def take_rows(cnp.ndarray source not None, cnp.ndarray indices not None, object out=None):
    """``source[indices]`` along axis 0, copied row by row with the GIL released.

    Args:
        source: C-contiguous array of shape ``(n, ...)``, any dtype without Python
            objects (see ``can_take``).
        indices: 1-D int64 array of ``count`` rows (a strided or byte-swapped one is
            copied first); negative indices count from the end, as in NumPy.
        out: ``None`` (a new array is returned) or an array of shape
            ``(count,) + source.shape[1:]`` and ``source.dtype``, C-contiguous and
            writeable, not overlapping ``source``.

    Returns:
        ``out``, or the new array.

    Raises:
        IndexError: an index outside ``[-n, n)``, named (nothing is copied).
        OSError: ``source`` maps a file (a ``numpy.memmap``, an array over an
            ``mmap.mmap``) truncated while mapped, and a row lies past its new end
            (EIO, naming the file where known; rows before it are copied).
        ValueError: ``out`` has the wrong shape or dtype, is not C-contiguous or
            writeable, or overlaps ``source`` (named); ``source`` is not
            C-contiguous or holds objects.
        TypeError: ``indices`` is not a 1-D int64 array.
    """
    return _take_rows(source, _index_array(indices), out)


def take_columns(object arrays not None, cnp.ndarray indices not None):
    """``tuple(take_rows(a, indices) for a in arrays)``, or None when ``can_take`` refuses one.

    One call for a whole ``ArrayDataset`` batch (``arrays``: a sequence of arrays): the loop
    and its checks run in C (the Python loop it replaces cost ~1.7 us a batch on 3.13t).
    Raises what ``take_rows`` does.
    """
    arrays = tuple(arrays)
    for a in arrays:
        if not plain_array(a):
            return None
    indices = _index_array(indices)
    return tuple([_take_rows(<cnp.ndarray>a, indices, None) for a in arrays])


cdef cnp.ndarray _index_array(cnp.ndarray indices):
    """``indices`` as the kernel reads them: 1-D C-contiguous aligned native int64."""
    if cnp.PyArray_TYPE(indices) != cnp.NPY_INT64 or cnp.PyArray_NDIM(indices) != 1:
        raise TypeError("indices must be a 1-D int64 array")
    if (not cnp.PyArray_IS_C_CONTIGUOUS(indices) or not cnp.PyArray_ISALIGNED(indices)
            or not cnp.PyArray_ISNOTSWAPPED(indices)):
        return np.ascontiguousarray(indices, dtype=np.int64)  # a strided view: one copy
    return indices


cdef object _take_rows(cnp.ndarray source, cnp.ndarray indices, object out):
    # ``indices`` went through _index_array.
    if not plain_array(source):
        raise ValueError("source must be a C-contiguous numpy.ndarray or numpy.memmap of at least "
                         f"1 dimension without Python objects, got {array_summary(source)}")
    cdef Py_ssize_t count = cnp.PyArray_DIM(indices, 0)
    cdef int64_t n = cnp.PyArray_DIM(source, 0)
    shape = (count,) + (<object>source).shape[1:]
    if out is None:
        out = np.empty(shape, source.dtype)
    else:
        _check_out(source, out, shape)
    cdef char* dst = <char*>cnp.PyArray_DATA(<cnp.ndarray>out)
    cdef const char* data = <const char*>cnp.PyArray_DATA(source)
    cdef Py_ssize_t row_bytes = cnp.PyArray_NBYTES(source) // n if n > 0 else 0
    cdef Py_ssize_t bad
    cdef int status
    cdef bint guarded = mapped_array(source)
    cdef cnp.ndarray wrapped
    if guarded:
        guard_mapped_arrays()
    with nogil:
        status = checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(indices),
                                count, dst, guarded, &bad)
    if status == GATHER_BAD_INDEX:
        # Some index is negative or too large: count negatives from the end, as
        # NumPy does, and gather from the wrapped copy (or name the bad index).
        wrapped = <cnp.ndarray>np.where(indices < 0, indices + n, indices)
        with nogil:
            status = checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(wrapped),
                                    count, dst, guarded, &bad)
        if status == GATHER_BAD_INDEX:
            raise IndexError(f"index {indices[bad]} is out of bounds for axis 0 with size {n}")
    if status == GATHER_FAULT:
        raise mapped_fault(source)
    return out


cdef int checked_gather(const char* data, int64_t n, Py_ssize_t row_bytes, const int64_t* idx,
                        Py_ssize_t count, char* dst, bint guarded, Py_ssize_t* bad) noexcept nogil:
    # Gather rows ``idx`` into ``dst``: 0, GATHER_BAD_INDEX (position in *bad; nothing
    # copied) or, with ``guarded`` (a mapped_array, after guard_mapped_arrays), GATHER_FAULT.
    bad[0] = first_bad_index(idx, count, n)
    if bad[0] >= 0:
        return GATHER_BAD_INDEX
    if guarded:
        return gather_mapped_guarded(data, <size_t>n * <size_t>row_bytes, data, n, row_bytes, idx, count,
                                     dst, row_bytes, NULL, 0, bad)
    return gather_mapped(data, n, row_bytes, idx, count, dst, row_bytes, NULL, 0, bad)


cdef int _check_out(cnp.ndarray source, object out, tuple shape) except -1:
    if not cnp.PyArray_Check(out):
        raise ValueError(f"out must be a NumPy array, got {type(out).__name__}")
    if (<object>out).shape != shape:
        raise ValueError(f"out has shape {(<object>out).shape}; expected {shape}")
    if (<object>out).dtype != source.dtype:
        raise ValueError(f"out has dtype {(<object>out).dtype}; expected {source.dtype}")
    if not cnp.PyArray_IS_C_CONTIGUOUS(<cnp.ndarray>out):
        raise ValueError("out must be C-contiguous")
    if not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>out):
        raise ValueError("out must be writeable")
    if np.may_share_memory(out, source):
        raise ValueError("out overlaps the array it gathers from")
    return 0
