# Declarations of the per-thread recorders (``_stats.pyx``): cimported by the native
# row-gather jobs (``_rowjobs.pyx``), which record a batch built with no Python.

from libc.stdint cimport int64_t
from libcpp.atomic cimport atomic


cdef extern from * nogil:
    """
    #include <atomic>
    #include <chrono>
    #include <cstdint>
    #include <new>

    static inline int64_t dl_stats_now_ns(void) {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    static inline std::atomic<int64_t>* dl_stats_page_new(Py_ssize_t n) {
        std::atomic<int64_t>* p = new (std::nothrow) std::atomic<int64_t>[n];
        if (p) for (Py_ssize_t i = 0; i < n; ++i) p[i].store(-1, std::memory_order_relaxed);
        return p;
    }
    static inline void dl_stats_page_free(std::atomic<int64_t>* p) { delete[] p; }
    static inline std::atomic<std::atomic<int64_t>*>* dl_stats_dir_new(Py_ssize_t n) {
        auto* d = new (std::nothrow) std::atomic<std::atomic<int64_t>*>[n];
        if (d) for (Py_ssize_t i = 0; i < n; ++i) d[i].store(nullptr);
        return d;
    }
    static inline void dl_stats_dir_free(std::atomic<std::atomic<int64_t>*>* d, Py_ssize_t n) {
        if (!d) return;
        for (Py_ssize_t i = 0; i < n; ++i) delete[] d[i].load();
        delete[] d;
    }
    static inline std::atomic<int64_t>* dl_stats_dir_get(std::atomic<std::atomic<int64_t>*>* d, Py_ssize_t i) {
        return d[i].load(std::memory_order_acquire);
    }
    static inline void dl_stats_dir_set(std::atomic<std::atomic<int64_t>*>* d, Py_ssize_t i, std::atomic<int64_t>* p) {
        d[i].store(p, std::memory_order_release);
    }
    typedef std::atomic<std::atomic<int64_t>*> dl_stats_dir_t;
    """
    ctypedef struct dl_stats_dir_t:
        pass
    int64_t dl_stats_now_ns()
    atomic[int64_t]* dl_stats_page_new(Py_ssize_t n)
    void dl_stats_page_free(atomic[int64_t]* p)
    dl_stats_dir_t* dl_stats_dir_new(Py_ssize_t n)
    void dl_stats_dir_free(dl_stats_dir_t* d, Py_ssize_t n)
    atomic[int64_t]* dl_stats_dir_get(dl_stats_dir_t* d, Py_ssize_t i)
    void dl_stats_dir_set(dl_stats_dir_t* d, Py_ssize_t i, atomic[int64_t]* p)

# Intervals per page (2 int64 each: 16 KiB); pages are allocated as the epoch grows.
cdef enum:
    PAGE = 1024


cdef class _Intervals:
    cdef dl_stats_dir_t* _dir
    cdef Py_ssize_t _pages
    cdef Py_ssize_t _cap

    cdef bint _put(self, int64_t n, int64_t start, int64_t end) noexcept nogil
    cdef object _read(self, int64_t n)


cdef class Recorder:
    cdef atomic[int64_t] _batches
    cdef atomic[int64_t] _fetch_ns
    cdef atomic[int64_t] _transform_ns
    cdef atomic[int64_t] _collate_ns
    cdef int64_t _t0, _t1, _t2  # the owner's current batch
    cdef _Intervals _ring

    # One batch built from t0 to t1 (ns), all of it fetching; owner thread only, no GIL needed.
    cdef void record_fetch(self, int64_t t0, int64_t t1) noexcept nogil
    cdef void _done(self, int64_t t3) noexcept


cdef class ConsumerRecorder:
    cdef atomic[int64_t] _delivered
    cdef atomic[int64_t] _wait_ns
    cdef atomic[int64_t] _flight_min
    cdef atomic[int64_t] _flight_max
    cdef atomic[int64_t] _flight_sum
    cdef atomic[int64_t] _last_ns
    cdef int64_t _t0
    cdef _Intervals _ring
