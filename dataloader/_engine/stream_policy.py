"""An ``IterableDataset`` under the loader's ``on_error="skip"``: the failure-sink protocol.

A stream's items have no index the loader could skip, so the loader cannot narrow a stream's
failure to an item as it does for a map-style dataset.  A stream that can skip its own bad
units (a shard, a file, a record) and go on declares so with one method:

``dataset.set_failure_sink(sink)``: the loader calls it once, when it is built with
``on_error="skip"``, and hands it ``report_failure`` (the same function for every loader).  The
dataset (and each worker's copy of it) keeps the sink; when it meets a bad unit it calls
``sink(index, location, exc)`` on the thread iterating it:

- ``index``: the unit's number (``TarShardDataset``: the shard's place in the epoch's shard
  order), or -1 where it has none;
- ``location``: where the unit is (a path, a redacted URL, an object key), or None;
- ``exc``: the exception.

``sink`` returns True when the failure was taken: a loader with ``on_error="skip"`` is building
a batch on this thread, the failure goes into that batch's report (``loader.failures``,
``loader.stats``, ``max_failures``, the state's counts) and the dataset must skip the unit and
go on.  It returns False otherwise (the dataset iterated outside such a loader): the dataset
applies its own rule (raise, or its own skip).

Under ``on_error="skip"`` a stream's batches are built by ``PolicedStreamBatcher``: it opens a
collection on the building thread while it takes the batch's items, and returns a ``Recovered``
(``dataloader._engine.recover``) whose ``seen`` is the items taken plus the failures met, so
the failures count in the batch (an epoch position) during which they were met: ``state_dict``
saves counts that match the stream's saved position, and a resume neither loses nor repeats
them.  A batch during which the stream only failed and then ended is ``SKIPPED``.
"""

from __future__ import annotations

import threading
from typing import Any

from dataloader._engine.build import StreamBatcher
from dataloader._engine.failures import FailureRecord, message_of
from dataloader._engine.outcome import END, Failure, no_stop_iteration
from dataloader._engine.recover import SKIPPED, Recovered
from dataloader._native._stats import Recorder

__all__ = ["PolicedStreamBatcher", "accepts_failure_sink", "report_failure"]


class _Pending(threading.local):
    """This thread's open collection: a list of ``(index, location, exc)``, or None."""

    failures: list[tuple[int, str | None, BaseException]] | None = None


_pending = _Pending()


def accepts_failure_sink(dataset: Any) -> bool:
    """Whether ``dataset`` declares the protocol (a callable ``set_failure_sink``)."""
    return callable(getattr(dataset, "set_failure_sink", None))


def report_failure(index: int, location: str | None, exc: BaseException) -> bool:
    """The sink a stream reports a skipped unit to (see the module).

    Returns True when a loader with ``on_error="skip"`` is building a batch on the calling
    thread (the failure is that batch's; skip the unit), else False (apply your own rule).
    Thread-safety: any thread; each thread reports into its own batch.
    """
    failures = _pending.failures
    if failures is None:
        return False
    failures.append((index, location, exc))
    return True


class PolicedStreamBatcher(StreamBatcher):
    """``StreamBatcher`` under ``on_error="skip"``: each batch a ``Recovered`` with the
    failures the stream reported while its items were taken (see the module)."""

    __slots__ = ()

    def _build(self, stream: Any, rec: Recorder) -> Any:
        pending = _pending
        saved, pending.failures = pending.failures, []
        try:
            items = self._take(stream)
        except Exception as exc:  # the stream raised: its Failure, after the failures it reported
            rec.failed()
            items = Failure(exc)
        finally:
            met, pending.failures = pending.failures, saved
        assert met is not None
        epoch = self._epoch_key[1]
        failures = [FailureRecord(epoch, i, loc, type(exc), message_of(exc)) for i, loc, exc in met]
        n = len(failures)
        if type(items) is not list:  # END or the stream's Failure
            if not failures:
                return items
            return Recovered(SKIPPED if items is END else items, n, failures, n, 0)
        try:
            batch = self._finish(items, rec)
        except BaseException as exc:  # as Builder.build would, keeping the failures met
            rec.failed()
            if isinstance(exc, StopIteration):
                exc = no_stop_iteration(exc, "the transform or collate_fn", "building a batch")
            batch = Failure(exc)
        return Recovered(batch, len(items) + n, failures, n, 0)
