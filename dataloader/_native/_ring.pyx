# cython: freethreading_compatible=True
# distutils: language = c++
"""Claim window and reorder ring: the synchronisation of one epoch.

The protocol (counters, owner-tagged claims, reorder ring, sleeping) is described in
``_window_core.pxd``, beside the declarations, and in docs/design.md.  Claims and waits
return a batch number (>= 0) or a ``_status.Status`` (negative); they never raise for
one: the engine does (``_status.pxd``: the raising rule).
"""

from cpython.exc cimport PyErr_CheckSignals
from libc.stdint cimport int64_t
from libcpp.atomic cimport memory_order_acquire, memory_order_relaxed, memory_order_release

from dataloader._native._status cimport CANCELLED, EMPTY, TIMED_OUT
from dataloader._native._window_core cimport *


cdef class Window(WindowCore):
    """The claim counter, window and reorder ring of one epoch.

    Args:
        size: number of slots (batches being built or waiting), >= 1; the loader
            uses ``num_workers + prefetch_depth`` (or ``num_workers * prefetch_factor``).
        owners: 0 for an untagged window (any worker claims any batch), or the
            number of workers ``n`` of a tagged one: every batch is then published
            for one worker ``0 <= w < n``, which alone claims it.
        cpus: CPUs the epoch's threads may use (0: the machine's); a thread spins before
            it sleeps only while the threads that want a core fit in them (``_ring.pxd``).

    Thread-safety: ``claim``, ``complete`` and ``leave`` may be called from any
    number of worker threads (in a tagged window, ``claim(w)`` from one thread per
    ``w``); ``publish``, ``finish``, ``wait``, ``wait_any`` and ``release`` from
    one consumer thread at a time; ``cancel`` from any thread.  Each method's
    arguments, returns and raises: ``_ring.pyi``; the protocol: ``_ring.pxd``.
    """

    @property
    def size(self):
        return self._size

    @property
    def owners(self):
        return self._owners

    @property
    def base(self):
        return self._base.load()

    @property
    def published(self):
        return self._published.load()

    @property
    def claimed(self):
        return self._claimed.load()

    @property
    def cancelled(self):
        return self._state.load() == STATE_CANCELLED

    @property
    def limit(self):
        """Workers ``0 .. limit - 1`` may run native batch jobs (``_rowjobs.RowJobs.work``);
        ``num_workers="auto"`` sets it with its count (by default: every worker)."""
        return self._limit.load()

    @limit.setter
    def limit(self, int value):
        if value < 0:
            raise ValueError(f"limit={value} must be >= 0")
        self._limit.store(value)

    # -- consumer side ---------------------------------------------------------

    def publish(self, int owner=ANY_OWNER):
        """Hand out the next batch; its task must already be in its slot."""
        cdef int64_t p = self._published.load()
        cdef int state = self._state.load()
        if state == STATE_CANCELLED:
            return CANCELLED
        if state != OPEN:
            raise RuntimeError("cannot publish into a finished window")
        if p >= self._base.load() + self._size:
            raise RuntimeError(f"window full: {p=} base={self._base.load()} size={self._size}")
        if self._owners == 0:
            if owner != ANY_OWNER:
                raise ValueError(f"{owner=}: an untagged window takes batches for any worker (-1)")
            self._published.store(p + 1, memory_order_release)
            dl_fence()  # the counter before the flag (a sleeping worker: the flag, then the counter)
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
        if owner < 0 or owner >= self._owners:
            raise ValueError(f"{owner=} must be in [0, {self._owners}) in a tagged window")
        self._slot_owner[p % self._size].store(owner_tag(p, owner), memory_order_relaxed)
        self._published.store(p + 1, memory_order_release)
        dl_fence()  # the counter before the flag (a sleeping worker: the flag, then the counter)
        if self._owner_waiting[owner].load() != 0:
            # Without releasing the GIL (3.11: a GIL hand-off per batch would cost more than
            # the wake-up): the mutex is only ever held briefly, by threads that do not
            # need the GIL to release it.
            self._mutex.lock()
            self._owner_ready[owner].notify_one()
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
        self._state.store(STATE_CANCELLED)
        with nogil:
            self._notify_all()

    def wait(self, int64_t k, double timeout_s=0.0):
        """Block until batch ``k``'s result is in its slot."""
        if k < self._base.load() or k >= self._published.load():
            raise ValueError(f"batch {k} is outside [{self._base.load()}, {self._published.load()})")
        return self._block(k, timeout_s)

    def wait_any(self, double timeout_s=0.0):
        """Block until some batch in the window has its result (completion order)."""
        if self._base.load() >= self._published.load():
            raise ValueError("no batch in flight")
        return self._block(ANY, timeout_s)

    cdef int64_t _block(self, int64_t k, double timeout_s) except? -99:
        """Wait for batch ``k`` (or ``ANY``) in slices without the GIL, running signal
        handlers between slices; return the ready batch, TIMED_OUT or CANCELLED."""
        cdef int64_t deadline, now, slice_us, r
        r = self._ready(k)
        if r >= 0:
            return r
        with nogil:
            r = self._spin_ready(k)
        if r != EMPTY:
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
        """Mark batch ``k`` as taken and move the window's base past taken slots."""
        if k < self._base.load() or k >= self._published.load():
            raise ValueError(f"batch {k} is outside [{self._base.load()}, {self._published.load()})")
        if self._slots[k % self._size].load(memory_order_acquire) != k:
            raise ValueError(f"batch {k} is not ready")
        with nogil:
            self._release(k)

    # -- worker side -----------------------------------------------------------

    def claim(self, int worker_id=ANY_OWNER):
        """Claim the next batch for ``worker_id``, sleeping (GIL released) until one is
        published."""
        cdef int64_t k
        if self._owners == 0:
            with nogil:
                k = self._claim_blocking(ANY_OWNER)
            return k
        if worker_id < 0 or worker_id >= self._owners:
            raise ValueError(f"{worker_id=} must be in [0, {self._owners}) in a tagged window")
        with nogil:
            k = self._claim_blocking(worker_id)
        return k

    def try_claim(self):
        """Claim the next published batch without waiting (untagged windows)."""
        if self._owners != 0:
            raise ValueError("try_claim() is for an untagged window")
        if self._state.load() == STATE_CANCELLED:
            return CANCELLED
        return self._try_claim()

    def complete(self, int64_t k):
        """Publish batch ``k``'s result (already stored in slot ``k % size``)."""
        if k < 0 or k >= self._published.load() or (self._owners == 0 and k >= self._claimed.load()):
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
            PyErr_CheckSignals()
