# cython: freethreading_compatible=True
# distutils: language = c++
"""The core of the claim window and reorder ring: allocation and the nogil internals.

The protocol (counters, owner-tagged claims, reorder ring, spinning and sleeping,
statuses) is described in ``_window_core.pxd``, beside the declarations.  ``Window``
(``_ring.pyx``) subclasses ``WindowCore`` with the Python-facing methods.
"""

from libc.stdint cimport int64_t
from libcpp.atomic cimport memory_order_acquire, memory_order_relaxed, memory_order_release

from dataloader._native._status cimport CANCELLED, EMPTY, END, TIMED_OUT


cdef class WindowCore:
    """State and nogil internals of ``_ring.Window`` (see there; not used alone)."""

    def __cinit__(self, Py_ssize_t size, int owners=0, int cpus=0):
        cdef int w
        if size < 1:
            raise ValueError(f"{size=} must be >= 1")
        if size > MAX_SLOTS:
            raise ValueError(f"{size=} must be <= {MAX_SLOTS}")
        if owners < 0 or owners > MAX_OWNERS:
            raise ValueError(f"{owners=} must be in [0, {MAX_OWNERS}]")
        self._slots = dl_slots_new(size)
        if self._slots == NULL:
            raise MemoryError(f"cannot allocate a reorder ring of {size} slots")
        self._size = size
        self._owners = owners
        if owners > 0:
            self._slot_owner = dl_slots_new(size)
            self._cursors = dl_slots_new(owners)
            self._owner_waiting = dl_ints_new(owners)
            self._owner_ready = dl_conds_new(owners)
            if (self._slot_owner == NULL or self._cursors == NULL or self._owner_waiting == NULL
                    or self._owner_ready == NULL):
                raise MemoryError(f"cannot allocate a window for {owners} owners")
            for w in range(owners):
                self._cursors[w].store(0)
        self._wake_threshold = max(1, size // 2)
        self._claimed.store(0)
        self._published.store(0)
        self._base.store(0)
        self._state.store(OPEN)
        self._waiting_workers.store(0)
        self._consumer_waiting.store(0)
        self._active.store(0)
        self._completed.store(0)
        self._limit.store(MAX_OWNERS)
        self._cpus = cpus if cpus > 0 else dl_hardware_cpus()
        self._consumer_spin_us.store(SPIN_START_US)
        self._worker_spin_us.store(SPIN_START_US)

    def __dealloc__(self):
        # delete[] of NULL is a no-op.
        dl_slots_free(self._slots)
        dl_slots_free(self._cursors)
        dl_slots_free(self._slot_owner)
        dl_ints_free(self._owner_waiting)
        dl_conds_free(self._owner_ready)

    # -- nogil internals -------------------------------------------------------

    cdef int64_t _try_claim(self) noexcept nogil:
        cdef int64_t c = self._claimed.load()
        while c < self._published.load(memory_order_acquire):
            if self._claimed.compare_exchange_weak(c, c + 1):
                return c
        return EMPTY

    cdef int64_t _try_claim_owned(self, int w) noexcept nogil:
        # Only worker w moves its cursor: the next batch it has not looked at yet.  Batches
        # below base are taken, so never w's unclaimed ones; a slot's tag names its batch
        # number too, so a slot reused for batch c + size is never mistaken for batch c.
        cdef int64_t c = max(self._cursors[w].load(memory_order_relaxed), self._base.load())
        cdef int64_t end = self._published.load(memory_order_acquire)
        while c < end:
            if self._slot_owner[c % self._size].load(memory_order_relaxed) == owner_tag(c, w):
                self._cursors[w].store(c + 1, memory_order_relaxed)
                self._claimed.fetch_add(1)
                return c
            c += 1
        self._cursors[w].store(c, memory_order_relaxed)
        return EMPTY

    cdef int64_t _claim_now(self, int w) noexcept nogil:
        # The next claimable batch for w (ANY_OWNER: untagged), or EMPTY: no waiting.
        return self._try_claim() if w == ANY_OWNER else self._try_claim_owned(w)

    cdef int64_t _claim_blocking(self, int w) noexcept nogil:
        # A batch claimed for w (ANY_OWNER in an untagged window), after spinning and then
        # sleeping on w's condition; END once the window is cancelled or finished.
        cdef int64_t k
        cdef int state
        cdef dl_cond* ready = &self._work_ready if w == ANY_OWNER else &self._owner_ready[w]
        if self._state.load() == STATE_CANCELLED:
            return END
        k = self._claim_now(w)
        if k >= 0:
            return k
        k = self._spin_claim(w)
        if k != EMPTY:
            return k
        self._mutex.lock()
        if w == ANY_OWNER:
            self._waiting_workers.fetch_add(1)
        else:
            self._owner_waiting[w].store(1)
        dl_fence()  # the flag before the re-check below (publish: the counter, then the flag)
        while True:
            state = self._state.load()
            if state == STATE_CANCELLED:
                k = END
                break
            k = self._claim_now(w)
            if k >= 0:
                break
            if state == FINISHED:
                # Re-check after reading FINISHED: publish happens-before finish.
                k = self._claim_now(w)
                break
            dl_cond_wait_us(ready[0], self._mutex, WORKER_SLICE_US)
        if w == ANY_OWNER:
            self._waiting_workers.fetch_sub(1)
        else:
            self._owner_waiting[w].store(0)
        self._mutex.unlock()
        return END if k < 0 else k

    cdef void _complete(self, int64_t k) noexcept nogil:
        self._completed.fetch_add(1, memory_order_relaxed)
        self._slots[k % self._size].store(k, memory_order_release)
        dl_fence()  # the result before the flag (_wait_ready: the flag, then the result)
        if self._consumer_waiting.load() != 0:
            self._mutex.lock()
            self._result_ready.notify_all()
            self._mutex.unlock()

    cdef int64_t _ready(self, int64_t k) noexcept nogil:
        # Batch k if its result is in, else EMPTY; with k == ANY, the smallest ready batch.
        cdef int64_t j, end
        if k != ANY:
            return k if self._slots[k % self._size].load(memory_order_acquire) == k else EMPTY
        end = self._published.load(memory_order_acquire)
        for j in range(self._base.load(), end):
            if self._slots[j % self._size].load(memory_order_acquire) == j:
                return j
        return EMPTY

    cdef int64_t _spin_ready(self, int64_t k) noexcept nogil:
        # The consumer's spin before it sleeps (SPIN_* in _ring.pxd): batch k (or ANY) once
        # ready, CANCELLED, or EMPTY when the budget ran out (the caller then sleeps).  Sleeping
        # workers with claimable batches are woken first: nothing else would wake them now.
        cdef int64_t budget = self._consumer_spin_us.load(memory_order_relaxed)
        cdef int64_t start, r
        if self._waiting_workers.load() > 0 and self._claimed.load() < self._published.load():
            self._mutex.lock()
            self._wake_workers_if_claimable()
            self._mutex.unlock()
        if self._claimed.load(memory_order_relaxed) - self._completed.load(memory_order_relaxed) + 1 > self._cpus:
            return EMPTY  # the builders need every core: sleep at once
        start = dl_now_us()
        while True:
            dl_yield()
            r = self._ready(k)
            if r >= 0:
                self._consumer_spin_us.store(min(<int64_t>SPIN_MAX_US, budget + budget // 2 + 1),
                                             memory_order_relaxed)
                return r
            if self._state.load() == STATE_CANCELLED:
                return CANCELLED
            if dl_now_us() - start >= budget:
                self._consumer_spin_us.store(max(<int64_t>SPIN_MIN_US, budget // 2), memory_order_relaxed)
                return EMPTY

    cdef int64_t _spin_claim(self, int w) noexcept nogil:
        # A worker's spin before it sleeps: a claimed batch, END (cancelled), or EMPTY when
        # the budget ran out or the window finished (the caller then takes the sleeping path,
        # which handles both).  ``w`` is ANY_OWNER in an untagged window.
        cdef int64_t budget = self._worker_spin_us.load(memory_order_relaxed)
        cdef int64_t start
        cdef int64_t k
        cdef int state
        cdef int64_t wanting = (self._claimed.load(memory_order_relaxed) - self._completed.load(memory_order_relaxed)
                                + (0 if self._consumer_waiting.load(memory_order_relaxed) else 1) + 1)
        if wanting > self._cpus:
            return EMPTY  # the builders and the consumer need every core: sleep at once
        start = dl_now_us()
        while True:
            dl_yield()
            k = self._claim_now(w)
            if k >= 0:
                self._worker_spin_us.store(min(<int64_t>SPIN_MAX_US, budget + budget // 2 + 1),
                                           memory_order_relaxed)
                return k
            state = self._state.load()
            if state == STATE_CANCELLED:
                return END
            if state == FINISHED or dl_now_us() - start >= budget:
                self._worker_spin_us.store(max(<int64_t>SPIN_MIN_US, budget // 2), memory_order_relaxed)
                return EMPTY

    cdef int64_t _wait_ready(self, int64_t k, int64_t slice_us) noexcept nogil:
        # One slice of the consumer's sleep: the ready batch, TIMED_OUT or CANCELLED.
        cdef int64_t r
        cdef int64_t start = dl_now_us()
        cdef int64_t left
        self._mutex.lock()
        self._consumer_waiting.store(1)
        dl_fence()  # the flag before the re-check below (_complete: the result, then the flag)
        self._wake_workers_if_claimable()
        while True:
            r = self._ready(k)
            if r >= 0:
                break
            if self._state.load() == STATE_CANCELLED:
                r = CANCELLED
                break
            left = slice_us - (dl_now_us() - start)
            if left <= 0:
                r = TIMED_OUT
                break
            dl_cond_wait_us(self._result_ready, self._mutex, left)
        self._consumer_waiting.store(0)
        self._mutex.unlock()
        return r

    cdef void _release(self, int64_t k) noexcept nogil:
        cdef int64_t b = self._base.load()
        cdef int64_t end = self._published.load()
        self._slots[k % self._size].store(TAKEN, memory_order_release)
        while b < end and self._slots[b % self._size].load(memory_order_acquire) == TAKEN:
            self._slots[b % self._size].store(FREE, memory_order_release)
            b += 1
        self._base.store(b, memory_order_release)

    cdef void _wake_workers_if_claimable(self) noexcept nogil:
        # Called with the mutex held, by a consumer about to sleep (an owner is woken by
        # publish itself, so only the untagged window needs this).
        if self._waiting_workers.load() > 0 and self._claimed.load() < self._published.load():
            self._work_ready.notify_all()

    cdef void _notify_all(self) noexcept nogil:
        cdef int w
        self._mutex.lock()
        self._work_ready.notify_all()
        self._result_ready.notify_all()
        for w in range(self._owners):
            self._owner_ready[w].notify_all()
        self._mutex.unlock()

    cdef bint _wait_idle(self, int64_t slice_us) noexcept nogil:
        cdef bint idle
        self._mutex.lock()
        if self._active.load() > 0 and slice_us > 0:
            dl_cond_wait_us(self._result_ready, self._mutex, slice_us)
        idle = self._active.load() <= 0
        self._mutex.unlock()
        return idle
