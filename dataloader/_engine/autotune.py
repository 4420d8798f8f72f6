"""``num_workers="auto"``: the loader picks its worker count while it runs.

The loader's pool has ``cap`` threads (``auto_max_workers()``: the CPUs this
process may use, at most ``AUTO_MAX_WORKERS``), but only the first ``active``
may claim batches; the others wait at a gate before each claim (a condition
variable, in ``WAIT_SLICE_S`` slices that re-check for a cancelled epoch).
Which thread builds a batch never changes the batch, so outputs are
bit-identical to any fixed ``num_workers`` (map-style datasets only: the
batches of an ``IterableDataset`` depend on how many workers shard it, so
``"auto"`` is refused there).

Rules, applied by the consumer thread every ``AUTO_PERIOD_S`` seconds (and at
least ``AUTO_MIN_BATCHES`` batches) of an epoch, from its own statistics:

1. start with no active worker, the consumer building each batch inside
   ``next()`` as with ``num_workers=0`` ("inline"; only without a
   ``worker_init_fn``, which inline batches would not run, without a ``timeout``,
   which a batch built inside ``next()`` cannot have, and not for an
   ``AsyncDataset``; else one worker), or with the count an earlier epoch settled on;
2. an epoch's first period starts at its first batch (the wait for it is the
   epoch's start-up: the sampler's first draw, an empty pipeline; not a rate), and
   the period after a change is skipped (the new worker ramps up);
3. a period's throughput (batches/s) that beats the best seen by more than
   ``AUTO_GAIN`` (5%) becomes the best; then, if the consumer waited more than
   ``AUTO_STARVED`` (5%) of the period (always, inline: building is the consumer's
   wait) and fewer than ``cap`` workers are active, one more worker is admitted;
   otherwise the count is settled;
4. a period that does not beat the best by ``AUTO_GAIN`` settles on the best
   count (the last worker added did not help and is withdrawn), except that one
   worker that does not beat inline building is followed by two while the
   consumer waits (one worker builds no faster than the consumer itself).

An epoch that ends before the probe settles hands it on: the next epoch starts
with the count and the best throughput reached so far.  An epoch too short in
batches to complete a period (fewer than ``1 + AUTO_MIN_BATCHES``) whose batches
after the first still took a period measures them as its one period (slow
batches: 4 of 40 ms); one a period long with nothing to measure (one batch, or
the later ones were ready at once) settles the count it ran with.  An epoch that
runs to its end before one period is over settles the count at once: inline where that
is allowed (the epoch is too short for threads to pay for their start and stop:
an 8-batch epoch of cheap batches took 0.35 ms with 2 workers against 0.22 ms
with none), else the count it ran with.  Once settled, the
loader keeps the count for its later epochs (no new probing).
Cheap batches on few cores can be fastest inline: a hand-off to a thread costs
more than the batch (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from dataloader._constants import DEFAULT_PREFETCH_DEPTH, WAIT_SLICE_S
from dataloader._native._stats import ConsumerRecorder

__all__ = ["AUTO_MAX_WORKERS", "AutoTuner", "EpochTune", "auto_max_workers", "resolve_auto", "usable_cpus"]

# Workers "auto" may use at most (also bounded by the CPUs this process may use): beyond 16,
# a map-style batch hand-off through one consumer thread is the limit in every workload measured.
AUTO_MAX_WORKERS = 16
# A measuring period: long enough that scheduling noise is small against it, short enough that
# the probe (inline, skip, 1, skip, 2) settles within a 60 ms epoch of cheap batches (W1 of
# docs/performance-notes.md: with 25 ms it took three epochs there, and "auto" reached 0.82x the best
# fixed count instead of 0.94x).
AUTO_PERIOD_S = 0.01
AUTO_MIN_BATCHES = 4
AUTO_GAIN = 1.05  # a new worker must raise throughput by 5% to stay
AUTO_STARVED = 0.05  # the consumer waiting over 5% of a period asks for another worker


def usable_cpus() -> int:
    """CPUs this process may use (its affinity where the OS has one), at least 1."""
    count = getattr(os, "process_cpu_count", None)  # 3.13+
    if count is not None:
        cpus = count()
    elif hasattr(os, "sched_getaffinity"):
        cpus = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count()
    return max(1, cpus or 1)


def auto_max_workers() -> int:
    """The most workers ``num_workers="auto"`` uses: CPUs this process may use, capped."""
    return min(usable_cpus(), AUTO_MAX_WORKERS)


class AutoTuner:
    """A loader's worker count under ``"auto"``, kept across its epochs.

    Args:
        cap: threads of the pool (the most that may be active).

    Thread-safety: any thread (epochs may run concurrently on their own pools).
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._lock = threading.Lock()
        self._active = -1  # not chosen yet: the first epoch starts inline (0) or with 1
        self._settled = False
        # The probe so far (an epoch may end before it settles: the next one goes on from here).
        self._best: int | None = None
        self._best_rate = 0.0

    @property
    def active(self) -> int:
        """Workers the next epoch starts with (where inline building is allowed); 0 is inline."""
        return max(self._active, 0)

    @property
    def settled(self) -> bool:
        """True once the count is chosen (later epochs do not probe)."""
        return self._settled

    def for_epoch(self, consumer: ConsumerRecorder, inline: bool) -> EpochTune:
        """The gate of one epoch; ``inline``: the consumer may build batches itself (0 active)."""
        with self._lock:
            active = self._active if self._active >= 0 else 0
            best, rate = self._best, self._best_rate
            if not inline:
                active = max(active, 1)
                if best == 0:
                    best, rate = None, 0.0
            return EpochTune(self, active, self._settled, consumer, best, rate, inline)

    def _progress(self, active: int, best: int, best_rate: float) -> None:
        """Where an epoch's probe stands (the next epoch starts from it)."""
        with self._lock:
            if not self._settled:
                self._active, self._best, self._best_rate = active, best, best_rate

    def _short_epoch(self, active: int, inline: bool) -> None:
        # An epoch ran to its end within its first period (EpochTune.finished).
        self._settle(0 if inline else max(active, 1))

    def _settle(self, active: int) -> None:
        with self._lock:
            if not self._settled:
                self._active, self._settled = active, True


