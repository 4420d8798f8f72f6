"""Per-epoch statistics, always on: what ``DataLoader.stats`` returns.

Every thread that builds batches (each worker, or the consumer when
``num_workers=0``) owns one native ``Recorder`` and is its only writer; the
consumer owns the ``ConsumerRecorder`` (``dataloader._native._stats``: relaxed
atomics, no lock, no Python object allocated per batch).  A reader
(``EpochStats.snapshot``, any thread, any time) merges them into a frozen
``LoaderStats``; a snapshot taken mid-epoch may miss the batch being recorded.

Per batch, a builder makes three calls into its recorder (four with a separate
transform) and the consumer two; the measured cost is in docs/performance-notes.md
("Statistics", ``benchmarks/bench_stats.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Any

import numpy as np

from dataloader._engine.autotune import AutoTuner, EpochTune
from dataloader._native._stats import ConsumerRecorder, Recorder, now_ns

__all__ = ["STATS_SAMPLES", "EpochStats", "LoaderStats", "format_duration", "percentiles", "workers_text"]

# Batches per thread kept for the percentiles and the timeline (rounded up to whole pages of
# 1024): 16 bytes each, 512 KiB per thread at most, an epoch of 8 M rows at batch 256.
STATS_SAMPLES = 1 << 15


@dataclass(frozen=True)
class LoaderStats:
    """Statistics of one epoch (``DataLoader.stats``), a snapshot taken when read.

    Seconds are wall-clock (``time.perf_counter``), summed over threads where it
    says so.  With ``num_workers=0`` the consumer builds the batches itself: its
    builds are the one "worker", and ``wait_s`` is the time spent inside ``next()``.

    Attributes:
        epoch: the epoch number (0 for the first ``iter(loader)``).
        num_workers: worker threads of the epoch (0: built inside ``next()``); with
            ``num_workers="auto"`` the pool's threads.
        active_workers: the workers allowed to build when the snapshot was taken: equal to
            ``num_workers`` for a fixed count; with ``"auto"`` the count it runs (or settled)
            on, 0 meaning the consumer builds the batches itself (inline).
        elapsed_s: seconds from the start of the epoch (``iter(loader)``) to the last
            batch delivered (0 before the first).
        batches: batches (and errors) delivered by ``next()`` so far.
        built: batches built so far (also those not delivered yet), by the workers and by
            the consumer itself: inline (``num_workers=0``, ``"auto"`` with no active worker)
            and the native batches it builds while the one it needs is not ready.
        wait_s: seconds the consumer waited inside ``next()`` for its batch.
        fetch_s, transform_s, collate_s: seconds all building threads together (as for
            ``built``) spent fetching items (``__getitem__``/``__getitems__``, or iterating
            an ``IterableDataset``), running ``transform`` and running ``collate_fn``.  A
            native batch (of a dataset with ``__batch_rows__``, e.g. ``ArrayDataset``, built
            with no Python) counts as fetching.
            A transform run per item inside the fetch (a dataset without
            ``__getitems__``, or ``item_concurrency > 1``) counts as fetching.
        busy_s: ``fetch_s + transform_s + collate_s``.
        in_flight_min, in_flight_mean, in_flight_max: batches claimed by a worker and
            not yet taken (being built or ready), seen each time ``next()`` starts to
            wait; 0 for ``num_workers=0``; NaN before the first batch.
        latency_s: percentile (50, 90, 99, 100) -> seconds one batch took to build
            (fetch to end of collation), over the last ``STATS_SAMPLES`` batches of each
            worker; empty before the first batch.
        waits, builds: ``(start, end)`` seconds since the epoch started of the
            consumer's waits and of every worker's builds (float64 arrays of shape
            ``(n, 2)``; the last ``STATS_SAMPLES`` per thread), for timelines.
        failed, skipped, replaced: under ``on_error="skip"``/``"replace"``, items of the
            epoch's batches so far that failed (failed substitutes included; a batch refused by
            ``max_failures`` counted too), were
            dropped, were substituted (a resumed epoch's counts go on from the saved ones);
            0 under ``on_error="raise"``.
        hedges_sent, hedges_won: hedged requests (``HttpDataset``, ``ObjectStoreDataset``:
            ``dataloader.io.hedge``) sent since the epoch started, and those whose answer
            was the item's; 0 for a dataset without ``request_counts()``.  Counted by the
            dataset, so two loaders over one dataset at once see each other's.

    Thread-safety: immutable.
    """

    epoch: int
    num_workers: int
    active_workers: int
    elapsed_s: float
    batches: int
    built: int
    wait_s: float
    fetch_s: float
    transform_s: float
    collate_s: float
    in_flight_min: float
    in_flight_mean: float
    in_flight_max: float
    latency_s: dict[int, float]
    waits: np.ndarray = field(repr=False)
    builds: np.ndarray = field(repr=False)
    failed: int = 0
    skipped: int = 0
    replaced: int = 0
    hedges_sent: int = 0
    hedges_won: int = 0

    @property
    def busy_s(self) -> float:
        return self.fetch_s + self.transform_s + self.collate_s

    def table(self) -> str:
        """The statistics as a small text table (what ``python -m dataloader bench`` prints).

        "builders" are the threads that built batches: the workers, and the thread calling
        ``next()`` where it builds them (``num_workers=0``, inline ``"auto"``, native batches).
        """
        rows: list[tuple[str, str]] = [
            ("batches delivered", f"{self.batches:,} in {format_duration(self.elapsed_s)}"),
            ("worker threads", f"{self.num_workers} ({workers_text(self)})"),
            ("consumer waited", _share(self.wait_s, self.elapsed_s)),
            ("builders fetching", _share(self.fetch_s, self.elapsed_s)),
            ("builders transforming", _share(self.transform_s, self.elapsed_s)),
            ("builders collating", _share(self.collate_s, self.elapsed_s)),
            ("in flight min/mean/max", f"{self.in_flight_min:g} / {self.in_flight_mean:.2f} / {self.in_flight_max:g}"),
        ]
        if self.hedges_sent:
            rows.append(("hedged requests sent/won", f"{self.hedges_sent:,} / {self.hedges_won:,}"))
        if self.latency_s:
            lat = "  ".join(f"p{p} {v * 1e6:,.0f}" for p, v in self.latency_s.items())
            rows.append(("batch build time (us)", lat))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def _share(seconds: float, elapsed: float) -> str:
    pct = 100.0 * seconds / elapsed if elapsed > 0 else 0.0
    return f"{format_duration(seconds)} ({pct:.0f}% of wall)"


def workers_text(stats: LoaderStats) -> str:
    """Which threads built ``stats``'s batches: "2 active", or "none active: next() builds the
    batches" (``num_workers="auto"`` settled inline, or ``num_workers=0``)."""
    if stats.active_workers == 0:
        return "none active: next() builds the batches"
    return f"{stats.active_workers} active"


def format_duration(seconds: float) -> str:
    """``seconds`` with a unit that keeps three significant digits: 1.234 s, 12.3 ms, 412 us.

    A tiny file's epoch lasts well under a millisecond: in seconds it read "0.000 s".
    """
    if seconds == 0.0:
        return "0 s"
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    value, unit = (seconds * 1e3, "ms") if seconds >= 1e-3 else (seconds * 1e6, "us")
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:.{digits}f} {unit}"


