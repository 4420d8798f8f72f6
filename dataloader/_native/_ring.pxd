# cython: freethreading_compatible=True
# Claim window + reorder ring (see _ring.pyx for the protocol).

from libc.stdint cimport int64_t
from libcpp.atomic cimport atomic


cdef extern from * nogil:
    """
    #include <atomic>
    #include <chrono>
    #include <condition_variable>
    #include <cstdint>
    #include <mutex>
    #include <new>

    static inline std::atomic<int64_t>* dl_slots_new(Py_ssize_t n) {
        std::atomic<int64_t>* p = new (std::nothrow) std::atomic<int64_t>[n];
        if (p) for (Py_ssize_t i = 0; i < n; ++i) p[i].store(-1);
        return p;
    }
    static inline void dl_slots_free(std::atomic<int64_t>* p) { delete[] p; }
    static inline std::atomic<int>* dl_ints_new(Py_ssize_t n) {
        std::atomic<int>* p = new (std::nothrow) std::atomic<int>[n];
        if (p) for (Py_ssize_t i = 0; i < n; ++i) p[i].store(0);
        return p;
    }
    static inline void dl_ints_free(std::atomic<int>* p) { delete[] p; }
    static inline std::condition_variable* dl_conds_new(Py_ssize_t n) {
        return new (std::nothrow) std::condition_variable[n];
    }
    static inline void dl_conds_free(std::condition_variable* p) { delete[] p; }

    /* Wait on cv for at most us microseconds; the caller holds m before and after. */
    static inline void dl_cond_wait_us(std::condition_variable& cv, std::mutex& m, int64_t us) {
        std::unique_lock<std::mutex> lk(m, std::adopt_lock);
        cv.wait_for(lk, std::chrono::microseconds(us));
        lk.release();
    }
    static inline int64_t dl_now_us(void) {
        return std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    """
    cppclass dl_mutex "std::mutex":
        void lock()
        void unlock()

    cppclass dl_cond "std::condition_variable":
        void notify_one()
        void notify_all()

    atomic[int64_t]* dl_slots_new(Py_ssize_t n)
    void dl_slots_free(atomic[int64_t]* p)
    atomic[int]* dl_ints_new(Py_ssize_t n)
    void dl_ints_free(atomic[int]* p)
    dl_cond* dl_conds_new(Py_ssize_t n)
    void dl_conds_free(dl_cond* p)
    void dl_cond_wait_us(dl_cond& cv, dl_mutex& m, int64_t us)
    int64_t dl_now_us()


cdef class Window:
    cdef int64_t _size
    cdef int _owners                   # 0: untagged; n: every batch is published for one worker < n
    cdef atomic[int64_t]* _slot_owner  # tagged: per slot, owner_tag(batch, worker it is for)
    cdef atomic[int64_t]* _cursors     # tagged: per worker, the next batch it has not looked at
    cdef atomic[int]* _owner_waiting   # tagged: per worker, 1 while it sleeps in claim()
    cdef dl_cond* _owner_ready         # tagged: per worker, woken by a publish for it
    cdef int64_t _wake_threshold      # claimable batches that justify waking a sleeping worker
    cdef atomic[int64_t] _claimed      # next batch number a worker may claim
    cdef atomic[int64_t] _published    # tasks [0, _published) have been handed out
    cdef atomic[int64_t] _base         # lowest batch number the consumer has not taken
    cdef atomic[int] _state            # OPEN, FINISHED or CANCELLED
    cdef atomic[int] _waiting_workers
    cdef atomic[int] _consumer_waiting
    cdef atomic[int] _active           # workers inside this epoch
    cdef atomic[int64_t]* _slots       # per slot: the batch number whose result is there, or FREE/TAKEN
    cdef dl_mutex _mutex
    cdef dl_cond _work_ready
    cdef dl_cond _result_ready

    cdef int64_t _try_claim(self) noexcept nogil
    cdef int64_t _claim_blocking(self) noexcept nogil
    cdef int64_t _try_claim_owned(self, int w) noexcept nogil
    cdef int64_t _claim_owned_blocking(self, int w) noexcept nogil
    cdef void _complete(self, int64_t k) noexcept nogil
    cdef int64_t _block(self, int64_t k, double timeout_s) except? -4
    cdef int64_t _ready(self, int64_t k) noexcept nogil
    cdef int64_t _wait_ready(self, int64_t k, int64_t slice_us) noexcept nogil
    cdef void _release(self, int64_t k) noexcept nogil
    cdef void _wake_workers_if_claimable(self) noexcept nogil
    cdef void _notify_all(self) noexcept nogil
    cdef bint _wait_idle(self, int64_t slice_us) noexcept nogil
