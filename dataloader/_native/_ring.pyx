# cython: freethreading_compatible=True
# distutils: language = c++
"""Claim window and reorder ring: the synchronisation of one epoch.

Batches of an epoch are numbered ``k = 0, 1, 2, ...`` in epoch order.  Three
atomic counters describe the epoch (all monotonic)::

    base <= claimed <= published <= base + size

- ``published``: the consumer has stored the task of every batch ``k < published``
  in slot ``k % size`` (it draws indices from the sampler lazily, only as the
  window moves, and never publishes past ``base + size``);
- ``claimed``: workers claim the next published batch with a compare-and-swap,
  so each batch is claimed exactly once;
- ``base``: the lowest batch the consumer has not taken yet.

The reorder ring has ``size`` slots.  Slot ``k % size`` holds ``k`` once batch
``k``'s result is stored (``FREE`` before, ``TAKEN`` after an out-of-order take).
Every batch in flight lies in ``[base, base + size)``, so two batches never
share a slot and the ring never grows: at most ``size`` batches are being built
or wait.

Claims, completions and releases are lock-free atomics without the GIL.  A
mutex and two condition variables are used only to sleep: a worker when nothing
is claimable, the consumer when its batch is not ready.  Each side announces
that it sleeps with an atomic flag, so the other side pays for a notification
only when someone waits.  Waits run without the GIL in slices, so the consumer
can run Python's signal handlers (Ctrl-C) and honour a timeout.

The Python objects (tasks and results) live in lists owned by the caller, indexed
by slot; the release/acquire order of these counters publishes them.
"""

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int64_t
from libcpp.atomic cimport memory_order_acquire, memory_order_release

cdef enum:
    OPEN = 0
    FINISHED = 1
    CANCELLED = 2

# The ring's slot count is bounded so that allocating it can never overflow (the loader
# bounds its window far lower, at MAX_WINDOW_BATCHES).
cdef Py_ssize_t MAX_SLOTS = 1 << 30

# What a consumer wait returns when no batch is ready (ready batches are >= 0), and the
# "batch number" that means any ready batch (in_order=False).
cdef int64_t TIMED_OUT = -1
cdef int64_t WAS_CANCELLED = -2
cdef int64_t ANY = -1

cdef int64_t FREE = -1
cdef int64_t TAKEN = -2

# The consumer wakes at least this often to run signal handlers (microseconds).
cdef int64_t CONSUMER_SLICE_US = 50_000
# A sleeping worker re-checks the epoch at least this often (microseconds); a safety net
# only: publish, finish, cancel and a waiting consumer all wake workers explicitly.
cdef int64_t WORKER_SLICE_US = 1_000_000


