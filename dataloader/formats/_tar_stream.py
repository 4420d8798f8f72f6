"""One worker's samples of one epoch: its shards in order, through the shuffle buffer, resumable.

The position (``state()``) is ``{"shard": p, "offset": k, "buffer": None | the buffer's state,
"done": bool}``: the reader is in shard ``p`` of this worker's list having read ``k`` of its
samples; the buffer holds samples named by ``shard position << 32 | ordinal``.  It is consistent
whenever the stream is suspended (between two samples it yields).

Resuming (``resume=`` a ``state()``): shard ``p`` is opened again and its first ``k`` samples
are read and dropped (a tar stream cannot seek), keeping those the buffer held; the buffer's
other samples come from earlier shards, each read again up to the last sample it still needs
(usually none or the previous shard: a sample stays in a buffer of size ``B`` for about ``B``
arrivals); then the buffer and its generator are put back and reading goes on.  The result is
exactly the uninterrupted stream's rest.

Errors (``on_error``): ``"raise"``: the shard's error (``ValueError`` or ``OSError`` naming it,
see ``_tar_read``) ends this stream, and the position says so (``done``), so a resumed run ends
there too; ``"skip"``: the rest of the failing shard is dropped, the failure recorded in
``skipped``, and reading goes on with the next shard.  Before either, the error is offered to
``report`` (the loader's ``on_error="skip"``, ``dataloader._engine.stream_policy``): when it
takes it, the shard is skipped (and recorded in ``skipped``) whatever ``on_error`` says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dataloader.formats._shard_open import ShardSource
from dataloader.formats._shuffle_buffer import ShuffleBuffer, decode_refs
from dataloader.formats._tar_read import ShardReadError, shard_samples
from dataloader.io._redact import redact

__all__ = ["SkipLog", "TarStream"]

_ORDINAL = (1 << 32) - 1  # a reference is shard position << 32 | sample ordinal in the shard


class SkipLog:
    """The shards skipped under ``on_error="skip"``: ``(shard, message)`` pairs (redacted).

    Thread-safety: ``add`` and ``entries`` take a lock (the workers' copies share one log).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[str, str]] = []

    def add(self, name: str, message: str) -> None:
        with self._lock:
            self._entries.append((redact(name), message))

    def entries(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._entries)

    def __getstate__(self) -> list[tuple[str, str]]:
        return self.entries()

    def __setstate__(self, state: list[tuple[str, str]]) -> None:
        self._lock = threading.Lock()
        self._entries = list(state)


class TarStream:
    """Iterate once: the samples of ``names`` (this worker's shards, in epoch order).

    Args:
        source: opens the shards (``open``, ``local_path``).
        names: the shards, in the order read.
        buffer_size: shuffle buffer samples; below 2: no shuffling.
        key: the buffer generator's seed entropy.
        on_error: ``"raise"`` or ``"skip"`` (see the module).
        skipped: where skipped shards are recorded.
        resume: a ``state()`` of the same stream, or None.
        report: ``report(position, name, exc) -> bool``: a shard error offered to the loader's
            ``on_error="skip"`` first (True: taken, the shard is skipped whatever ``on_error``
            says), or None.

    Thread-safety: iterated on one thread; ``state()`` is read on that thread between samples.
    """

    def __init__(
        self, source: ShardSource, names: Sequence[str], buffer_size: int, key: Sequence[int],
        on_error: str, skipped: SkipLog, resume: dict[str, Any] | None,
        report: Callable[[int, str, Exception], bool] | None = None,
    ) -> None:
        self._source, self._names, self._on_error, self._skipped = source, list(names), on_error, skipped
        self._report = report
        self._buffer = ShuffleBuffer(buffer_size, key) if buffer_size >= 2 else None
        self._resume = resume
        self.shard, self.offset, self.done = 0, 0, False
        if resume is not None:
            self.shard, self.offset, self.done = int(resume["shard"]), int(resume["offset"]), bool(resume["done"])

    def state(self) -> dict[str, Any]:
        """The position (see the module); JSON-friendly."""
        buffer = None if self._buffer is None else self._buffer.state()
        return {"shard": self.shard, "offset": self.offset, "buffer": buffer, "done": self.done}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self.done:
            return
        buffer = self._buffer
        if buffer is None:
            for _, sample in self._read():
                yield sample
        else:
            for ref, sample in self._read():
                full, out = buffer.push(ref, sample)
                if full:
                    yield out
            while len(buffer):
                yield buffer.pop()
        self.done = True

    def _wanted(self) -> dict[int, set[int]]:
        """The buffer's references of a resumed state, by shard position."""
        wanted: dict[int, set[int]] = {}
        saved = self._resume
        if saved is not None and saved["buffer"] is not None:
            for ref in decode_refs(saved["buffer"]["refs"]):
                wanted.setdefault(ref >> 32, set()).add(ref & _ORDINAL)
        return wanted

    def _read(self) -> Iterator[tuple[int, dict[str, Any]]]:
        wanted = self._wanted()
        found: dict[tuple[int, int], dict[str, Any]] = {}
        for pos in sorted(p for p in wanted if p < self.shard):
            self._collect(pos, wanted[pos], found)
        skip, restore = self.offset, self._resume is not None
        while self.shard < len(self._names):
            pos = self.shard
            for ordinal, sample in self._shard(pos, skip, wanted.get(pos, set()), found):
                if restore:
                    self._restore(found)
                    restore = False
                self.offset = ordinal + 1
                yield pos << 32 | ordinal, sample
            if restore:
                self._restore(found)
                restore = False
            skip = 0
            self.shard, self.offset = pos + 1, 0
        if restore:
            self._restore(found)

    def _shard(
        self, pos: int, skip: int, keep: set[int], found: dict[tuple[int, int], dict[str, Any]]
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """Shard ``pos``'s samples from ordinal ``skip`` on (those before it that ``keep`` names
        go to ``found``); a shard error is raised or recorded per ``on_error``."""
        name = self._names[pos]
        ordinal = 0
        try:
            for ordinal, sample in enumerate(shard_samples(self._source.open, name, self._source.local_path(name))):
                if ordinal < skip:
                    if ordinal in keep:
                        found[(pos, ordinal)] = sample
                    continue
                yield ordinal, sample
        except ShardReadError as err:
            shown = err.named()
            if err.ordinal < skip:  # the shard changed since the state was saved: no skip hides that
                self.done = True
                raise shown from err.cause
            shown.__cause__ = err.cause
            taken = self._report is not None and self._report(pos, name, shown)
            if not taken and self._on_error == "raise":
                self.done = True
                raise shown from err.cause
            self._skipped.add(name, str(shown))

    def _collect(self, pos: int, keep: set[int], found: dict[tuple[int, int], dict[str, Any]]) -> None:
        """Read shard ``pos`` again up to the last sample ``keep`` names (a resume)."""
        last = max(keep)
        name = self._names[pos]
        try:
            for ordinal, sample in enumerate(shard_samples(self._source.open, name, self._source.local_path(name))):
                if ordinal in keep:
                    found[(pos, ordinal)] = sample
                if ordinal >= last:
                    break
        except ShardReadError as err:
            self.done = True
            raise err.named() from err.cause

    def _restore(self, found: dict[tuple[int, int], dict[str, Any]]) -> None:
        saved = self._resume
        self._resume = None
        if saved is None or saved["buffer"] is None or self._buffer is None:
            return
        refs = [(r >> 32, r & _ORDINAL) for r in decode_refs(saved["buffer"]["refs"])]
        missing = [r for r in refs if r not in found]
        if missing:
            pos, ordinal = missing[0]
            raise ValueError(
                f"cannot resume: {len(missing)} buffered sample(s) are no longer in their shards "
                f"(first: sample {ordinal} of {redact(self._names[pos])!r}); the shards changed since "
                "the state was saved"
            )
        self._buffer.restore(saved["buffer"], [found[r] for r in refs])
