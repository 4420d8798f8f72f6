"""Exact mid-epoch resume: ``DataLoader.state_dict`` / ``load_state_dict`` (torchdata's names).

What a loader's state holds (a small JSON-serialisable dict, ``STATE_VERSION`` 2; each
``state_dict()`` returns a new dict that shares nothing with the loader, its sampler or its
dataset):

- ``"version"``: the format version (2; version-1 states, without ``"loader"``, still load);
- ``"seed"``: the loader's base seed (loading it replaces the new loader's seed);
- ``"epoch"``: the epoch being iterated (or the next one, at an epoch boundary);
- ``"yielded"``: batches of that epoch already returned by ``next()``, *at the consumer*: an
  exception raised by ``next()`` for a batch counts as a position seen (but ``TooManyFailures``:
  the batch it refused is built again after resume), but an interrupt
  (``errors.INTERRUPTS``: Ctrl-C, ``sys.exit()``) does not, wherever it was raised (the
  sampler, ``__getitem__``, a transform, ``collate_fn``, a wait for workers): the batch being
  built is built again after resume; batches the workers had built ahead (prefetched) but
  ``next()`` had not returned are not counted either, so they are built again after resume:
  never lost, never repeated;
- ``"sampler"``: the (batch) sampler's ``state_dict()`` as it was when that epoch started
  (None when it has none; see ``dataloader._sampling.state``);
- ``"dataset"``: the dataset's ``state_dict()`` at the time of the call (None when it has
  none); for an ``IterableDataset`` iterated mid-epoch, its state at the consumer's
  position (below); for an ``IterableDataset`` at an epoch's start (a fresh loader, an ended
  epoch, ``iter()`` before the first batch is built), None: the epoch starts as
  ``iter(dataset)`` starts it (a stream's ``state_dict()`` there may be where its last
  iteration ended, which would resume an empty epoch), unless the epoch starts from a state
  loaded into the loader (then the dataset's ``state_dict()``, the loaded position);
- ``"failures"`` (only mid-epoch under ``on_error="skip"``/``"replace"``): the epoch's failure
  counts at the position, ``{"seen", "failed", "skipped", "replaced"}`` (``failures.FailureLog``),
  which the resumed epoch starts from (its records are not saved);
- ``"loader"``: how this loader cuts its epochs (dataset length, batch size, ``drop_last``,
  sampler kinds, world size and rank of a distributed sampler), which ``load_state_dict``
  checks against the new loader (``dataloader._engine.resume_checks``);
- ``"elastic"`` (optional on load; None when the loader's sampler is not a built-in
  ``DistributedSampler`` / ``ShardSampler``): what a resume on another number of ranks needs:
  ``"sampler"`` (its class name), ``"world_size"`` and ``"rank"`` at save time, the sampler's
  ``"n"``, ``"seed"``, ``"shuffle"``, ``"drop_last"``, this rank's share of the epoch
  (``"samples"``), the samples of it consumed (``"consumed"``) and the epoch's global position
  (``"position"``: samples of the global order consumed by all ranks together if every rank is
  at this ``yielded``; ``consumed * world_size`` for ``DistributedSampler``).  Recomputed at each
  save; ``dataloader._engine.elastic`` says how ``load_state_dict`` uses it.  In an epoch that
  was itself resumed elastically, the sampler's state (``"sampler"``) holds the cuts made so
  far (``"elastic"``, ``dataloader._sampling.elastic``).

``load_state_dict`` also takes a state saved at another world size (one state: all old ranks
stopped at the same step) or the list of all old ranks' states (ranks at different steps):
``dataloader._engine.elastic`` turns it into this rank's start of the epoch's remainder.

Editing a saved state (docs/usage.md, "Seek and early start"): the dict is plain JSON
(``json.loads(json.dumps(sd)) == sd``; under 1 KiB with the built-in samplers).  ``"epoch"``
and ``"yielded"`` may be edited (``0 <= yielded <= `` the epoch's batches): loading the
edited state is ``DataLoader.seek(epoch, yielded)`` (``dataloader._engine.seek``), except
that a sampler passed by the user keeps its own epoch counter in ``"sampler"`` (a built-in
one's ``{"start": 0, "epoch": e, ...}``, under ``BatchSampler``'s ``{"sampler": ...,
"start": 0}``): edit its ``"epoch"`` too (the loader's own ``RandomSampler`` takes the
top-level one).  ``"seed"`` may be edited (another run's order); ``"start"`` is written by
the loader from ``"yielded"``; ``"loader"`` and ``"version"`` must stay as saved.
``"elastic"`` is written again by every ``state_dict()`` (an elastic resume counts each old
rank from its ``"yielded"``, so an edited ``"yielded"`` is a seek there too); the sampler
state's ``"elastic"`` cuts, in a resized epoch, must stay as saved.

The states kept are copies (``copy.deepcopy``): the sampler's state at the epoch's start,
the dataset's state after each batch of a stream, and every state loaded; a state object
may be the dataset's live dict, which its iterator goes on mutating.

Nothing is recorded per batch: each epoch iterator counts the batches it returns in a
``Progress`` (one integer increment per ``next()``) and the loader keeps the ``Progress`` of
the epoch it started last, and the sampler state of that epoch's start (one ``state_dict()``
call per epoch).  ``state_dict()`` is therefore O(1) in the epoch's length.

How the next ``iter(loader)`` resumes epoch ``e`` at batch ``k``: the epoch number is ``e``
(so worker seeds and ``item_rng`` are that epoch's); a built-in (batch) sampler loads its
epoch-start state with ``start = k`` and starts there in O(1)
(``dataloader._sampling.state``); any other sampler with ``load_state_dict`` loads its saved
state, and its first ``k`` index batches are drawn and dropped (the cost of drawing them, no
item is fetched); a sampler without ``state_dict`` must itself repeat the epoch's order (a
seeded sampler driven by ``set_epoch``), and its first ``k`` batches are drawn and dropped too.

``IterableDataset``: with ``num_workers=0`` the consumer iterates the dataset itself; its
``state_dict()`` is snapshotted after each batch ``next()`` builds (``stream_state.
StreamSnapshots``: exact also after a Ctrl-C in the middle of a batch), saved, loaded, and
the stream goes on from it (nothing is skipped); a dataset without ``state_dict`` is resumed
by building and dropping the first ``k`` batches of the new epoch (its items are read again).  With
``num_workers > 0`` each worker iterates its own copy ahead of the consumer: a dataset with
``state_dict`` / ``load_state_dict`` is resumed per worker (``"dataset"`` is then
``{"workers": [...], "last": w, "live": [...]}``, saved and loaded with the same
``num_workers``; ``dataloader._engine.stream_state`` says what is saved and when); without
them a mid-epoch state is refused (``TypeError``); a state at an epoch boundary is fine.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from typing import Any, NamedTuple

from dataloader._engine.elastic import ElasticSampler
from dataloader._engine.failures import check_counts
from dataloader._engine.resume_checks import Layout
from dataloader._engine.resume_load import check_loaded
from dataloader._engine.stream_state import PositionMoved
from dataloader._sampling.batch import starts_late

__all__ = ["STATE_VERSION", "EpochResume", "Progress", "Resumer", "skip_items", "stateful"]

STATE_VERSION = 2


class Progress:
    """Where the consumer is in one epoch: batches returned by ``next()`` and whether it ended.

    Written only by the epoch's consumer thread (``next()`` is never run by two threads at
    once); read by ``DataLoader.state_dict`` from any thread (plain int and bool reads).

    Args:
        epoch: the epoch number.
        yielded: batches already returned (a resumed epoch's position at its start).
        streams: the dataset's state at the consumer's position, ``state(yielded)``: a
            ``StatefulStreamItems`` (per-worker states) or a ``StreamSnapshots``
            (``num_workers=0``) of a stateful ``IterableDataset``; else None.
    """

    __slots__ = ("epoch", "yielded", "done", "streams", "failures")

    def __init__(self, epoch: int, yielded: int = 0, streams: Any = None) -> None:
        self.epoch = epoch
        self.yielded = yielded
        self.done = False
        self.streams = streams
        self.failures: Any = None  # the epoch's failures.FailureLog under an error policy


class EpochResume(NamedTuple):
    """Where an epoch starts (``Resumer.begin``): its number, the batches already returned
    (``yielded``), the work items to draw and drop first (``skip``), the per-worker state
    of a stateful ``IterableDataset`` to load (``streams``), or None, the failure counts
    the epoch starts from (``failures``), or None, and whether the dataset itself was given
    a loaded state to start from (``loaded``: its ``state_dict()`` is then the epoch's start)."""

    epoch: int
    yielded: int
    skip: int
    streams: dict[str, Any] | None
    failures: dict[str, int] | None = None
    loaded: bool = False  # the dataset was given a loaded state to start the epoch from


def stateful(dataset: Any) -> bool:
    """The dataset has both ``state_dict`` and ``load_state_dict``."""
    return hasattr(dataset, "state_dict") and hasattr(dataset, "load_state_dict")


def skip_items(items: Iterator[Any], k: int) -> Iterator[Any]:
    """``items`` after drawing and dropping its first ``k`` (raises what drawing raises)."""
    if k:
        next(itertools.islice(items, k, k), None)
    return items


class Resumer:
    """A loader's resume bookkeeping: the last epoch's ``Progress``, its start state, and a
    state loaded for the next epoch.

    Args:
        sampler: what yields the epoch's work items (the batch sampler, or the sampler with
            ``batch_size=None``), or None for an ``IterableDataset``.
        workers: the loader's ``num_workers``.
        layout: how the loader cuts its epochs (recorded and checked), or None.
        elastic: its elastic part (``dataloader._engine.elastic``), or None.
    """

    def __init__(
        self, sampler: Any, workers: int, layout: Layout | None = None, elastic: ElasticSampler | None = None
    ) -> None:
        self._sampler = sampler
        self._layout = layout
        self._elastic = elastic
        self._streams = sampler is None and workers > 0  # per-worker iterable states
        self._progress: Progress | None = None
        self._start_state: Any = None  # the sampler's state when the last epoch started
        self._start_error: Exception | None = None  # its state_dict() raised
        self._pending: dict[str, Any] | None = None  # loaded, for the next epoch
        self._loaded = False  # the last epoch started from a dataset state loaded into the dataset

    @property
    def sampler(self) -> Any:
        """What yields the epoch's work items (the ``sampler`` argument)."""
        return self._sampler

    @property
    def layout(self) -> Layout | None:
        """How the loader cuts its epochs (the ``layout`` argument)."""
        return self._layout

    def amend_start_state(self, key: str, value: Any) -> None:
        """Set ``key`` of the sampler's state kept for the epoch started last (a copy of
        ``value``): for draws a sampler's epoch makes after ``begin`` took its state (the
        torch face's per-epoch seeds, ``dataloader.torch._draws``).  No-op without a dict."""
        if isinstance(self._start_state, dict):
            self._start_state[key] = copy.deepcopy(value)

    # -- epochs --------------------------------------------------------------------------

    def begin(self, epoch: int, dataset: Any) -> EpochResume:
        """Called by ``iter(loader)`` under the loader's lock before the sampler starts.

        Returns where the epoch starts (``skip``: 0 when the sampler starts late itself).  Until
        ``track`` is given the epoch's own ``Progress``, the epoch's position is its start.
        """
        pending, self._pending = self._pending, None
        sampler = self._sampler
        self._start_error = None
        skip, streams, self._loaded = 0, None, False
        if pending is not None:
            self._start_state = pending["sampler"]
            if self._streams and pending["yielded"]:
                streams = pending["dataset"]  # loaded by each worker into its copy
            elif pending["dataset"] is not None:
                dataset.load_state_dict(pending["dataset"])
                self._loaded = True
            # Drawn and dropped: what neither the sampler (load) nor the dataset's state resumed.
            if not (starts_late(sampler) and self._start_state is not None):
                if not (sampler is None and pending["dataset"] is not None):
                    skip = pending["yielded"]
        elif hasattr(sampler, "state_dict"):
            try:
                self._start_state = copy.deepcopy(sampler.state_dict())  # it may be the live state
            except Exception as exc:  # raised again by DataLoader.state_dict()
                self._start_state, self._start_error = None, exc
        else:
            self._start_state = None
        yielded = pending["yielded"] if pending is not None else 0
        self._progress = Progress(epoch, yielded)
        failures = pending.get("failures") if pending is not None else None
        return EpochResume(epoch, yielded, skip, streams, failures, self._loaded)

    def track(self, progress: Progress) -> None:
        """Follow ``progress``, the started epoch's own (its ``begin`` came just before, under
        the same hold of the loader's lock)."""
        self._progress = progress

    # -- saving and loading ----------------------------------------------------------------

    def state_dict(self, seed: int, next_epoch: int, dataset: Any, *, in_order: bool) -> dict[str, Any]:
        """The loader's state (module docstring).

        Raises:
            ValueError: mid-epoch with ``in_order=False`` (batches came in completion order),
                or the sampler's ``state_dict()`` raised (a sampler without a seed).
            TypeError: mid-epoch over an ``IterableDataset`` without ``state_dict`` /
                ``load_state_dict`` and with ``num_workers > 0``.
        """
        if self._pending is not None:  # loaded and not started yet: saving gives it back
            sd = copy.deepcopy(self._pending)
        else:
            sd = copy.deepcopy(self._current(seed, next_epoch, dataset, in_order))  # the caller's own
        # Built new from ints (nothing to copy), after the copy: what another world size needs.
        sd["elastic"] = self._elastic.record(sd["sampler"], sd["yielded"]) if self._elastic is not None else None
        progress = self._progress  # under an error policy, mid-epoch: the epoch's failure counts
        if (self._pending is None and progress is not None and not progress.done and progress.failures is not None
                and sd["yielded"]):
            sd["failures"] = progress.failures.position_counts()
        return sd

    def _current(self, seed: int, next_epoch: int, dataset: Any, in_order: bool) -> dict[str, Any]:
        progress = self._progress
        if progress is None or progress.done:
            epoch = next_epoch if progress is None else progress.epoch + 1
            sampler_state = None
            if self._sampler is not None and hasattr(self._sampler, "state_dict"):
                sampler_state = self._sampler.state_dict()
            return self._state(seed, epoch, 0, sampler_state, self._at_start(dataset, loaded=False))
        if self._start_error is not None:
            raise self._start_error
        streams = progress.streams
        yielded = progress.yielded
        if yielded and not in_order:
            raise ValueError(
                "state_dict() in the middle of an epoch needs in_order=True: with in_order=False "
                "batches come in completion order, so no position describes what was yielded"
            )
        if not self._streams:  # a num_workers=0 stream's state is its snapshot at the position
            if streams is None:
                return self._state(seed, progress.epoch, yielded, self._start_state, _dataset_state(dataset))
            yielded, at = _stream_position(progress, streams)
            return self._state(seed, progress.epoch, yielded, self._start_state, at)
        if not yielded:
            return self._state(seed, progress.epoch, 0, self._start_state, self._at_start(dataset, self._loaded))
        if streams is None:
            raise TypeError(
                "state_dict() in the middle of an epoch over an IterableDataset without "
                "state_dict/load_state_dict needs num_workers=0: each worker iterates its own copy "
                "ahead of the consumer; give the dataset state_dict/load_state_dict, or save at an "
                "epoch boundary"
            )
        yielded, at = _stream_position(progress, streams)
        return self._state(seed, progress.epoch, yielded, None, at)

    def _at_start(self, dataset: Any, loaded: bool) -> Any:
        """The dataset's state at an epoch's start (nothing drawn yet).  An ``IterableDataset``'s
        ``state_dict()`` there may be the position its last iteration ended at (a stream's next
        ``iter()`` starts anew): None, the epoch starts as ``iter(dataset)`` starts it, unless
        the epoch starts from a state loaded into the dataset (``loaded``)."""
        return _dataset_state(dataset) if loaded or self._sampler is not None else None

    def _state(self, seed: int, epoch: int, yielded: int, sampler: Any, dataset: Any) -> dict[str, Any]:
        return {"version": STATE_VERSION, "seed": seed, "epoch": epoch, "yielded": yielded,
                "sampler": sampler, "dataset": dataset,
                "loader": self._layout.describe() if self._layout is not None else None}

    def load(self, sd: object, dataset: Any, *, workers: int) -> dict[str, Any]:
        """Validate ``sd`` and apply its sampler state; the rest applies to the next epoch.

        Raises:
            TypeError: ``sd`` is not a dict or a value has the wrong type (naming the key); a
                saved dataset state for a dataset without ``load_state_dict``; an
                ``IterableDataset`` without them, mid-epoch, with ``num_workers > 0``.
            ValueError: a missing or unknown key, an unknown version, a value out of range,
                per-worker iterable states saved with another ``num_workers``, or a state saved
                by a loader that cuts its epochs otherwise (``resume_checks``: naming both
                values) or whose ``yielded`` is past the end of this loader's epoch.
        """
        if self._elastic is not None and self._layout is not None:  # another world size, or a list
            sd = self._elastic.resolve(sd, self._layout.describe())
        sd = check_loaded(sd, self._sampler, dataset, workers, self._layout)
        yielded = sd["yielded"]
        checked = self._state(sd["seed"], sd["epoch"], yielded, sd["sampler"], sd["dataset"])
        if sd["sampler"] is not None:  # applied now: a malformed sampler state fails here
            if starts_late(self._sampler):
                self._sampler.load_state_dict({**sd["sampler"], "start": yielded})
            else:
                self._sampler.load_state_dict(sd["sampler"])
        if sd.get("failures") is not None:
            checked["failures"] = check_counts(sd["failures"])
        self._pending = checked
        return checked


def _stream_position(progress: Progress, streams: Any) -> tuple[int, Any]:
    """``(yielded, the stream's state there)``, read together: ``state_dict()`` may run on
    another thread while the consumer's ``next()`` builds and counts batches, so ``yielded`` is
    read again after the state and the pair is taken only when it did not move meanwhile (the
    stream's record is one tuple, replaced whole: ``stream_state``)."""
    while True:
        yielded = progress.yielded
        try:
            at = streams.state(yielded)
        except PositionMoved:
            if progress.yielded == yielded:
                raise
            continue
        if progress.yielded == yielded:
            return yielded, at


def _dataset_state(dataset: Any) -> Any:
    return dataset.state_dict() if hasattr(dataset, "state_dict") else None
