# cython: freethreading_compatible=True
"""Rows of NumPy arrays (``ArrayDataset``): ``take_rows`` / ``take_columns``, no GIL.

``ArrayDataset`` gathers every C-contiguous column (``plain_array``) with the in-memory
kernel of `.ndf` mappings (``_rowcopy.gather_mapped``: one ``memcpy`` a row, prefetching
rows ahead), the GIL released; ``_rowjobs.RowJobs`` runs the same kernel in workers.
A gather from or into an array whose memory NumPy did not allocate (``own_memory``: a
``numpy.memmap``, an array over an ``mmap.mmap``, a ctypes buffer, any exporter) runs under
the `.ndf` SIGBUS guard (``_bus_guard.h``): a file truncated while mapped fails the gather
with ``OSError`` naming it (``gather_fault``, from ``/proc/self/maps``), where NumPy's own
indexing ends the process.  ``take_rows`` keeps no state: concurrent calls
are safe as long as their outputs differ.  A source array written by another thread while
it is read gives torn rows (as NumPy would), never an access outside it: each index is
checked as it is loaded.
"""

cimport numpy as cnp
from cpython.object cimport PyObject
from libc.errno cimport EIO
from libc.stdint cimport int64_t

from dataloader._native._out cimport check_out
from dataloader._native._rowcopy cimport (
    GuardRange, bus_fault_address, first_bad_index, gather_mapped, gather_mapped_guarded,
    install_bus_guard,
)
from dataloader._native._status cimport GATHER_BAD_INDEX, GATHER_FAULT

import os

import numpy as np

cnp.import_array()

cdef extern from "numpy/arrayobject.h":
    bint PyDataType_REFCHK(cnp.PyArray_Descr* descr) noexcept  # items hold objects
    PyObject* PyArray_HANDLER(cnp.ndarray arr) noexcept  # an owner's allocator (a capsule)
    PyObject* PyDataMem_DefaultHandler  # NumPy's default allocator (malloc and friends)

cdef object _memmap = np.memmap


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


cdef bint own_memory(cnp.ndarray a) noexcept:
    """Whether ``a``'s bytes lie in a block NumPy allocated with its default allocator.

    Such memory (malloc: heap or anonymous pages) never maps a file, so a gather from or
    into it cannot fault and runs unguarded.  Any other memory is guarded, whatever
    exports it (a ``numpy.memmap`` or ``mmap.mmap``, a ctypes array ``from_buffer`` of
    one, an ``__array_interface__`` or buffer-protocol object, a pyarrow buffer, another
    allocator): the decision rests on where the bytes come from, not on recognising a
    file-mapping type.  Guarding costs ~0.4 us a ``take_rows`` call (the handler check,
    a system call) and nothing measurable in ``RowJobs`` (a ``sigsetjmp`` a gather), and
    is right even for memory mapped after the dataset was built; an exact test (is the
    range a file mapping? ``/proc/self/maps``) would cost a read of the maps per array
    and a cache that goes stale.  The walk follows arrays' ``base`` (views) and
    memoryviews' ``obj`` to the array that owns the block, then checks that ``a`` lies
    inside it: a few pointer reads, cheap enough for every batch."""
    cdef object obj = a
    cdef PyObject* base
    cdef const char* lo
    cdef const char* root_lo
    while True:
        if cnp.PyArray_Check(obj):
            base = cnp.PyArray_BASE(<cnp.ndarray>obj)
            if base == NULL:
                break
            obj = <object>base
        elif type(obj) is memoryview:
            try:
                obj = obj.obj  # np.asarray(memoryview(x)): the view's exporter
            except ValueError:  # a released view: nothing to follow
                return False
        else:
            return False  # memory some other object exports
    if (not cnp.PyArray_CHKFLAGS(<cnp.ndarray>obj, cnp.NPY_ARRAY_OWNDATA)
            or PyArray_HANDLER(<cnp.ndarray>obj) != PyDataMem_DefaultHandler):
        return False
    lo = <const char*>cnp.PyArray_DATA(a)
    root_lo = <const char*>cnp.PyArray_DATA(<cnp.ndarray>obj)
    return (lo >= root_lo and lo + cnp.PyArray_NBYTES(a)
            <= root_lo + cnp.PyArray_NBYTES(<cnp.ndarray>obj))