class EpochStats:
    """The recorders of one epoch, merged into a ``LoaderStats`` on read.

    Args:
        epoch: the epoch number.
        num_workers: worker threads (0: one recorder, for the consumer's own builds).
        extra: one more recorder, last in ``workers``, for the batches the consumer
            builds itself (``num_workers="auto"`` with no active worker, native batches
            while the one it needs is not ready).
        tuner: ``num_workers="auto"``'s tuner, or None; the epoch's gate (``tune``, whose
            ``active`` the snapshots report) is taken from it here, on the consumer's recorder.
        inline: with ``tuner``, the consumer may build batches itself (0 active workers).
        requests: the dataset's ``request_counts`` (a remote dataset's hedges), or None;
            read here and at each snapshot, which reports the difference.

    Thread-safety: ``workers[w]`` is written by worker ``w`` only, ``consumer`` by the
    thread inside ``next()``; ``snapshot`` may be called from any thread.
    """

    __slots__ = ("epoch", "num_workers", "started", "workers", "consumer", "tune", "failures", "requests", "counted")

    def __init__(
        self, epoch: int, num_workers: int, extra: bool = False, tuner: AutoTuner | None = None, inline: bool = False,
        requests: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.epoch = epoch
        self.num_workers = num_workers
        self.started = now_ns()
        self.workers = [Recorder(STATS_SAMPLES) for _ in range(max(num_workers, 1) + extra)]
        self.consumer = ConsumerRecorder(STATS_SAMPLES)
        # num_workers="auto": the epoch's gate (its ``active``), else None.
        self.tune: EpochTune | None = tuner.for_epoch(self.consumer, inline) if tuner is not None else None
        self.failures: Any = None  # under an error policy: the epoch's failures.FailureLog
        self.requests = requests
        self.counted = requests() if requests is not None else {}  # the counts at the start

    def snapshot(self) -> LoaderStats:
        c = self.consumer
        delivered = c.count  # first: every batch delivered was built before
        fmin, fmax, fsum = c.flight
        builds = _intervals([r.intervals() for r in self.workers], self.started)
        latency: dict[int, float] = {}
        if len(builds):
            latency = percentiles(builds[:, 1] - builds[:, 0], (50, 90, 99, 100))
        last = c.last_ns
        return LoaderStats(
            epoch=self.epoch,
            num_workers=self.num_workers,
            active_workers=self.num_workers if self.tune is None else self.tune.active,
            elapsed_s=max(last - self.started, 0) / 1e9 if last else 0.0,
            batches=delivered,
            built=sum(r.batches for r in self.workers),
            wait_s=c.wait_ns / 1e9,
            fetch_s=sum(r.fetch_ns for r in self.workers) / 1e9,
            transform_s=sum(r.transform_ns for r in self.workers) / 1e9,
            collate_s=sum(r.collate_ns for r in self.workers) / 1e9,
            in_flight_min=fmin if delivered else math.nan,
            in_flight_mean=fsum / delivered if delivered else math.nan,
            in_flight_max=fmax if delivered else math.nan,
            latency_s=latency,
            waits=_intervals([c.intervals()], self.started),
            builds=builds,
            **_failure_counts(self.failures),
            **self._hedge_counts(),
        )

    def _hedge_counts(self) -> dict[str, int]:
        """``hedges_sent``, ``hedges_won`` since the epoch started (no ``requests``: none)."""
        if self.requests is None:
            return {}
        now = self.requests()
        return {k: now.get(k, 0) - self.counted.get(k, 0) for k in ("hedges_sent", "hedges_won")}


def _failure_counts(log: Any) -> dict[str, int]:
    """``failed``, ``skipped``, ``replaced`` of an epoch's ``FailureLog`` (none: zeros)."""
    if log is None:
        return {}
    counts = log.counts()
    return {"failed": counts["failed"], "skipped": counts["skipped"], "replaced": counts["replaced"]}


def percentiles(values: np.ndarray, ps: tuple[int, ...]) -> dict[int, float]:
    """``{p: numpy.percentile(values, p)}`` for each ``p`` of ``ps`` (0-100), linear method.

    Computed here from one sort: ``numpy.percentile``'s first call in a process imports
    ``numpy.ma`` (15-30 ms), which made the first read of ``loader.stats`` 50-100x a later one.
    ``values``: a non-empty 1-D float array.
    """
    ordered = np.sort(values)
    last = len(ordered) - 1
    out = {}
    for p in ps:
        pos = p / 100 * last
        lo = int(pos)
        hi = min(lo + 1, last)
        out[p] = float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))
    return out


def _intervals(flat: list[memoryview], origin_ns: int) -> np.ndarray:
    # Recorders' intervals (flat int64 start_ns, end_ns, ...) as seconds from origin_ns, (n, 2),
    # sorted by start.
    out = (np.concatenate([np.asarray(f, dtype=np.int64) for f in flat]).reshape(-1, 2) - origin_ns) / 1e9
    return out[np.argsort(out[:, 0], kind="stable")]
