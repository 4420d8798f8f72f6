# cython: freethreading_compatible=True
# distutils: language = c++
"""Per-thread recorders behind ``DataLoader.stats``: one writer, any readers, no lock.

Each thread that builds batches owns one ``Recorder``; the consumer owns one
``ConsumerRecorder``.  Only the owner calls the recording methods; any thread
may read.  Every shared field is a ``std::atomic<int64_t>`` written with relaxed
stores and a release store of the batch count last, so a reader never sees a
torn value; it may miss the batch being recorded.  Times are nanoseconds of
``std::chrono::steady_clock`` (``now_ns``; on Linux ``CLOCK_MONOTONIC``, the
clock of ``time.perf_counter``).

Per batch the building thread makes three calls (``start``, ``fetched``,
``done``; ``transformed`` when a transform runs apart) and the consumer two
(``begin``, ``delivered``): each reads the clock and does a few relaxed atomic
adds, with no Python object allocated.  The last ``capacity`` intervals are kept
in a ring of pages of ``PAGE`` entries allocated as they are first needed.
"""

from libc.stdint cimport int64_t
from libcpp.atomic cimport atomic, memory_order_acquire, memory_order_relaxed, memory_order_release

# Intervals per page (PAGE, in _stats.pxd): 2 int64 each, 16 KiB; allocated as the epoch grows.
PAGE_INTERVALS = PAGE


def now_ns():
    """Nanoseconds of the recorders' clock (steady, monotonic)."""
    return dl_stats_now_ns()


