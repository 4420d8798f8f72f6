"""``MixStream``: a stream-level mix of ``IterableDataset`` s by weight, resumable.

Sample ``p`` of the stream comes from the source that the counter-based choice of
``dataloader.formats._mix_plan`` gives position ``p`` (the same stratified blocks as the
map-style mix, keyed by the seed, the epoch and the position), computed 1,024 positions at a
time with NumPy.  Its state is a handful of integers plus each source's own state.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dataloader._context import get_worker_info, thread_state
from dataloader._datasets.base import IterableDataset
from dataloader._rng import check_seed
from dataloader.formats._mix_plan import MixPlan, shares_of, splitmix64
from dataloader.formats._mix_stops import check_stop
from dataloader.formats._mix_stream_state import checked_state, mixed_shares, reweighted

__all__ = ["MixStream"]

CHOICE_CHUNK = 1024  # positions placed per NumPy call: ~50 µs, amortised to < 0.1 µs a sample


class MixStream(IterableDataset):
    """Samples of several ``IterableDataset`` s mixed by weight (``MixDataset`` of streams).

    Args:
        sources: a non-empty sequence of :class:`~dataloader.IterableDataset` s.
        weights: one non-negative number per source (normalised; 0 leaves one out).
        seed: int >= 0.
        stop_on: ``"first_exhausted"`` (default): the stream ends when a chosen source ends;
            ``"all_exhausted"``: a source that ends starts a new pass (a new ``iter()``) until
            every source with a positive weight has ended once, then the stream ends;
            ``"never"``: sources restart forever (or until ``num_samples``).
        num_samples: with ``"never"``, the number of samples (int >= 0) of each iterator, so of
            each worker with ``num_workers > 0``; ``None``: endless.

    Sample ``p`` (counted from 0 in each epoch) comes from the source the counter-based choice
    gives ``(seed, epoch, p)``: the same for every run, no RNG state.  The epoch is the loader's
    (while it draws a batch), else :meth:`set_epoch`'s.  With ``num_workers > 0`` each worker
    iterates its own copy (sources copied too) and mixes its own share of each source (a source
    shards itself by ``get_worker_info()``, as in PyTorch), positions counted per worker with the
    worker's id in the key: the output depends on ``num_workers``, as any stream's does.

    An empty pass: under ``"all_exhausted"`` / ``"never"``, a source that yields nothing in a whole
    pass of this iterator (a worker with no shard of it, or whose shards of it all failed under
    ``on_error="skip"``) is dropped from this iterator's mix until the epoch ends: the other
    sources, renormalised, from that position on (a new segment keyed by it; the weights stay as
    given); the stream ends when no source with a positive weight is left.

    Resume: :meth:`state_dict` gives ``{"epoch", "position", "segment", "shares", "drawn",
    "passes", "done", "dropped", "sources"}``; a source's entry is its own ``state_dict()`` where it has
    one (exact), else ``None`` and the source is replayed: a fresh ``iter()`` whose first
    ``drawn[s]`` items (this pass's) are skipped, exact when the source repeats itself.
    New weights: ``set_weights(w)`` (also right before or after ``load_state_dict``, so after
    ``loader.load_state_dict``, which loads the state when the next epoch starts) applies from
    the next sample: a new segment of positions starts there, keyed by its first position.

    Thread-safety: one iterator at a time per object (each worker has its own copy);
    :meth:`set_weights` from another thread takes effect at the next sample of this object's
    iterator (``num_workers=0``); the workers' copies are made when an epoch starts, so with
    ``num_workers > 0`` it takes effect from the next epoch.

    Raises:
        TypeError: a source that is not an ``IterableDataset``.
        ValueError: bad weights, an unknown ``stop_on``, ``num_samples`` with another rule; while
            iterating, a source that yielded items in a pass and nothing when it restarted (it
            does not repeat itself); under ``"first_exhausted"``, a chosen source that yields
            nothing at all in the epoch (the epoch would end there, silently short).
    """

    def __init__(
        self,
        sources: Sequence[Any],
        weights: Sequence[float] | np.ndarray,
        *,
        seed: int = 0,
        stop_on: str = "first_exhausted",
        num_samples: int | None = None,
    ) -> None:
        self.sources = list(sources)
        if not self.sources:
            raise ValueError("MixStream needs at least one source, got none")
        for i, d in enumerate(self.sources):
            if not isinstance(d, IterableDataset):
                raise TypeError(f"sources[{i}] ({type(d).__name__}) is not an IterableDataset")
        self.stop_on, self.num_samples = check_stop(stop_on, num_samples)
        self.seed = check_seed(seed)
        self._shares = shares_of(weights, len(self.sources))
        self._epoch = 0
        self._resume: dict[str, Any] | None = None
        self._live: _Run | None = None
        self._weights_set = False  # set_weights since the last iter(): a state loaded now keeps them

    @property
    def weights(self) -> np.ndarray:
        """The weights in use, normalised to sum to 1 (float64, one per source)."""
        return self._shares.astype(np.float64) / float(1 << 32)

    def set_weights(self, weights: Sequence[float] | np.ndarray) -> None:
        """Mix by ``weights`` from the next sample on (of the running iterator, or of the
        resumed one, whether its state is loaded before or after this call: a loader loads
        the state it was given when its next epoch starts).  With ``num_workers > 0`` the
        workers mix copies made when an epoch starts: a call during an epoch applies from
        the next epoch.

        Raises:
            ValueError: bad weights (as in the constructor).
        """
        self._shares = shares_of(weights, len(self.sources))
        self._weights_set = True
        if self._resume is not None:
            self._resume = reweighted(self._resume, self._shares)

    def set_epoch(self, epoch: int) -> None:
        """The epoch used outside a loader (inside, the loader's epoch is used)."""
        self._epoch = check_seed(epoch, "epoch")

    def set_failure_sink(self, sink: Callable[[int, str | None, BaseException], bool] | None) -> None:
        """Hands the loader's failure sink (its ``on_error="skip"``; see
        ``dataloader._engine.stream_policy``) to every source that takes one (a
        ``TarShardDataset``): a bad unit of such a source is skipped and reported, and the mix
        goes on.  Other sources' errors still fail their batch.

        Raises:
            ValueError: no source can skip its own bad units (none has ``set_failure_sink``):
                ``on_error="skip"`` would skip nothing.
        """
        takers = [d for d in self.sources if callable(getattr(d, "set_failure_sink", None))]
        if not takers:
            raise ValueError("on_error='skip' over a MixStream needs a source that skips its own bad units "
                             f"(set_failure_sink, e.g. TarShardDataset); none of its {len(self.sources)} "
                             f"sources ({', '.join(sorted({type(d).__name__ for d in self.sources}))}) does")
        for d in takers:
            d.set_failure_sink(sink)

    def __copy__(self) -> MixStream:
        """A copy with its own copies of the sources and no iteration of its own (a worker's)."""
        mine = object.__new__(type(self))
        mine.__dict__.update(self.__dict__)
        mine.sources = [copy.copy(d) for d in self.sources]
        mine._resume = copy.deepcopy(self._resume)
        mine._live = None
        return mine

    def __getstate__(self) -> dict[str, Any]:
        """A pickle or deep copy leaves the running iteration out (its sources' iterators may be
        generators); a loaded state not yet iterated goes with it."""
        state = dict(self.__dict__)
        state["_live"] = None
        return state

    def state_dict(self) -> dict[str, Any]:
        """The position of the running (or last) iterator, JSON-ready (see the class docstring)."""
        if self._live is not None:
            return self._live.state()
        if self._resume is not None:
            return copy.deepcopy(self._resume)
        return _Run.initial(self).state()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue from ``state`` (a :meth:`state_dict`), with the
        state's weights, or with those given to :meth:`set_weights` since the last ``iter()``
        (a new segment from the state's position when they differ from the state's).

        Raises:
            ValueError: not a ``MixStream`` state (a key missing, shares that do not sum to
                ``2**32``), or a state of another number of sources.
        """
        state = checked_state(state, len(self.sources))
        if self._weights_set:  # set_weights came since the last iter(): they apply from the state's position
            self._resume = reweighted(copy.deepcopy(state), self._shares)
            return
        self._resume = copy.deepcopy(state)
        self._shares = np.array(state["shares"], dtype=np.uint64)

    def __iter__(self) -> Iterator[Any]:
        run = _Run.initial(self) if self._resume is None else _Run.resumed(self, self._resume)
        self._resume = None
        self._weights_set = False
        self._live = run
        return run.samples()


class _Run:
    """One iteration of a ``MixStream``: its counters, iterators and the current plan."""

    def __init__(self, mix: MixStream, state: dict[str, Any], fresh: bool) -> None:
        self.mix = mix
        self.epoch: int | None = state["epoch"]
        self.position = int(state["position"])
        self.segment = int(state["segment"])
        self.shares = mix._shares  # load_state_dict set it from the state; identity marks a change
        self.drawn = list(state["drawn"])
        self.passes = list(state["passes"])
        self.done = list(state["done"])
        self.dropped = [bool(d) for d in state.get("dropped", [False] * len(mix.sources))]
        self.fresh = fresh
        self.saved = state["sources"]
        self.iters: list[Iterator[Any] | None] = [None] * len(mix.sources)
        self.plan: MixPlan | None = None
        self.chunk: tuple[int, np.ndarray] = (-1, np.empty(0, np.int64))

    @classmethod
    def initial(cls, mix: MixStream) -> _Run:
        n = len(mix.sources)
        state = {"epoch": None, "position": 0, "segment": 0, "shares": mix._shares.tolist(),
                 "drawn": [0] * n, "passes": [0] * n, "done": [False] * n, "dropped": [False] * n,
                 "sources": [None] * n}
        return cls(mix, state, fresh=True)

    @classmethod
    def resumed(cls, mix: MixStream, state: dict[str, Any]) -> _Run:
        return cls(mix, state, fresh=False)

    def state(self) -> dict[str, Any]:
        sources: list[Any] = []
        for d, it in zip(self.mix.sources, self.iters, strict=True):
            method = getattr(d, "state_dict", None)
            if it is None:  # not opened in this run: what it was resumed from, if anything
                sources.append(copy.deepcopy(self.saved[len(sources)]))
            else:
                sources.append(copy.deepcopy(method()) if callable(method) else None)
        return {"epoch": self.epoch, "position": self.position, "segment": self.segment,
                "shares": self.shares.tolist(), "drawn": list(self.drawn), "passes": list(self.passes),
                "done": list(self.done), "dropped": list(self.dropped), "sources": sources}

    def samples(self) -> Iterator[Any]:
        limit = self.mix.num_samples
        try:
            while limit is None or self.position < limit:
                s = self._choose()
                if s < 0:  # every source with a positive weight dropped: nothing left to mix
                    return
                item = self._draw(s)
                if item is _END:
                    return
                if item is _DROPPED:  # s left this iterator's mix: choose again for this position
                    continue
                self.drawn[s] += 1
                self.position += 1
                yield item
        finally:  # the end, a break or an error: sources left mid-stream let go of their files now
            for it in self.iters:
                close = getattr(it, "close", None)
                if callable(close):
                    close()

    def _choose(self) -> int:
        current = self.mix._shares  # read once: a set_weights from another thread lands before or after
        if current is not self.shares:
            if not np.array_equal(current, self.shares):
                self.segment, self.plan = self.position, None
            self.shares = current
        if self.plan is None:
            shares = mixed_shares(self.shares, self.dropped)
            if shares is None:
                return -1
            self.plan = MixPlan(shares, _segment_seed(self.mix.seed, self.segment, _worker_key()))
            self.chunk = (0, np.empty(0, np.int64))
        if self.epoch is None:
            key = thread_state().epoch_key
            self.epoch = self.mix._epoch if key is None else key[1]
        local = self.position - self.segment
        start, chosen = self.chunk
        if not start <= local < start + len(chosen):
            start = local - local % CHOICE_CHUNK
            chosen, _ = self.plan.place(np.arange(start, start + CHOICE_CHUNK, dtype=np.int64), self.epoch)
            self.chunk = (start, chosen)
        return int(chosen[local - start])

    def _draw(self, s: int) -> Any:
        it = self.iters[s]
        for item in self._open(s) if it is None else it:
            return item
        self.done[s] = True
        rule = self.mix.stop_on
        if rule == "first_exhausted" and self.drawn[s] == 0 and self.passes[s] == 0:
            raise ValueError(f"sources[{s}] yielded nothing in this epoch under stop_on='first_exhausted', which "
                             "would end the epoch before its first sample of it (use 'all_exhausted' or "
                             f"'never' to mix the other sources without it){_where()}")
        if rule == "first_exhausted" or (rule == "all_exhausted" and self._all_done()):
            return _END
        if self.drawn[s] == 0:  # a whole pass gave nothing: leave s out of this iterator's mix
            return self._drop(s)
        self.passes[s] += 1
        self.drawn[s] = 0
        self.saved[s] = None
        for item in self._open(s, restart=True):
            return item
        raise ValueError(f"sources[{s}] yielded nothing when it restarted (pass {self.passes[s]}){_where()}")

    def _drop(self, s: int) -> _EndType:
        """Mix the other sources, renormalised, from this position on (a new segment keyed by it):
        ``dropped`` goes into the state, so a resume mixes the same; the user's weights stay."""
        self.dropped[s] = True
        self.segment, self.plan = self.position, None
        return _DROPPED

    def _all_done(self) -> bool:
        return all(d or share == 0 for d, share in zip(self.done, self.shares.tolist(), strict=True))

    def _open(self, s: int, restart: bool = False) -> Iterator[Any]:
        source = self.mix.sources[s]
        saved = None if restart else self.saved[s]
        loader = getattr(source, "load_state_dict", None)
        if saved is not None and callable(loader):
            loader(copy.deepcopy(saved))
            it = iter(source)
        else:
            it = iter(source)
            skip = 0 if restart or self.fresh else self.drawn[s]
            for k in range(skip):  # replay: a source without state skips what this pass drew
                if next(it, _END) is _END:
                    raise ValueError(f"sources[{s}] ({type(source).__name__}) yielded {k} items when replayed, "
                                     f"but the resumed state had drawn {skip} from it: it does not repeat "
                                     "itself (give it state_dict/load_state_dict)")
        self.iters[s] = it
        return it


class _EndType:
    __slots__ = ()


_END = _EndType()
_DROPPED = _EndType()


def _where() -> str:
    """Outside workers: ''; in a worker of several: which one, and why its copy of a source
    may be empty when the source's own is not."""
    info = get_worker_info()
    if info is None or info.num_workers < 2:
        return ""
    return (f", in worker {info.id} of {info.num_workers}: a worker mixes its own share of each source, "
            "empty when the source has fewer shards than workers or all of this worker's failed "
            "(on_error='skip'); use at most as many workers as the source has shards")


def _worker_key() -> int:
    """0 outside workers and with one worker; ``1 + id`` in worker ``id`` of several."""
    info = get_worker_info()
    return 0 if info is None or info.num_workers < 2 else 1 + info.id


def _segment_seed(seed: int, segment: int, worker: int) -> int:
    """The key of a segment of positions (weights changed at ``segment``) of one worker's
    stream; segment 0 outside workers is ``seed`` itself."""
    if segment == 0 and worker == 0:
        return seed
    mixed = splitmix64(np.array([segment, worker], dtype=np.uint64))
    return int(splitmix64(np.array([seed], dtype=np.uint64) ^ mixed[0] ^ (mixed[1] >> np.uint64(1)))[0])