cdef GuardRange array_range(cnp.ndarray a) noexcept:
    """The bytes of a C-contiguous array: [data, data + nbytes)."""
    cdef const char* lo = <const char*>cnp.PyArray_DATA(a)
    return GuardRange(lo, lo + cnp.PyArray_NBYTES(a))


cdef object mapped_file(size_t lo, size_t hi):
    """The file of the first file mapping (a nonzero inode) overlapping ``[lo, hi)`` in
    ``/proc/self/maps`` (as the kernel prints it: canonical, `` (deleted)`` appended to a
    removed file), or None: none there, or no ``/proc``.  Read only after a fault."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            for line in maps:
                fields = line.split(None, 5)  # range, perms, offset, dev, inode, path
                if len(fields) < 6 or fields[4] == b"0":
                    continue
                start, _, end = fields[0].partition(b"-")
                if int(start, 16) < hi and int(end, 16) > lo:
                    return os.fsdecode(fields[5].rstrip(b"\n"))
    except (OSError, ValueError):
        return None
    return None


cdef object memmap_filename(object obj):
    """The ``filename`` of the ``numpy.memmap`` in ``obj``'s base chain, or None."""
    while cnp.PyArray_Check(obj) or type(obj) is memoryview:
        if type(obj) is memoryview:
            try:
                obj = obj.obj
            except ValueError:
                return None
            continue
        if type(obj) is _memmap and getattr(obj, "filename", None) is not None:
            return obj.filename
        obj = obj.base
    return None


cdef object gather_fault(cnp.ndarray source, object out, const char* at):
    """The ``OSError`` (EIO) of a guarded gather from ``source`` into ``out`` (an array, or
    None: ours) that faulted at ``at`` (NULL: unknown): a file mapped there is shorter than
    the array (truncated while mapped).  Names that file from ``/proc/self/maps`` (where
    ``at`` is unknown: the source's, else ``out``'s; without ``/proc``: a memmap's name)."""
    cdef GuardRange src = array_range(source)
    cdef GuardRange dst
    if at != NULL:
        name = mapped_file(<size_t>at, <size_t>at + 1)
    else:
        name = mapped_file(<size_t>src.lo, <size_t>src.hi)
    if out is not None:
        dst = array_range(<cnp.ndarray>out)
        # Where the address is unknown: out's, when no file is mapped over the source.
        into_out = dst.lo <= at < dst.hi if at != NULL else name is None
        if into_out:
            return out_fault(<cnp.ndarray>out, at)
    message = ("the array's memory-mapped file is shorter than the array (truncated while "
               f"mapped?); rows past its end cannot be read ({array_summary(source)})")
    return _eio(message, name if name is not None else memmap_filename(source))


cdef object out_fault(cnp.ndarray out, const char* at):
    """The ``OSError`` (EIO) of a guarded copy into the caller's ``out`` that faulted at
    ``at`` (NULL: unknown, somewhere in ``out``), naming the file mapped there."""
    cdef GuardRange dst = array_range(out)
    if at != NULL:
        name = mapped_file(<size_t>at, <size_t>at + 1)
    else:
        name = mapped_file(<size_t>dst.lo, <size_t>dst.hi)
    message = ("the output array's memory-mapped file is shorter than the array (truncated "
               f"while mapped?); rows past its end cannot be written ({array_summary(out)})")
    return _eio(message, name if name is not None else memmap_filename(out))


cdef object _eio(str message, object name):
    return OSError(EIO, message) if name is None else OSError(EIO, message, os.fspath(name))