cdef class _Intervals:
    """The last ``capacity`` ``(start_ns, end_ns)`` pairs of one writer (a ring of pages)."""

    def __cinit__(self, Py_ssize_t capacity):
        if capacity < 1:
            raise ValueError(f"{capacity=} must be >= 1")
        self._pages = (capacity + PAGE - 1) // PAGE
        self._cap = self._pages * PAGE
        self._dir = dl_stats_dir_new(self._pages)
        if self._dir == NULL:
            raise MemoryError(f"cannot allocate a directory of {self._pages} pages")

    def __dealloc__(self):
        dl_stats_dir_free(self._dir, self._pages)

    @property
    def capacity(self):
        """Pairs kept (``capacity`` rounded up to whole pages)."""
        return self._cap

    cdef bint _put(self, int64_t n, int64_t start, int64_t end) noexcept nogil:
        # The n-th pair (writer only): end = -1 first, so a reader never pairs two batches.
        cdef Py_ssize_t j = n % self._cap
        cdef atomic[int64_t]* page = dl_stats_dir_get(self._dir, j // PAGE)
        if page == NULL:
            page = dl_stats_page_new(2 * PAGE)
            if page == NULL:
                return False  # out of memory: the pair is not kept, the sums still are
            dl_stats_dir_set(self._dir, j // PAGE, page)
        j = 2 * (j % PAGE)
        page[j + 1].store(-1, memory_order_relaxed)
        page[j].store(start, memory_order_relaxed)
        page[j + 1].store(end, memory_order_release)
        return True

    cdef object _read(self, int64_t n):
        # The valid pairs of the last min(n, capacity) written (any thread), oldest first: a
        # flat int64 memoryview start_ns, end_ns, start_ns, ... (one pass in C, no object per pair).
        cdef Py_ssize_t count = min(n, self._cap)
        cdef Py_ssize_t i, j, m = 0
        cdef int64_t q, s, e, e2
        cdef atomic[int64_t]* page
        cdef bytearray buf = bytearray(16 * count)
        cdef int64_t* out = <int64_t*><char*>buf if count > 0 else NULL
        for q in range(n - count, n):  # oldest first: one writer's pairs come out in order
            i = q % self._cap
            page = dl_stats_dir_get(self._dir, i // PAGE)
            if page == NULL:
                continue
            j = 2 * (i % PAGE)
            e = page[j + 1].load(memory_order_acquire)
            s = page[j].load(memory_order_relaxed)
            e2 = page[j + 1].load(memory_order_acquire)
            if e >= s >= 0 and e == e2:
                out[2 * m] = s
                out[2 * m + 1] = e
                m += 1
        del buf[16 * m:]
        return memoryview(buf).cast("q")


cdef class Recorder:
    """Stage times and build intervals of one building thread.

    Args:
        capacity: build intervals kept (the last ones), >= 1.

    Thread-safety: ``start``, ``fetched``, ``transformed``, ``done`` and ``failed``
    from the owning thread only; everything else from any thread.
    """

    def __cinit__(self, Py_ssize_t capacity):
        self._ring = _Intervals(capacity)
        self._batches.store(0)
        self._fetch_ns.store(0)
        self._transform_ns.store(0)
        self._collate_ns.store(0)
        self._t0 = self._t1 = self._t2 = 0

    def start(self):
        """A batch starts (fetching)."""
        self._t0 = self._t1 = self._t2 = dl_stats_now_ns()

    def fetched(self):
        """Its items are fetched; transforming (if any) starts."""
        self._t1 = self._t2 = dl_stats_now_ns()

    def transformed(self):
        """Its items are transformed; collating starts."""
        self._t2 = dl_stats_now_ns()

    def failed(self):
        """The batch failed: everything since ``start`` counts as fetching."""
        self._t1 = self._t2 = dl_stats_now_ns()
        self._done(self._t2)

    def done(self):
        """The batch is collated."""
        self._done(dl_stats_now_ns())

    cdef void record_fetch(self, int64_t t0, int64_t t1) noexcept nogil:
        # A batch built with no Python (the native row-gather jobs, _rowjobs.pyx): all fetching.
        cdef int64_t n = self._batches.load(memory_order_relaxed)
        self._fetch_ns.fetch_add(t1 - t0, memory_order_relaxed)
        self._ring._put(n, t0, t1)
        self._batches.store(n + 1, memory_order_release)

    cdef void _done(self, int64_t t3) noexcept:
        cdef int64_t n = self._batches.load(memory_order_relaxed)
        self._fetch_ns.fetch_add(self._t1 - self._t0, memory_order_relaxed)
        self._transform_ns.fetch_add(self._t2 - self._t1, memory_order_relaxed)
        self._collate_ns.fetch_add(t3 - self._t2, memory_order_relaxed)
        self._ring._put(n, self._t0, t3)
        self._batches.store(n + 1, memory_order_release)

    @property
    def batches(self):
        return self._batches.load(memory_order_acquire)

    @property
    def fetch_ns(self):
        return self._fetch_ns.load(memory_order_relaxed)

    @property
    def transform_ns(self):
        return self._transform_ns.load(memory_order_relaxed)

    @property
    def collate_ns(self):
        return self._collate_ns.load(memory_order_relaxed)

    def intervals(self):
        """The kept build intervals, oldest first: a flat int64 memoryview
        ``start_ns, end_ns, start_ns, end_ns, ...`` (``numpy.asarray(...).reshape(-1, 2)``)."""
        return self._ring._read(self._batches.load(memory_order_acquire))


cdef class ConsumerRecorder:
    """What the consumer records per ``next()``: its wait and the batches in flight.

    Args:
        capacity: wait intervals kept (the last ones), >= 1.

    Thread-safety: ``begin`` and ``delivered`` from the consumer only (one
    ``next()`` at a time); everything else from any thread.
    """

    def __cinit__(self, Py_ssize_t capacity):
        self._ring = _Intervals(capacity)
        self._delivered.store(0)
        self._wait_ns.store(0)
        self._flight_min.store(0)
        self._flight_max.store(0)
        self._flight_sum.store(0)
        self._last_ns.store(0)
        self._t0 = 0

    def begin(self):
        """``next()`` starts waiting for its batch."""
        self._t0 = dl_stats_now_ns()

    def delivered(self, int64_t in_flight):
        """``next()`` got its batch; ``in_flight`` batches were claimed and not taken."""
        cdef int64_t t1 = dl_stats_now_ns()
        cdef int64_t n = self._delivered.load(memory_order_relaxed)
        self._wait_ns.fetch_add(t1 - self._t0, memory_order_relaxed)
        if n == 0 or in_flight < self._flight_min.load(memory_order_relaxed):
            self._flight_min.store(in_flight, memory_order_relaxed)
        if in_flight > self._flight_max.load(memory_order_relaxed):
            self._flight_max.store(in_flight, memory_order_relaxed)
        self._flight_sum.fetch_add(in_flight, memory_order_relaxed)
        self._last_ns.store(t1, memory_order_relaxed)
        self._ring._put(n, self._t0, t1)
        self._delivered.store(n + 1, memory_order_release)

    @property
    def count(self):
        """Batches delivered."""
        return self._delivered.load(memory_order_acquire)

    @property
    def wait_ns(self):
        return self._wait_ns.load(memory_order_relaxed)

    @property
    def flight(self):
        """``(min, max, sum)`` of the in-flight counts seen."""
        return (self._flight_min.load(memory_order_relaxed), self._flight_max.load(memory_order_relaxed),
                self._flight_sum.load(memory_order_relaxed))

    @property
    def last_ns(self):
        """When the last batch was delivered (``now_ns``), 0 before the first."""
        return self._last_ns.load(memory_order_relaxed)

    def intervals(self):
        """The kept wait intervals, oldest first: a flat int64 memoryview
        ``start_ns, end_ns, ...`` as ``Recorder.intervals``."""
        return self._ring._read(self._delivered.load(memory_order_acquire))
