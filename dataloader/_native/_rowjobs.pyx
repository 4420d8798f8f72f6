# cython: freethreading_compatible=True
# distutils: language = c++
"""Row-gather jobs: batches of rows that a thread builds with no Python.

A batch of an ``ArrayDataset`` on the loader's native batch path is one row gather per
column (``_rowcopy.gather_mapped``); a batch of an ``NdfDataset`` is one gather of its
``Reader`` (``_gather.pyx``: mapped or ``preadv``, into x and y).  ``RowJobs`` holds one
such job per slot of an epoch's claim window (``_ring.Window``):

- the consumer (``prepare``, with the GIL, before it publishes the batch) copies the
  batch's indices, checks them, allocates the output columns and fills the slot's job; for a
  batch of a shuffled epoch (``prepare_span``: positions of a ``Permutation``) it only notes
  the positions, and the job computes the rows (``feistel_fill``): the consumer's share of a
  batch was mostly that computation (~3 us of a batch of 256);
- a worker (``work``) claims batches in a loop without the GIL and runs the job of every
  native batch it claims, returning to Python only for a batch that is not native (or at
  the end of the epoch): no Python object is touched, so on 3.11 a worker never waits for
  the GIL and never takes it from the consumer;
- the consumer (``help``), instead of sleeping while the batch it needs next is not
  ready, claims the next unclaimed batch itself when it is native and builds it.

A ``Reader`` gather can fail (the file was closed or truncated), and so can a gather from
an array whose memory maps a file that was truncated (a column that is not NumPy's own
memory, ``_arrayrows.own_memory``, is gathered under the SIGBUS guard): the job keeps the
status and ``error`` gives the exception the general path would have raised, for that batch.

Lifetime: a slot's job is written by the consumer only after the batch in that slot was
taken (``release`` needs its ``complete``), and read by a worker only after it claimed
the batch (the window's acquire/release counters order the two).  The outputs, the
index copies and the source columns are owned here, so a worker that still runs a job
while the epoch is being dropped writes into memory that is alive: a worker keeps its
``RowJobs`` referenced while it is in ``work``.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy
from libcpp.atomic cimport memory_order_acquire

from dataloader._native._gather cimport Reader
from dataloader._native._permute cimport Permutation, feistel_fill, feistel_t
from dataloader._native._arrayrows cimport (
    array_summary, ensure_bus_guard, gather_fault, own_memory, plain_array,
)
from dataloader._native._rowcopy cimport (
    GuardRange, bus_fault_address, first_bad_index, gather_mapped, gather_mapped_guarded,
)
from dataloader._native._status cimport GATED, GATHER_FAULT
from dataloader._native._stats cimport Recorder, dl_stats_now_ns
from dataloader._native._window_core cimport ANY, ANY_OWNER, STATE_CANCELLED, WindowCore, dl_yield

import numpy as np

cnp.import_array()



cdef struct Column:
    const char* src
    int64_t n
    Py_ssize_t row_bytes
    char* dst
    bint guarded  # src is not NumPy's own memory (_arrayrows.own_memory): gathered under the SIGBUS guard


def can_run(object sources):
    """Whether ``RowJobs`` can gather from ``sources``: a ``Reader``, or arrays that are all
    ``_arrayrows.plain_array`` (an ndarray or memmap, C-contiguous, at least 1-D, without
    Python objects in their items), of one length."""
    if isinstance(sources, Reader):
        return True
    sources = tuple(sources)
    if not sources:
        return False
    for a in sources:
        if not plain_array(a) or cnp.PyArray_DIM(<cnp.ndarray>a, 0) != cnp.PyArray_DIM(<cnp.ndarray>sources[0], 0):
            return False
    return True


cdef class RowJobs:
    """One native row-gather job per slot of an epoch's window (see the module docstring).

    Args:
        size: slots, the window's ``size``.
        sources: the columns, or a ``Reader`` (then a batch is ``[x, y]``, of shapes
            ``(B, d)`` and ``(B,) + y_shape`` and the reader's dtypes); ``can_run`` must
            accept them; kept referenced.
        y_shape: (a ``Reader`` only) the shape of one row's y: ``(l,)`` (None, the
            default) or any shape of l elements, e.g. ``()`` for one label column.

    Thread-safety: ``prepare`` and ``help`` from the consumer only, ``work`` from any
    number of workers, ``run`` from the thread that claimed the batch.
    """

    cdef Py_ssize_t _size
    cdef Py_ssize_t _ncols
    cdef int64_t _n
    cdef Column* _cols        # _size * _ncols jobs' columns
    cdef int64_t** _idx       # per slot: the batch's indices (a copy, owned here)
    cdef Py_ssize_t* _cap     # per slot: capacity of _idx[slot]
    cdef Py_ssize_t* _count   # per slot: rows of the batch
    cdef char* _native        # per slot: 1 while it holds a job (written before publish)
    cdef list _outs           # per slot: the output columns (kept alive for the worker)
    cdef int* _status         # per slot: the gather's status, 0 when it succeeded
    cdef Py_ssize_t* _bad     # per slot: (Reader) the bad index's position, for GATHER_BAD_INDEX;
                              # (arrays) the column whose gather faulted, for GATHER_FAULT
    cdef char* _guarded       # per column (arrays): 1 where it is not NumPy's own memory (guarded)
    cdef const char** _fault_at  # per slot: where its guarded gather faulted (NULL: unknown)
    cdef Reader _reader       # the Reader, or None: the columns are _sources
    cdef const feistel_t** _perm  # per slot: the permutation its indices come from, or NULL
    cdef int64_t* _pstart     # per slot: the first position in _perm[slot]
    cdef list _perms          # per slot: the Permutation of _perm[slot] (kept alive), or None
    cdef tuple _sources
    cdef tuple _shapes        # per column: (shape[1:], dtype)

    def __cinit__(self, Py_ssize_t size, object sources, object y_shape=None):
        cdef Py_ssize_t s
        if size < 1:
            raise ValueError(f"{size=} must be >= 1")
        if not isinstance(sources, Reader):
            sources = tuple(sources)
        if not can_run(sources):
            got = ("none" if not sources else
                   "; ".join([f"{k}: {array_summary(a)}" for k, a in enumerate(sources)]))
            raise ValueError("sources must be a Reader or C-contiguous numpy.ndarray/numpy.memmap "
                             f"arrays of one length, at least 1-D, without Python objects; got {got}")
        self._size = size
        if isinstance(sources, Reader):
            self._reader = <Reader>sources
            self._n = self._reader.n
            self._sources = ()
            y_shape = (self._reader.l,) if y_shape is None else tuple(y_shape)
            if int(np.prod(y_shape, dtype=np.int64)) != self._reader.l:
                raise ValueError(f"{y_shape=} does not hold the reader's l={self._reader.l} labels")
            self._shapes = (((self._reader.d,), self._reader.x_dtype), (y_shape, self._reader.y_dtype))
        else:
            if y_shape is not None:
                raise ValueError("y_shape applies to a Reader's jobs only")
            self._reader = None
            self._n = cnp.PyArray_DIM(<cnp.ndarray>sources[0], 0)
            self._sources = sources
            self._shapes = tuple([((<object>a).shape[1:], (<object>a).dtype) for a in sources])
        self._ncols = len(self._shapes)
        self._guarded = <char*>malloc(self._ncols)
        if self._guarded == NULL:
            raise MemoryError(f"cannot allocate row-gather jobs for {self._ncols} columns")
        for s in range(self._ncols):
            self._guarded[s] = self._reader is None and not own_memory(<cnp.ndarray>self._sources[s])
            if self._guarded[s]:
                ensure_bus_guard()
        self._outs = [None] * size
        self._cols = <Column*>malloc(size * self._ncols * sizeof(Column))
        self._idx = <int64_t**>malloc(size * sizeof(int64_t*))
        self._cap = <Py_ssize_t*>malloc(size * sizeof(Py_ssize_t))
        self._count = <Py_ssize_t*>malloc(size * sizeof(Py_ssize_t))
        self._native = <char*>malloc(size)
        self._status = <int*>malloc(size * sizeof(int))
        self._bad = <Py_ssize_t*>malloc(size * sizeof(Py_ssize_t))
        self._fault_at = <const char**>malloc(size * sizeof(char*))
        self._perm = <const feistel_t**>malloc(size * sizeof(feistel_t*))
        self._pstart = <int64_t*>malloc(size * sizeof(int64_t))
        self._perms = [None] * size
        if (self._cols == NULL or self._idx == NULL or self._cap == NULL or self._count == NULL
                or self._native == NULL or self._status == NULL or self._bad == NULL
                or self._fault_at == NULL or self._perm == NULL or self._pstart == NULL):
            raise MemoryError(f"cannot allocate row-gather jobs for {size} slots")
        for s in range(size):
            self._perm[s] = NULL
            self._pstart[s] = 0
            self._idx[s] = NULL
            self._cap[s] = 0
            self._count[s] = 0
            self._native[s] = 0
            self._status[s] = 0
            self._bad[s] = -1
            self._fault_at[s] = NULL

    def __dealloc__(self):
        cdef Py_ssize_t s
        if self._idx != NULL:
            for s in range(self._size):
                free(self._idx[s])
        free(self._idx)
        free(self._cols)
        free(self._cap)
        free(self._count)
        free(self._native)
        free(self._status)
        free(self._bad)
        free(<void*>self._fault_at)
        free(<void*>self._perm)
        free(self._pstart)
        free(self._guarded)

    @property
    def size(self):
        return self._size

    def prepare(self, Py_ssize_t slot, cnp.ndarray indices not None):
        """Set slot ``slot``'s job for a batch of ``indices`` (consumer, before ``publish``).

        Args:
            slot: the batch's slot (its number modulo ``size``); the batch that used it
                before must have been taken.
            indices: the batch's rows, a 1-D int64 array (copied: the caller may reuse it).

        Returns:
            The list of new output columns (shapes ``(len(indices),) + column.shape[1:]``,
            the columns' dtypes, C-contiguous), filled once the job has run (see ``error``);
            or None, and the slot holds no job: an index outside ``[0, n)`` (negative ones
            included) or an empty batch, which the general path builds (and names).
        """
        cdef Py_ssize_t count
        cdef int64_t* buf
        self._clear(slot)
        if (cnp.PyArray_TYPE(indices) != cnp.NPY_INT64 or cnp.PyArray_NDIM(indices) != 1
                or not cnp.PyArray_IS_C_CONTIGUOUS(indices) or not cnp.PyArray_ISALIGNED(indices)
                or not cnp.PyArray_ISNOTSWAPPED(indices)):
            return None
        count = cnp.PyArray_DIM(indices, 0)
        if count == 0:
            return None
        buf = self._indices(slot, count)
        memcpy(buf, <const int64_t*>cnp.PyArray_DATA(indices), count * sizeof(int64_t))
        if first_bad_index(buf, count, self._n) >= 0:
            return None
        return self._set(slot, count)

    def prepare_span(self, Py_ssize_t slot, Permutation perm not None, int64_t start, Py_ssize_t count):
        """Set slot ``slot``'s job for the rows at positions ``[start, start + count)`` of
        ``perm``: the thread that runs the job computes them (``Permutation.fill``), so the
        consumer does not.  Returns what ``prepare`` does; None (no job) when ``perm`` may
        give a row outside ``[0, n)`` (it permutes more rows than the columns have) or the
        positions run outside ``[0, len(perm))``.
        """
        self._clear(slot)
        if count <= 0 or start < 0 or <uint64_t>perm._f.n > <uint64_t>self._n or <uint64_t>start + <uint64_t>count > perm._f.n:
            return None
        self._indices(slot, count)
        self._perm[slot] = &perm._f
        self._pstart[slot] = start
        self._perms[slot] = perm
        return self._set(slot, count)

    cdef void _clear(self, Py_ssize_t slot) except *:
        if slot < 0 or slot >= self._size:
            raise IndexError(f"slot {slot} is outside [0, {self._size})")
        self._native[slot] = 0
        self._outs[slot] = None
        self._perm[slot] = NULL
        self._perms[slot] = None

    cdef int64_t* _indices(self, Py_ssize_t slot, Py_ssize_t count) except NULL:
        # The slot's index buffer, grown to ``count`` indices.
        cdef int64_t* buf
        if count > self._cap[slot]:
            buf = <int64_t*>realloc(self._idx[slot], count * sizeof(int64_t))
            if buf == NULL:
                raise MemoryError(f"cannot allocate {count} indices")
            self._idx[slot] = buf
            self._cap[slot] = count
        return self._idx[slot]

    cdef list _set(self, Py_ssize_t slot, Py_ssize_t count):
        # Allocate the outputs and fill the slot's job (its indices are set, or will be by
        # _run from _perm[slot]).
        cdef Py_ssize_t c
        cdef Column* col
        cdef cnp.ndarray out
        outs = []
        for c in range(self._ncols):
            shape, dtype = self._shapes[c]
            out = <cnp.ndarray>np.empty((count,) + shape, dtype)
            col = &self._cols[slot * self._ncols + c]
            col.src = <const char*>cnp.PyArray_DATA(<cnp.ndarray>self._sources[c]) if self._reader is None else NULL
            col.n = self._n
            col.row_bytes = cnp.PyArray_NBYTES(out) // count
            col.dst = <char*>cnp.PyArray_DATA(out)
            col.guarded = self._reader is None and self._guarded[c]
            outs.append(out)
        self._count[slot] = count
        self._status[slot] = 0
        self._outs[slot] = outs
        self._native[slot] = 1
        return outs

    def error(self, Py_ssize_t slot):
        """The exception of slot ``slot``'s job once it has run (a ``Reader`` gather that
        failed: the file was closed, truncated, or a read failed; a gather from an array
        whose mapped file was truncated: ``_arrayrows.take_rows``'s ``OSError``), or None."""
        cdef int status
        if slot < 0 or slot >= self._size:
            raise IndexError(f"slot {slot} is outside [0, {self._size})")
        status = self._status[slot]
        if status == 0:
            return None
        if self._reader is None:  # an array column's gather faulted: _bad[slot] is the column
            return gather_fault(<cnp.ndarray>self._sources[self._bad[slot]], None, self._fault_at[slot])
        bad = self._idx[slot][self._bad[slot]] if self._bad[slot] >= 0 else -1
        return self._reader.error(status, bad)

    def take(self, Py_ssize_t slot):
        """``error(slot)``, then ``drop(slot)`` (consumer, once it took the batch)."""
        error = self.error(slot)
        self._clear(slot)
        return error

    def drop(self, Py_ssize_t slot):
        """Slot ``slot`` holds no job (consumer, before ``publish``): the general path builds it."""
        self._clear(slot)

    cdef void _run(self, Py_ssize_t slot, Recorder rec) noexcept nogil:
        cdef int64_t t0 = dl_stats_now_ns()
        cdef Py_ssize_t c, bad
        cdef Column* col
        cdef GuardRange src
        if self._perm[slot] != NULL:  # rows of a permutation span, checked by prepare_span
            feistel_fill(self._perm[slot], <uint64_t>self._pstart[slot], self._idx[slot], self._count[slot])
        if self._reader is not None:
            self._status[slot] = self._reader.gather_status(
                self._idx[slot], self._count[slot], self._cols[slot * 2].dst,
                self._cols[slot * 2 + 1].dst, &self._bad[slot])
            rec.record_fetch(t0, dl_stats_now_ns())
            return
        for c in range(self._ncols):
            col = &self._cols[slot * self._ncols + c]
            # The indices are our own copy, checked against n by prepare (prepare_span: the
            # permutation's rows are below n): only a guarded column can fail (its file was
            # truncated while mapped).
            if not col.guarded:
                gather_mapped(col.src, col.n, col.row_bytes, self._idx[slot], self._count[slot],
                              col.dst, col.row_bytes, NULL, 0, &bad)
                continue
            src.lo = col.src
            src.hi = col.src + <size_t>col.n * <size_t>col.row_bytes
            if gather_mapped_guarded(&src, 1, col.src, col.n, col.row_bytes, self._idx[slot],
                                     self._count[slot], col.dst, col.row_bytes, NULL, 0, &bad) != 0:
                self._status[slot] = GATHER_FAULT
                self._bad[slot] = c
                self._fault_at[slot] = bus_fault_address()
                break
        rec.record_fetch(t0, dl_stats_now_ns())

    cdef int _check(self, WindowCore window) except -1:
        if window._size != self._size or window._owners != 0:
            raise ValueError(f"the window must be untagged with {self._size} slots "
                             f"(got {window._size} slots, {window._owners} owners)")
        return 0

    def run(self, WindowCore window not None, int64_t k, Recorder rec not None):
        """Build batch ``k`` (claimed by the caller) if its slot holds a job, GIL released;
        return whether it did (then ``complete(k)`` is the caller's)."""
        cdef Py_ssize_t slot = k % self._size
        self._check(window)
        if k < 0 or not self._native[slot]:
            return False
        with nogil:
            self._run(slot, rec)
        return True

    def work(self, WindowCore window not None, Recorder rec not None, int worker_id=-1):
        """A worker's loop, GIL released: claim batches, build and complete the native ones.

        ``worker_id`` >= 0: the loop stops before a claim once ``worker_id >= window.limit``
        (``num_workers="auto"`` withdrew this worker).

        Returns:
            A claimed batch that is not native (the caller builds and completes it),
            ``Status.END``: the window is finished and every batch is claimed, or it was
            cancelled; or ``Status.GATED``.
        """
        cdef int64_t k
        self._check(window)
        with nogil:
            while True:
                if worker_id >= window._limit.load():
                    k = GATED
                    break
                k = window._claim_blocking(ANY_OWNER)
                if k < 0 or not self._native[k % self._size]:
                    break
                self._run(k % self._size, rec)
                window._complete(k)
                if (window._claimed.load() - window._completed.load() + 1
                        + (0 if window._consumer_waiting.load() else 1) > window._cpus):
                    # More threads want a core than there are: let a preempted one (a worker
                    # with the batch the consumer needs next, or the consumer) run now rather
                    # than after this thread's time slice (W1, 2 workers on 2 cores: 11-13 ->
                    # 10.5-11.5 us a batch).
                    dl_yield()
        return k

    def help(self, WindowCore window not None, int64_t k, Recorder rec not None):
        """The consumer's work while batch ``k`` (-1: any batch) is not ready: claim, build
        and complete the next unclaimed batches while they are native, GIL released.

        Returns:
            Batches built.
        """
        cdef int64_t j, c
        cdef Py_ssize_t built = 0
        self._check(window)
        with nogil:
            while window._ready(k) < 0 and window._state.load() != STATE_CANCELLED:
                j = -1
                c = window._claimed.load()
                while c < window._published.load(memory_order_acquire) and self._native[c % self._size]:
                    if window._claimed.compare_exchange_weak(c, c + 1):
                        j = c
                        break
                if j < 0:
                    break
                self._run(j % self._size, rec)
                window._complete(j)
                built += 1
        return built
