"""What worker threads see of an epoch (``Shared``), and their loop (``work``).

``Epoch`` (``dataloader._engine.epoch``) publishes work items into ``Shared.tasks`` and takes
results from ``Shared.results``; a worker holds the native ``Window`` and a weak reference to
``Shared`` only, and takes a strong one only while it builds one item.  Workers of an epoch
with native batch jobs (``_native/_rowjobs.pyx``) build those batches in ``RowJobs.work``,
without the GIL and without touching ``Shared``, and come back to Python for the others.
"""

from __future__ import annotations

import weakref
from typing import Any

from dataloader import _context
from dataloader._engine.autotune import EpochTune
from dataloader._engine.iterator import WorkSource
from dataloader._native._ring import Window
from dataloader._native._rowjobs import RowJobs
from dataloader._native._status import Status

__all__ = ["Result", "Shared", "work"]


class Result:
    """One slot's result, written by the thread that built it and cleared by the consumer.

    One object per slot, not one list of results: on free-threaded builds a store into a
    list locks the whole list, and the workers and the consumer storing into one list
    contended for that lock at every batch (its slow path parks the thread: 9% of the
    consumer's time with free items and 2 workers).  Two threads never store into one slot's
    object at once: the consumer clears it only after the batch was completed.
    """

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None


class Shared:
    """The part of an epoch that worker threads see, through a weak reference."""

    __slots__ = ("source", "size", "tasks", "results", "prepared", "infos", "tune", "jobs", "__weakref__")

    def __init__(
        self, source: WorkSource, size: int, num_workers: int, tune: EpochTune | None, jobs: RowJobs | None
    ) -> None:
        self.source: WorkSource | None = source
        self.tune = tune  # num_workers="auto": the gate before each claim (holds no epoch object)
        self.jobs = jobs  # native row-gather jobs (holds no epoch object either), or None
        self.size = size
        self.tasks: list[Any] = [None] * size
        self.results = [Result() for _ in range(size)]
        self.prepared: list[Any] = [None] * size  # per slot: the batch its native job fills
        self.infos: list[_context.WorkerInfo | None] = [None] * num_workers

    def clear(self) -> None:
        self.source = None
        for i in range(self.size):
            self.tasks[i] = self.prepared[i] = self.results[i].value = None
        self.infos = [None] * len(self.infos)


def work(window: Window, ref: weakref.ref[Shared], worker_id: int) -> None:
    """One worker's part of an epoch: start, then claim, build and complete items.

    Holds ``window`` and ``ref`` only while it sleeps in ``claim``; leaves when the
    window is finished or cancelled, or when the epoch was collected.
    """
    try:
        shared = ref()
        source = shared.source if shared is not None else None
        if shared is None or source is None:
            return
        shared.infos[worker_id] = source.start_worker(worker_id, window)
        tune, size, jobs = shared.tune, shared.size, shared.jobs
        native = source.native if jobs is not None else None
        rec = native.recorder(worker_id) if native is not None else None  # None: no native jobs here
        # An async epoch's workers claim batches ahead (async_build.work_ahead); not under
        # "auto"'s gate, which may withdraw a worker holding them.
        ahead = source.ahead_loop(worker_id) if tune is None else None
        del shared, source, native
        if ahead is not None:
            ahead(window, ref, worker_id)
        else:
            _claim_and_build(window, ref, worker_id, size, tune, jobs, rec)
    finally:
        # Drop every reference into the epoch before leave(): close() returns as soon as
        # the last worker leaves, and then nothing may hold the dataset.  The worker's own
        # objects (its stream) are dropped here, on its thread: on 3.13t an object is freed
        # promptly only by the thread that owns it.
        shared = ref()
        source = shared.source if shared is not None else None
        if source is not None:
            source.stop_worker(worker_id)
        shared = source = None
        _context.set_worker(None)
        _context.set_epoch_key(None)
        window.leave()


def _claim_and_build(
    window: Window, ref: weakref.ref[Shared], worker_id: int, size: int, tune: EpochTune | None,
    jobs: RowJobs | None, rec: Any,
) -> None:
    """``work``'s loop: claim a batch (or build native ones: ``jobs``), build it, complete it."""
    set_worker = _context.set_worker
    set_worker(None)
    claim, complete = window.claim, window.complete
    while tune is None or tune.admit(worker_id, window):
        if jobs is None or rec is None:
            k = claim(worker_id)
        else:
            # Builds native batches without the GIL; returns another batch, or Status.GATED when
            # "auto" withdrew this worker (window.limit, set with the gate's count).
            k = jobs.work(window, rec, worker_id if tune is not None else -1)
            if k == Status.GATED:
                continue
        if k < 0:
            return
        shared = ref()
        source = shared.source if shared is not None else None
        if shared is None or source is None:
            return
        slot = k % size
        # get_worker_info() is this worker's only while it builds: a sleeping worker holds
        # nothing of the epoch (its WorkerInfo holds the dataset).
        set_worker(shared.infos[worker_id])
        shared.results[slot].value = source.build(worker_id, shared.tasks[slot])
        set_worker(None)
        del shared, source
        complete(k)