class EpochTune:
    """One epoch's gate and probe (see the module docstring for the rules).

    Thread-safety: ``admit`` from worker threads; ``tick`` from the consumer only;
    ``wake`` from any thread.
    """

    __slots__ = ("active", "window", "_tuner", "_cond", "_done", "_consumer", "_start", "_t0", "_n0", "_w0", "_next",
                 "_skip", "_best", "_best_rate", "_periods", "_inline")

    def __init__(
        self, tuner: AutoTuner, active: int, settled: bool, consumer: ConsumerRecorder,
        best: int | None = None, best_rate: float = 0.0, inline: bool = False,
    ) -> None:
        self.active = active  # workers 0 .. active-1 may claim (0: inline); read without the lock
        # The epoch's window, once it has one (Epoch): its ``limit`` follows ``active``, for
        # the workers in the native batch loop (_rowjobs.RowJobs.work), which never take the gate.
        self.window: Any = None
        self._tuner = tuner
        self._cond = threading.Condition(threading.Lock())
        self._done = settled
        self._consumer = consumer
        self._start = self._t0 = time.perf_counter()  # the epoch's start
        self._n0 = 0
        self._w0 = 0
        self._next = 1  # the first batch starts the first period (tick)
        self._skip = False  # the period after a change is not measured (the new worker ramps up)
        self._best = active if best is None else best
        self._best_rate = best_rate
        self._periods = 0  # periods measured in this epoch
        self._inline = inline  # the consumer may build batches itself

    def admit(self, worker_id: int, window: Any) -> bool:
        """Wait until ``worker_id`` may claim; False when the epoch was cancelled meanwhile."""
        if worker_id < self.active:
            return True
        with self._cond:
            while worker_id >= self.active and not window.cancelled:
                self._cond.wait(WAIT_SLICE_S)
        return not window.cancelled

    def wake(self, timeout_s: float = -1.0) -> None:
        """Wake every gated worker (the epoch is closing: they find it cancelled).

        ``timeout_s``: the most seconds to wait for the gate's lock (-1: no limit; 0: only
        if it is free), for a finalizer, which may run on a thread that holds it: a worker
        not woken finds the window cancelled at the end of its ``WAIT_SLICE_S`` wait.
        """
        if self._cond.acquire(timeout=timeout_s):
            try:
                self._cond.notify_all()
            finally:
                self._cond.release()

    def tick(self, delivered: int) -> None:
        """The consumer delivered its ``delivered``-th batch: decide at the end of a period."""
        if self._done or delivered < self._next:
            return
        now = time.perf_counter()
        if delivered == 1:
            # The epoch's first period starts at its first batch, not at its start: the time to
            # a first batch (an empty pipeline, the sampler's first draw) is no worker count's
            # throughput (W4 in docs/performance-notes.md, 3.11: a second epoch's 2 workers measured
            # from the start ran 38 batches/s against inline's 39 and settled inline, 0.66x).
            self._t0, self._n0, self._w0, self._next = now, 1, self._consumer.wait_ns, 1 + AUTO_MIN_BATCHES
            return
        seconds = now - self._t0
        if seconds < AUTO_PERIOD_S or seconds <= 0.0:
            self._next = delivered + AUTO_MIN_BATCHES
            return
        self._measure(delivered, now, seconds)

    def _measure(self, delivered: int, now: float, seconds: float) -> None:
        # The end of a period of ``seconds`` (from self._t0 to ``now``): rules 3 and 4.
        self._periods += 1
        wait_ns = self._consumer.wait_ns
        rate = (delivered - self._n0) / seconds
        starved = (wait_ns - self._w0) / 1e9 / seconds > AUTO_STARVED
        self._t0, self._n0, self._w0, self._next = now, delivered, wait_ns, delivered + AUTO_MIN_BATCHES
        if self._skip:
            self._skip = False
            return
        if rate > self._best_rate * AUTO_GAIN:
            self._best, self._best_rate = self.active, rate
            if (starved or self.active == 0) and self.active < self._tuner.cap:
                self._set(self.active + 1)
                self._skip = True
                return
        elif self.active == 1 and self._best == 0 and starved and self._tuner.cap > 1:
            # One worker only overlaps building with the consumer's own work, which inline
            # building does not: two are the first count that builds in parallel.
            self._set(2)
            self._skip = True
            return
        self._set(self._best)
        self._done = True
        self._tuner._settle(self._best)

    def bind(self, window: Any) -> None:
        """The epoch's window: its ``limit`` is ``active`` from now on (the consumer's thread)."""
        self.window = window
        window.limit = self.active

    def finished(self) -> None:
        """The epoch ran to its end (consumer): one shorter than a period settles the count.

        One that measured no period for want of batches (fewer than ``1 + AUTO_MIN_BATCHES``)
        but lasted a period from its first batch on measures its later batches as its period:
        4 batches of 40 ms are no epoch "too short for threads".  One a period long with
        nothing to measure (one batch, or the later ones were ready at once) settles the
        count it ran with.
        """
        if self._done or self._periods > 0:
            return
        delivered, now = self._consumer.count, time.perf_counter()
        if self._n0 >= 1 and delivered > self._n0 and now - self._t0 >= AUTO_PERIOD_S:
            self._measure(delivered, now, now - self._t0)
            return
        self._done = True
        if now - self._start < AUTO_PERIOD_S:
            self._tuner._short_epoch(self.active, self._inline)
        else:  # a period long, nothing to measure (one batch; or the others came at once)
            self._tuner._settle(self.active)

    def _set(self, active: int) -> None:
        with self._cond:
            self.active = active
            if self.window is not None:
                self.window.limit = active
            self._cond.notify_all()
        self._tuner._progress(active, self._best, self._best_rate)