cdef class Window:
    """The claim counter, window and reorder ring of one epoch.

    Args:
        size: number of slots (batches being built or waiting), >= 1; the loader
            uses ``num_workers + prefetch_depth``.

    Thread-safety: ``claim``, ``complete`` and ``leave`` may be called from any
    number of worker threads; ``publish``, ``finish``, ``wait``, ``wait_any`` and
    ``release`` from one consumer thread at a time; ``cancel`` from any thread.
    """

    def __cinit__(self, Py_ssize_t size):
        if size < 1:
            raise ValueError(f"{size=} must be >= 1")
        if size > MAX_SLOTS:
            raise ValueError(f"{size=} must be <= {MAX_SLOTS}")
        self._slots = dl_slots_new(size)
        if self._slots == NULL:
            raise MemoryError(f"cannot allocate a reorder ring of {size} slots")
        self._size = size
        self._wake_threshold = max(1, size // 2)
        self._claimed.store(0)
        self._published.store(0)
        self._base.store(0)
        self._state.store(OPEN)
        self._waiting_workers.store(0)
        self._consumer_waiting.store(0)
        self._active.store(0)

    def __dealloc__(self):
        if self._slots != NULL:
            dl_slots_free(self._slots)
            self._slots = NULL

    @property
    def size(self):
        """Number of slots in the ring (batches)."""
        return self._size

    @property
    def base(self):
        """Lowest batch number not yet taken by the consumer."""
        return self._base.load()

    @property
    def published(self):
        """Number of batches handed out to workers so far."""
        return self._published.load()

    @property
    def claimed(self):
        """Number of batches claimed by workers so far."""
        return self._claimed.load()

    @property
    def cancelled(self):
        """True once ``cancel()`` was called."""
        return self._state.load() == CANCELLED

    # -- consumer side ---------------------------------------------------------

    def publish(self):
        """Hand out the next batch; its task must already be in its slot.

        Returns:
            The batch number ``k`` just published (its slot is ``k % size``), or -1
            when the epoch was cancelled (by a ``cancel()`` from any thread).

        Raises:
            RuntimeError: the window is full (``published == base + size``) or the
                epoch was finished.
        """
        cdef int64_t p = self._published.load()
        cdef int state = self._state.load()
        if state == CANCELLED:
            return -1
        if state != OPEN:
            raise RuntimeError("cannot publish into a finished window")
        if p >= self._base.load() + self._size:
            raise RuntimeError(f"window full: {p=} base={self._base.load()} size={self._size}")
        self._published.store(p + 1, memory_order_release)
        # Wake a sleeping worker only once half the window is claimable: a worker that
        # outpaces the consumer then refills several slots per wake-up instead of paying
        # a wake-up per batch.  The consumer wakes workers itself before it sleeps
        # (_wake_workers_if_claimable), so a claimable batch never waits on a sleeper.
        if self._waiting_workers.load() > 0 and p + 1 - self._claimed.load() >= self._wake_threshold:
            with nogil:
                self._mutex.lock()
                self._work_ready.notify_one()
                self._mutex.unlock()
        return p

    def finish(self):
        """Say that no more batches will be published; idle workers then leave."""
        cdef int expected = OPEN
        self._state.compare_exchange_strong(expected, FINISHED)
        with nogil:
            self._notify_all()

    def cancel(self):
        """Stop the epoch: workers claim nothing more, waits return at once."""
        self._state.store(CANCELLED)
        with nogil:
            self._notify_all()

    def wait(self, int64_t k, double timeout_s=0.0):
        """Block until batch ``k``'s result is in its slot.

        The GIL is released while waiting; signal handlers run every 50 ms, so
        ``KeyboardInterrupt`` propagates.

        Args:
            k: batch number, ``base <= k < published``.
            timeout_s: seconds to wait at most; ``0`` waits without limit.

        Returns:
            1 when ready, 0 when ``timeout_s`` passed, -1 when the epoch was cancelled.
        """
        if k < self._base.load() or k >= self._published.load():
            raise ValueError(f"batch {k} is outside [{self._base.load()}, {self._published.load()})")
        cdef int64_t r = self._block(k, timeout_s)
        return 1 if r >= 0 else (0 if r == TIMED_OUT else -1)

    def wait_any(self, double timeout_s=0.0):
        """Block until some batch in the window has its result (completion order).

        Returns:
            The smallest ready batch number, -1 on timeout, -2 when cancelled.

        Raises:
            ValueError: no batch is published and not taken.
        """
        if self._base.load() >= self._published.load():
            raise ValueError("no batch in flight")
        return self._block(ANY, timeout_s)

    cdef int64_t _block(self, int64_t k, double timeout_s) except? -3:
        """Wait for batch ``k`` (or ``ANY``) in slices without the GIL, running signal
        handlers between slices; return the ready batch, TIMED_OUT or WAS_CANCELLED."""
        cdef int64_t deadline, now, slice_us, r
        r = self._ready(k)
        if r >= 0:
            return r
        deadline = dl_now_us() + <int64_t>(timeout_s * 1e6) if timeout_s > 0 else -1
        while True:
            slice_us = CONSUMER_SLICE_US
            if deadline >= 0:
                now = dl_now_us()
                if now >= deadline:
                    return TIMED_OUT
                slice_us = min(slice_us, deadline - now)
            with nogil:
                r = self._wait_ready(k, slice_us)
            if r != TIMED_OUT:
                return r
            PyErr_CheckSignals()

    def release(self, int64_t k):
        """Mark batch ``k`` as taken and move the window's base past taken slots.

        Raises:
            ValueError: ``k`` is not a ready batch in the window.
        """
        if k < self._base.load() or k >= self._published.load():
            raise ValueError(f"batch {k} is outside [{self._base.load()}, {self._published.load()})")
        if self._slots[k % self._size].load(memory_order_acquire) != k:
            raise ValueError(f"batch {k} is not ready")
        with nogil:
            self._release(k)

    # -- worker side -----------------------------------------------------------

    def claim(self):
        """Claim the next published batch, sleeping (GIL released) until one is.

        Returns:
            The batch number, or -1 when the epoch is finished and every batch is
            claimed, or cancelled.
        """
        cdef int64_t k
        with nogil:
            k = self._claim_blocking()
        return k

    def complete(self, int64_t k):
        """Publish batch ``k``'s result (already stored in slot ``k % size``)."""
        if k < 0 or k >= self._claimed.load():
            raise ValueError(f"batch {k} was never claimed")
        self._complete(k)

    def enter(self, int n=1):
        """Count ``n`` more workers as active in this epoch."""
        self._active.fetch_add(n)

    def leave(self):
        """A worker is done with this epoch (wakes ``wait_idle``)."""
        if self._active.fetch_sub(1) == 1:
            with nogil:
                self._mutex.lock()
                self._result_ready.notify_all()
                self._mutex.unlock()

    @property
    def active(self):
        """Workers counted as inside this epoch."""
        return self._active.load()

    def wait_idle(self, double timeout_s):
        """Wait (GIL released) until no worker is active; True if that happened in time."""
        cdef int64_t deadline = dl_now_us() + <int64_t>(timeout_s * 1e6)
        cdef int64_t now
        cdef bint idle
        while True:
            now = dl_now_us()
            with nogil:
                idle = self._wait_idle(min(CONSUMER_SLICE_US, max(deadline - now, 0)))
            if idle:
                return True
            if dl_now_us() >= deadline:
                return False

    # -- nogil internals -------------------------------------------------------

    cdef int64_t _try_claim(self) noexcept nogil:
        cdef int64_t c = self._claimed.load()
        while c < self._published.load(memory_order_acquire):
            if self._claimed.compare_exchange_weak(c, c + 1):
                return c
        return -1

    cdef int64_t _claim_blocking(self) noexcept nogil:
        cdef int64_t k
        cdef int state
        if self._state.load() == CANCELLED:
            return -1
        k = self._try_claim()
        if k >= 0:
            return k
        self._mutex.lock()
        self._waiting_workers.fetch_add(1)
        while True:
            state = self._state.load()
            if state == CANCELLED:
                k = -1
                break
            k = self._try_claim()
            if k >= 0:
                break
            if state == FINISHED:
                # Re-check after reading FINISHED: publish happens-before finish.
                k = self._try_claim()
                break
            dl_cond_wait_us(self._work_ready, self._mutex, WORKER_SLICE_US)
        self._waiting_workers.fetch_sub(1)
        self._mutex.unlock()
        return k

    cdef void _complete(self, int64_t k) noexcept nogil:
        self._slots[k % self._size].store(k, memory_order_release)
        if self._consumer_waiting.load() != 0:
            self._mutex.lock()
            self._result_ready.notify_all()
            self._mutex.unlock()

    cdef int64_t _ready(self, int64_t k) noexcept nogil:
        # Batch k if its result is in, else -1; with k == ANY, the smallest ready batch.
        cdef int64_t j, end
        if k != ANY:
            return k if self._slots[k % self._size].load(memory_order_acquire) == k else -1
        end = self._published.load(memory_order_acquire)
        for j in range(self._base.load(), end):
            if self._slots[j % self._size].load(memory_order_acquire) == j:
                return j
        return -1

    cdef int64_t _wait_ready(self, int64_t k, int64_t slice_us) noexcept nogil:
        # One slice of the consumer's sleep: the ready batch, TIMED_OUT or WAS_CANCELLED.
        cdef int64_t r
        cdef int64_t start = dl_now_us()
        cdef int64_t left
        self._mutex.lock()
        self._consumer_waiting.store(1)
        self._wake_workers_if_claimable()
        while True:
            r = self._ready(k)
            if r >= 0:
                break
            if self._state.load() == CANCELLED:
                r = WAS_CANCELLED
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
        # Called with the mutex held, by a consumer about to sleep.
        if self._waiting_workers.load() > 0 and self._claimed.load() < self._published.load():
            self._work_ready.notify_all()

    cdef void _notify_all(self) noexcept nogil:
        self._mutex.lock()
        self._work_ready.notify_all()
        self._result_ready.notify_all()
        self._mutex.unlock()

    cdef bint _wait_idle(self, int64_t slice_us) noexcept nogil:
        cdef bint idle
        self._mutex.lock()
        if self._active.load() > 0 and slice_us > 0:
            dl_cond_wait_us(self._result_ready, self._mutex, slice_us)
        idle = self._active.load() <= 0
        self._mutex.unlock()
        return idle
