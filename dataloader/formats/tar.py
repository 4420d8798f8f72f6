"""``TarShardDataset``: the samples of WebDataset-style tar shards, streamed, split and shuffled."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from dataloader import _context
from dataloader._datasets.base import IterableDataset
from dataloader._validate import check_int, env_int
from dataloader.formats._braces import MAX_SHARD_NAMES, expand_braces
from dataloader.formats._shard_open import ShardSource
from dataloader.formats._tar_stream import SkipLog, TarStream
from dataloader.io._checks import check_retry
from dataloader.io._redact import redact
from dataloader.io.retry import Retry

__all__ = ["TarShardDataset"]

ShardsArg = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]
FailureSink = Callable[[int, str | None, BaseException], bool]
_STATE_VERSION = 1


class TarShardDataset(IterableDataset):
    """The samples of tar shards (WebDataset's layout), as dicts ``{ext: bytes, "__key__", "__url__"}``.

    Files ``000123.jpg`` and ``000123.cls`` make one sample ``{"__key__": "000123", "__url__":
    shard, "jpg": bytes, "cls": bytes}`` (WebDataset's key rule, ``dataloader.formats._tar_read``;
    a local shard's samples also carry ``"__local_path__"``, its file, as WebDataset's do).
    Samples are bytes: decode them with a ``transform`` (``dataloader.image.Decode`` for images).

    Args:
        shards: a shard name or brace pattern (``"data/train-{000000..000999}.tar"``), or a list
            of them: local paths (or ``file://``), ``http(s)://`` URLs, object-store URLs
            (``s3://bucket/key``, ``gs://``, ``az://``, ``memory://``) or, with ``store=``, keys of
            that store.  ``.tar.gz`` and other compressed tars are read too.  At most 1,000,000
            names in all (``ValueError`` naming the pattern past it, before expanding it).
        shuffle_shards: False reads the shards in the given order; True in an order that is a
            pure function of ``(seed, epoch)`` (the same on every rank).
        shuffle_buffer: samples held by each worker's shuffle buffer (WebDataset's
            ``shuffle(n)``); 0 or 1: none.  A sample moves at most ``shuffle_buffer - 1``
            places earlier and on average about ``shuffle_buffer`` later: ``1000`` mixes
            neighbouring shards well for small samples at ``1000 x`` sample size of memory per
            worker; with shards written in class order, take ``shuffle_shards=True`` and a
            buffer larger than the samples of one shard.
        seed: int >= 0; the shard order and the buffer's draws of epoch ``e`` depend only on
            ``(seed, e)`` and the worker's slot (not on the loader's seed, which may differ by
            rank).  The epoch is the loader's epoch inside a loader, else ``set_epoch``'s.
        world_size, rank: the ranks the shards are split across; None: the ``WORLD_SIZE`` /
            ``RANK`` environment variables (torchrun's), or 1 / 0.
        store: an obstore store (the ``remote`` extra) whose keys ``shards`` are, or None.
        on_error: ``"raise"``: a shard that is missing, not a tar or cut short raises
            (``ValueError`` / ``OSError`` naming the shard, redacted, and the sample reached)
            and ends that worker's stream; ``"skip"``: the shard's remaining samples are dropped,
            the shard recorded in ``skipped_shards``, and reading goes on.  Inside a
            ``DataLoader(..., on_error="skip")`` the loader's policy wins: a bad shard is
            skipped whatever this says, and reported as the loader's failure (see below).
        timeout_s: seconds an HTTP connection or read may block (> 0; capped by ``retry``'s
            ``attempt_timeout_s``).
        retry: a ``dataloader.io.Retry``, as ``HttpDataset`` takes; None: ``Retry()``'s
            defaults (3 attempts, 0.1 s backoff doubling up to 15 s, 30 s per connect and per blocking read);
            ``Retry(max_attempts=1)``: no retry and no resume (a cut is the shard's error).
            For HTTP shards: a failed connect or a 408, 429, 500, 502, 503 or 504 status is
            tried again after the backoff (another status fails the shard at once), and a
            connection cut mid-shard resumes with a ``Range`` request from the byte reached,
            guarded by the first response's ETag (an object that changed, or no strong ETag,
            is the shard's ``ValueError``: two versions are never spliced); the failed requests
            of a shard count against ``max_attempts``, except that a response that read 1 MiB
            before its cut starts the count again (a long shard cut now and then is read
            whole; cuts sooner than that fail it after ``max_attempts`` requests in a row)
            (``dataloader.formats._http_shard``).  Object-store shards: obstore retries and
            resumes cut streams itself; stores made here from URLs get ``retry.store_config()``.

    Splitting: epoch ``e``'s shard order is cut into ``world_size * num_workers`` strided slots
    (rank ``r``, worker ``w``: slot ``r * num_workers + w``), so every shard is read exactly once
    per epoch across ranks and worker threads; a slot with no shard yields nothing.

    Determinism: for given ``(seed, epoch, world_size, num_workers)`` the samples of each worker
    are fixed, so the loader's output is.  Each worker shuffles its own stream; the loader
    takes batches from the workers in turn, so with another ``num_workers`` the epoch has the
    same samples in another order (``num_workers`` 0 and 1 agree).

    Resume: ``state_dict()`` / ``load_state_dict()`` (used by the loader's, per worker) hold
    the epoch, the layout and the stream's position (shard, samples read in it, the shuffle
    buffer's samples as ``shard << 32 | ordinal`` references, base64 int64, plus its generator
    state): JSON-friendly, a few hundred bytes plus ~11 a buffered sample.  A resumed stream reads the current shard again
    from its start (and, for buffered samples from earlier shards, those up to the sample
    needed) and continues exactly as the uninterrupted run.

    Under the loader's error policy (``DataLoader(ds, on_error="skip", max_failures=...)``; the
    loader calls ``set_failure_sink``): a bad shard's remaining samples are dropped and the shard
    appears in ``loader.failures`` as a ``FailureRecord`` (``index``: the shard's place in the
    epoch's ``shard_order``; ``location``: the shard, redacted; the ``ValueError``/``OSError``
    above), counted in ``loader.stats`` (``failed``, ``skipped``: one per shard) and in the
    loader's state, and ``max_failures`` applies (a fraction of samples yielded + shards failed).
    The shard is also listed in ``skipped_shards``.  ``on_error="replace"`` is refused for a stream.

    Raises:
        TypeError / ValueError: at construction, for a bad argument (named), an empty shard
            list, a bad brace pattern or over 1,000,000 shard names.
        ValueError: from ``load_state_dict`` or iteration, a state of another layout.

    Thread-safety: each loader worker iterates its own shallow copy; ``skipped_shards`` is
    shared and locked; the failure sink is called on the iterating thread.  Pickles (an obstore store given as ``store=`` must pickle too).
    """

    def __init__(
        self, shards: ShardsArg, *, shuffle_shards: bool = False, shuffle_buffer: int = 0, seed: int = 0,
        world_size: int | None = None, rank: int | None = None, store: Any = None, on_error: str = "raise",
        timeout_s: float = 60.0, retry: Retry | None = None,
    ) -> None:
        self.shards = _expand(shards)
        self.shuffle_shards = bool(shuffle_shards)
        self.shuffle_buffer = check_int(shuffle_buffer, "shuffle_buffer", minimum=0)
        self.seed = check_int(seed, "seed", minimum=0)
        self.world_size, self.rank = _ranks(world_size, rank)
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got on_error={on_error!r}")
        self.on_error = on_error
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
            raise ValueError(f"timeout_s must be a number of seconds > 0, got timeout_s={timeout_s!r}")
        try:
            seconds = float(timeout_s)
        except OverflowError:  # an int past a float's range: not its digits in the message
            raise ValueError("timeout_s is an int past a float's range: it must be a number of seconds > 0 "
                             "(a huge one is no limit: use 1e9)") from None
        self._source = ShardSource(store, seconds, check_retry(retry))
        self._skipped = SkipLog()
        self._epoch = 0
        self._resume: dict[str, Any] | None = None
        self._stream: tuple[dict[str, Any], TarStream] | None = None
        self._sink: FailureSink | None = None

    def __repr__(self) -> str:
        first = redact(self.shards[0])
        return (f"TarShardDataset({len(self.shards)} shard(s) from {first!r}, shuffle_shards={self.shuffle_shards}, "
                f"shuffle_buffer={self.shuffle_buffer}, seed={self.seed}, world_size={self.world_size}, rank={self.rank})")

    @property
    def skipped_shards(self) -> list[tuple[str, str]]:
        """``(shard, message)`` of each shard skipped under ``on_error="skip"`` (redacted), in
        the order the workers met them."""
        return self._skipped.entries()

    def set_failure_sink(self, sink: FailureSink | None) -> None:
        """The loader's failure sink (its ``on_error="skip"``; ``dataloader._engine.stream_policy``):
        a shard error is offered to ``sink(shard number in the epoch's order, shard redacted,
        exception)`` first, and the shard skipped when it returns True; None: no sink.

        Raises:
            TypeError: ``sink`` is neither callable nor None.
        """
        if sink is not None and not callable(sink):
            raise TypeError(f"sink must be callable or None, got {type(sink).__name__}")
        self._sink = sink

    def set_epoch(self, epoch: int) -> None:
        """The epoch of iterations outside a loader (int >= 0; a loader's epoch wins inside it)."""
        self._epoch = check_int(epoch, "epoch", minimum=0)

    def shard_order(self, epoch: int) -> list[str]:
        """Epoch ``epoch``'s shards in reading order (before the split among ranks and workers)."""
        if not self.shuffle_shards:
            return list(self.shards)
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, epoch])))
        return [self.shards[i] for i in rng.permutation(len(self.shards))]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self._stream = None
        resume, self._resume = self._resume, None
        return self._samples(resume)

    def _samples(self, resume: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
        key = _context.thread_state().epoch_key  # set by the loader while a batch is built
        epoch = self._epoch if key is None else key[1]
        info = _context.get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        slot, slots = self.rank * workers + worker, self.world_size * workers
        where = {"version": _STATE_VERSION, "seed": self.seed, "epoch": epoch, "shards": len(self.shards),
                 "shuffle_shards": self.shuffle_shards, "shuffle_buffer": self.shuffle_buffer,
                 "world_size": self.world_size, "rank": self.rank, "num_workers": workers, "worker": worker}
        saved = _position(resume, where)
        sink = self._sink
        report = None if sink is None else functools.partial(_offer, sink, slot, slots)
        stream = TarStream(self._source, self.shard_order(epoch)[slot::slots], self.shuffle_buffer,
                           (self.seed, epoch, slot), self.on_error, self._skipped, saved, report)
        self._stream = (where, stream)
        try:
            yield from stream
        finally:
            if not stream.done and self._stream is not None and self._stream[1] is stream:
                self._stream = None  # abandoned (a peek, a break): the next __iter__ starts anew

    def state_dict(self) -> dict[str, Any]:
        """This iterator's position (see the class): where the next ``__iter__`` goes on from a
        loaded state not iterated yet; ``{"stream": None}`` before an iteration starts or after
        one was abandoned unfinished (closed, or dropped as after ``next(iter(ds))``)."""
        if self._resume is not None:
            return copy.deepcopy(self._resume)
        current = self._stream
        if current is None:
            return {"version": _STATE_VERSION, "stream": None}
        where, stream = current
        return {**where, "stream": stream.state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``__iter__`` continue from ``state`` (a ``state_dict()``).

        Raises:
            TypeError: ``state`` is not a dict.
            ValueError: ``state`` is not a ``TarShardDataset`` state of this version.
        """
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        if state.get("version") != _STATE_VERSION or "stream" not in state:
            raise ValueError(f"not a TarShardDataset state (version {_STATE_VERSION}): keys {sorted(state)}")
        self._resume = copy.deepcopy(state)


def _offer(sink: FailureSink, slot: int, slots: int, pos: int, name: str, exc: Exception) -> bool:
    """A shard error offered to the loader's sink: the shard's number in the epoch's order (this
    worker's ``pos``-th shard is ``slot + pos * slots``) and its redacted name."""
    return bool(sink(slot + pos * slots, redact(name), exc))


def _position(resume: dict[str, Any] | None, where: dict[str, Any]) -> dict[str, Any] | None:
    """The stream position of ``resume`` for the iteration ``where`` describes.

    A state of another epoch or seed (the ended epoch's last position, which an earlier
    release's loader saved at the next epoch's start) is not resumed: the epoch starts at its
    beginning.

    Raises:
        ValueError: the state's shards, shuffle settings, ranks or workers differ.
    """
    if resume is None or resume.get("stream") is None:
        return None
    if (resume["epoch"], resume["seed"]) != (where["epoch"], where["seed"]):
        return None
    for name in ("shards", "shuffle_shards", "shuffle_buffer", "world_size", "rank", "num_workers", "worker"):
        if resume.get(name) != where[name]:
            raise ValueError(
                f"cannot resume a TarShardDataset state saved with {name}={resume.get(name)} here with "
                f"{name}={where[name]}: the samples would be split or shuffled differently"
            )
    stream: dict[str, Any] = resume["stream"]
    return stream


def _expand(shards: ShardsArg) -> tuple[str, ...]:
    if isinstance(shards, (str, os.PathLike)):
        shards = [shards]
    if isinstance(shards, (bytes, bytearray)) or not isinstance(shards, Sequence):
        raise TypeError(f"shards must be a name, a brace pattern or a list of them, got {type(shards).__name__}")
    out: list[str] = []
    for s in shards:
        if not isinstance(s, (str, os.PathLike)):
            raise TypeError(f"a shard must be a str or os.PathLike, got {type(s).__name__} {s!r}")
        names = expand_braces(os.fspath(s), MAX_SHARD_NAMES - len(out))
        if "" in names:  # else a FileNotFoundError for '' once a worker reaches it
            raise ValueError(f"shard {os.fspath(s)!r} is or expands to an empty name")
        out.extend(names)
    if not out:
        raise ValueError("TarShardDataset needs at least one shard, got an empty list")
    return tuple(out)


def _ranks(world_size: int | None, rank: int | None) -> tuple[int, int]:
    name = "WORLD_SIZE" if world_size is None else "world_size"
    world = check_int(env_int(name, 1) if world_size is None else world_size, name, minimum=1)
    name = "RANK" if rank is None else "rank"
    r = check_int(env_int(name, 0) if rank is None else rank, name, minimum=0)
    if r >= world:
        raise ValueError(f"{name}={r} must be < world_size={world}")
    return world, r