def resolve_auto(num_workers: Any, prefetch_depth: Any, iterable: bool) -> tuple[Any, Any, AutoTuner | None]:
    """``(num_workers, prefetch_depth, tuner)`` with ``"auto"`` resolved to numbers.

    ``num_workers="auto"`` becomes a pool of ``auto_max_workers()`` threads and a
    tuner; ``prefetch_depth="auto"`` becomes ``max(DEFAULT_PREFETCH_DEPTH, pool
    size)`` (a window of about two batches per thread, PyTorch's ``prefetch_factor=2``).
    Other values pass through unchanged (``LoaderOptions`` validates them).

    Raises:
        ValueError: another string, or ``"auto"`` workers for an ``IterableDataset``.
        TypeError: a float ``num_workers`` (naming ``'auto'`` beside ints).
    """
    tuner = None
    if isinstance(num_workers, float):  # LoaderOptions would say "must be an int" without 'auto'
        raise TypeError(f"num_workers must be an int >= 0 or 'auto', got float {num_workers!r}")
    if isinstance(num_workers, str):
        if num_workers != "auto":
            raise ValueError(f"num_workers must be an int >= 0 or 'auto', got {num_workers!r}")
        if iterable:
            raise ValueError(
                "num_workers='auto' needs a map-style dataset: the batches of an IterableDataset "
                "depend on how many workers shard it; pass an int"
            )
        tuner = AutoTuner(auto_max_workers())
        num_workers = tuner.cap
    if isinstance(prefetch_depth, str):
        if prefetch_depth != "auto":
            raise ValueError(f"prefetch_depth must be an int >= 0 or 'auto', got {prefetch_depth!r}")
        workers = num_workers if isinstance(num_workers, int) else 0
        prefetch_depth = max(DEFAULT_PREFETCH_DEPTH, workers)
    return num_workers, prefetch_depth, tuner