cdef int ensure_bus_guard() except -1:
    """Install the SIGBUS guard (idempotent) before a guarded gather."""
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
        OSError: ``source`` (or ``out``) maps a file (a ``numpy.memmap``; an array
            over an ``mmap.mmap``, a ctypes buffer or any other exporter of mapped
            memory) truncated while mapped, and a row lies past its new end (EIO,
            naming the file where known; rows before it are copied).
        TypeError: ``indices`` is not a 1-D int64 array; ``out`` is not an ndarray of
            ``source.dtype`` (``_out.check_out``).
        ValueError: ``out`` has the wrong shape, is not C-contiguous or writeable, or
            overlaps ``source`` (named); ``source`` is not C-contiguous or holds objects.
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
    given = out is not None
    if out is None:
        out = np.empty(shape, source.dtype)
    else:
        _check_out(source, out, shape)
    cdef char* dst = <char*>cnp.PyArray_DATA(<cnp.ndarray>out)
    cdef const char* data = <const char*>cnp.PyArray_DATA(source)
    cdef Py_ssize_t row_bytes = cnp.PyArray_NBYTES(source) // n if n > 0 else 0
    cdef Py_ssize_t bad
    cdef int status
    cdef GuardRange ranges[2]
    cdef int nranges = _guard_ranges(source, out if given else None, ranges)
    cdef cnp.ndarray wrapped
    with nogil:
        status = checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(indices),
                                count, dst, ranges, nranges, &bad)
    if status == GATHER_BAD_INDEX:
        # Some index is negative or too large: count negatives from the end, as
        # NumPy does, and gather from the wrapped copy (or name the bad index).
        wrapped = <cnp.ndarray>np.where(indices < 0, indices + n, indices)
        with nogil:
            status = checked_gather(data, n, row_bytes, <const int64_t*>cnp.PyArray_DATA(wrapped),
                                    count, dst, ranges, nranges, &bad)
        if status == GATHER_BAD_INDEX:
            raise IndexError(f"index {indices[bad]} is out of bounds for axis 0 with size {n}")
    if status == GATHER_FAULT:
        raise gather_fault(source, out if given else None, bus_fault_address())
    return out


cdef int _guard_ranges(cnp.ndarray source, object out, GuardRange* ranges) except -1:
    # The ranges a gather from ``source`` into ``out`` (None: ours) runs guarded over, into
    # ``ranges`` (room for 2): each that is not NumPy's own memory.  Installs the guard
    # when there is one.  Returns how many.
    cdef int count = 0
    if not own_memory(source):
        ranges[count] = array_range(source)
        count += 1
    if out is not None and not own_memory(<cnp.ndarray>out):
        ranges[count] = array_range(<cnp.ndarray>out)
        count += 1
    if count:
        ensure_bus_guard()
    return count


cdef int checked_gather(const char* data, int64_t n, Py_ssize_t row_bytes, const int64_t* idx,
                        Py_ssize_t count, char* dst, const GuardRange* ranges, int nranges,
                        Py_ssize_t* bad) noexcept nogil:
    # Gather rows ``idx`` into ``dst``: 0, GATHER_BAD_INDEX (position in *bad; nothing
    # copied) or, with ``nranges`` guarded ranges (after ensure_bus_guard), GATHER_FAULT.
    bad[0] = first_bad_index(idx, count, n)
    if bad[0] >= 0:
        return GATHER_BAD_INDEX
    if nranges:
        return gather_mapped_guarded(ranges, nranges, data, n, row_bytes, idx, count,
                                     dst, row_bytes, NULL, 0, bad)
    return gather_mapped(data, n, row_bytes, idx, count, dst, row_bytes, NULL, 0, bad)


cdef int _check_out(cnp.ndarray source, object out, tuple shape) except -1:
    check_out(out, "out", shape, source.descr)
    if np.may_share_memory(out, source):
        raise ValueError("out overlaps the array it gathers from")
    return 0
