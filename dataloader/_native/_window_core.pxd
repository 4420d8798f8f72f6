# cython: freethreading_compatible=True
# The core of the claim window + reorder ring: its state, the protocol, and the nogil
# internals that run it (``_window_core.pyx``); ``_ring.pyx``'s ``Window`` adds the
# Python-facing methods.
#
# Claim window and reorder ring: the synchronisation of one epoch.
#
# Batches of an epoch are numbered ``k = 0, 1, 2, ...`` in epoch order.  Three
# atomic counters describe the epoch (all monotonic)::
#
#     base <= claimed <= published <= base + size
#
# - ``published``: the consumer has stored the task of every batch ``k < published``
#   in slot ``k % size`` (it draws indices from the sampler lazily, only as the
#   window moves, and never publishes past ``base + size``);
# - ``claimed``: workers claim the next published batch with a compare-and-swap,
#   so each batch is claimed exactly once (an *untagged* window);
#   in a window made with ``owners=n`` every batch is published for one worker
#   ``w < n`` (its owner) and only ``w`` claims it: ``w`` keeps its own cursor and
#   claims its batches in increasing order, without a compare-and-swap (one
#   thread per owner), and ``publish`` wakes that owner's own condition variable;
# - ``base``: the lowest batch the consumer has not taken yet.
#
# The reorder ring has ``size`` slots.  Slot ``k % size`` holds ``k`` once batch
# ``k``'s result is stored (``FREE`` before, ``TAKEN`` after an out-of-order take).
# Every batch in flight lies in ``[base, base + size)``, so two batches never
# share a slot and the ring never grows: at most ``size`` batches are being built
# or wait.
#
# Claims, completions and releases are lock-free atomics without the GIL.  A
# mutex and two condition variables are used only to sleep: a worker when nothing
# is claimable, the consumer when its batch is not ready.  Each side announces
# that it sleeps with an atomic flag, so the other side pays for a notification
# only when someone waits.  That is a store-then-load on each side (the sleeper sets
# its flag, then re-checks the counter; the other stores the counter, then reads the
# flag): both put a sequentially consistent fence (``dl_fence``) between the two, or
# each could read the other's old value (x86 lets a load pass an earlier store) and
# the sleeper would miss its wake-up until its slice ends.  Waits run without the GIL in slices, so the consumer
# can run Python's signal handlers (Ctrl-C) and honour a timeout.
#
# The Python objects (tasks and results) live in lists owned by the caller, indexed
# by slot; the release/acquire order of these counters publishes them.
#
# Statuses cross the boundary as ``_status.Status`` values (``END``, ``TIMED_OUT``,
# ``CANCELLED``, ``EMPTY``: all negative, so a batch number ``>= 0`` is never one); the
# nogil internals return ``EMPTY`` where nothing is ready or claimable yet.  The engine
# translates them in one place (``dataloader._engine.epoch``; see ``_status.pxd``).

from libc.stdint cimport int64_t
from libcpp.atomic cimport atomic

from dataloader._native._status cimport CANCELLED, EMPTY, END, TIMED_OUT


cdef extern from * nogil:
    """
    #include <atomic>
    #include <chrono>
    #include <condition_variable>
    #include <cstdint>
    #include <mutex>
    #include <new>
    #include <thread>

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
    /* A store before it is visible to every thread before any load after it (Dekker). */
    static inline void dl_fence(void) { std::atomic_thread_fence(std::memory_order_seq_cst); }
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
    /* Give the core to another runnable thread, if there is one (a spin step). */
    #ifdef DL_SPIN_PAUSE
    static inline void dl_yield(void) { for (int i = 0; i < 16; ++i) __builtin_ia32_pause(); }
    #else
    static inline void dl_yield(void) { std::this_thread::yield(); }
    #endif
    static inline int dl_hardware_cpus(void) {
        unsigned n = std::thread::hardware_concurrency();
        return n > 0 ? (int)n : 1;
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
    void dl_yield()
    void dl_fence()
    int dl_hardware_cpus()
    int64_t dl_now_us()


# Window states.
cdef enum:
    OPEN = 0
    FINISHED = 1
    STATE_CANCELLED = 2

cdef enum:
    # The ring's slot count is bounded so that allocating it can never overflow (the loader
    # bounds its window far lower, at MAX_WINDOW_BATCHES); workers a tagged window serves.
    MAX_SLOTS = 1 << 30
    MAX_OWNERS = 1 << 16
    # The "batch number" that means any ready batch (in_order=False), and "any worker".
    ANY = -1
    ANY_OWNER = -1
    # Per-slot sequence numbers before a result arrives and after an out-of-order take.
    FREE = -1
    TAKEN = -2
    # The consumer (and wait_idle) wakes at least this often to run signal handlers; a
    # sleeping worker re-checks at least this often (a safety net: publish, finish, cancel
    # and a waiting consumer all wake workers explicitly).  Microseconds.
    CONSUMER_SLICE_US = 50_000
    WORKER_SLICE_US = 1_000_000
    # Before it sleeps, a thread that finds nothing ready spins for a while, yielding its
    # core at every step (so a spinner never keeps a runnable thread off an oversubscribed
    # core), because on an idle machine waking a sleeping thread costs 10-20 µs (its core
    # sleeps too), more than a cheap batch.  Each side adapts its budget (µs): a spin that
    # found its batch raises it (by half, up to SPIN_MAX_US), one that ended in a sleep
    # halves it (down to SPIN_MIN_US): with batches that take long, a wait spins a few µs.
    # A thread spins only while the threads that want a core (the workers building, the
    # consumer unless it sleeps, and itself) fit in the CPUs given to the window: on a full
    # machine a spinner would take the core a builder needs, and waking costs little there.
    SPIN_MIN_US = 2
    SPIN_START_US = 16
    SPIN_MAX_US = 64


cdef inline int64_t owner_tag(int64_t k, int w) noexcept nogil:
    # What a tagged window stores per slot: the batch number and its owner (w < 2**16).
    return (k << 16) | w


cdef class WindowCore:
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
    cdef atomic[int64_t] _completed    # batches completed so far (claimed - completed: building)
    cdef atomic[int] _limit            # workers below it may run native jobs (num_workers="auto")
    cdef int _cpus                     # CPUs the epoch's threads may use (for the spin rule)
    cdef atomic[int64_t] _consumer_spin_us  # the consumer's spin budget before it sleeps
    cdef atomic[int64_t] _worker_spin_us    # the workers' (shared) spin budget before they sleep
    cdef atomic[int64_t]* _slots       # per slot: the batch number whose result is there, or FREE/TAKEN
    cdef dl_mutex _mutex
    cdef dl_cond _work_ready
    cdef dl_cond _result_ready

    cdef int64_t _try_claim(self) noexcept nogil
    cdef int64_t _try_claim_owned(self, int w) noexcept nogil
    cdef int64_t _claim_now(self, int w) noexcept nogil
    cdef int64_t _claim_blocking(self, int w) noexcept nogil
    cdef void _complete(self, int64_t k) noexcept nogil
    cdef int64_t _ready(self, int64_t k) noexcept nogil
    cdef int64_t _spin_ready(self, int64_t k) noexcept nogil
    cdef int64_t _spin_claim(self, int w) noexcept nogil
    cdef int64_t _wait_ready(self, int64_t k, int64_t slice_us) noexcept nogil
    cdef void _release(self, int64_t k) noexcept nogil
    cdef void _wake_workers_if_claimable(self) noexcept nogil
    cdef void _notify_all(self) noexcept nogil
    cdef bint _wait_idle(self, int64_t slice_us) noexcept nogil
