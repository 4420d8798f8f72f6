"""Native batches: a dataset's ``BatchRows`` gathered with no Python.

A dataset opts in with ``__batch_rows__() -> BatchRows | None`` (``dataloader._datasets.rows``);
``batch_rows`` asks it, once an epoch, where its batches would be ``default_collate`` of its
items with nothing in between.  This module owns every native job:

- ``GatherFetcher`` (``native_gather``): a batch of ``BatchRows`` arrays gathered by
  ``take_columns`` on the building thread, without a ``BatchedItems`` in between (the
  ``num_workers=0`` path; docs/performance-notes.md, "In-memory gather and per-batch overhead");
- ``RowsFetcher`` (``native_rows``): the epoch's workers build its batches in
  ``_native/_rowjobs.pyx`` with no Python (``NativeJobs``); it builds the batches that no
  job holds (its ``fallback``: ``native_gather``, ``getitems`` or ``items``);
- ``NativeJobs``: the ``RowJobs`` of an epoch's window, a batch's job (``prepare``) and the
  recorder each worker runs jobs with;
- ``jobs_collate``: the epoch-level check that ``default_collate`` gives the gathered
  columns as they are (a changed collate map turns the jobs off).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dataloader._collation.default import collate_columns
from dataloader._datasets.batched import BatchedItems
from dataloader._datasets.rows import BatchRows
from dataloader._engine.build import Builder, BuilderKind, Fetcher
from dataloader._engine.outcome import Failure
from dataloader._indices import as_index_array
from dataloader._native._arrayrows import take_columns
from dataloader._native._gather import Reader
from dataloader._native._rowjobs import RowJobs, can_run
from dataloader._native._stats import Recorder
from dataloader._sampling.permute import PermutationSpan

__all__ = ["GatherFetcher", "NativeJobs", "RowsFetcher", "batch_rows", "jobs_collate"]


def batch_rows(dataset: Any) -> BatchRows | None:
    """The dataset's ``BatchRows`` (its ``__batch_rows__()``), or None where it has none.

    Raises:
        TypeError: ``__batch_rows__`` returned something else than a ``BatchRows`` or None.
    """
    method = getattr(type(dataset), "__batch_rows__", None)
    rows = method(dataset) if method is not None else None
    if rows is not None and not isinstance(rows, BatchRows):
        raise TypeError(f"{type(dataset).__name__}.__batch_rows__() returned a {type(rows).__name__}, "
                        "not a BatchRows or None")
    return rows


def jobs_collate(rows: BatchRows) -> bool:
    """Whether ``RowJobs`` can gather ``rows`` and ``default_collate`` turns its columns into
    ``list(columns)`` (numeric dtypes, the shipped collate map): checked once an epoch, on a
    batch of one row; False for an empty dataset."""
    if rows.n == 0 or not can_run(rows.source):
        return False
    jobs = RowJobs(1, rows.source, rows.y_shape)
    try:
        one = jobs.prepare(0, np.zeros(1, dtype=np.int64))
    except Exception:  # columns that cannot be allocated: the general path, which raises per batch
        return False
    finally:
        jobs.drop(0)
    return one is not None and collate_columns(one, 1) is not None


class GatherFetcher(Builder):
    """``BatchRows`` arrays gathered by ``take_columns`` and collated column by column (the
    batches of ``__getitems__`` + ``default_collate``); a batch whose columns are not all
    native is built by ``fallback`` (``getitems`` or ``items``).

    Args:
        fallback: the dataset's general builder, with the same ``collate_fn``.
        rows: the dataset's ``BatchRows`` (arrays, not a ``Reader``).
    """

    __slots__ = ("_fallback", "_arrays")
    kind = BuilderKind.NATIVE_GATHER

    def __init__(self, fallback: Fetcher, rows: BatchRows, epoch_key: tuple[int, int]) -> None:
        super().__init__(fallback._collate, None, epoch_key)
        assert not isinstance(rows.source, Reader)
        self._fallback = fallback
        self._arrays = rows.source

    def _build(self, indices: Any, rec: Recorder) -> Any:
        idx = as_index_array(indices)
        columns = take_columns(self._arrays, idx)
        if columns is None:
            return self._fallback._build(indices, rec)
        rec.fetched()
        n = len(idx)
        out = collate_columns(columns, n)
        if out is None:  # not numeric (a structured dtype), or collation rules changed
            out = self._collate(BatchedItems._of(columns, n))
        rec.done()
        return out


class RowsFetcher(Builder):
    """The builder of an epoch whose workers build its batches in ``RowJobs``: it builds the
    batches no job holds (one whose ``prepare`` failed, or any batch of a thread that runs no
    job) with ``fallback``, a work item that is a ``PermutationSpan`` as its rows.

    Args:
        fallback: the builder of those batches (``native_gather``, ``getitems`` or ``items``).
        rows: the dataset's ``BatchRows`` (``jobs_collate`` accepted them).
    """

    __slots__ = ("_fallback", "rows")
    kind = BuilderKind.NATIVE_ROWS

    def __init__(self, fallback: Builder, rows: BatchRows, epoch_key: tuple[int, int]) -> None:
        super().__init__(fallback._collate, None, epoch_key)
        self._fallback = fallback
        self.rows = rows

    def _build(self, indices: Any, rec: Recorder) -> Any:
        if type(indices) is PermutationSpan:  # a batch of native jobs built here after all
            indices = indices.rows()
        return self._fallback._build(indices, rec)


class NativeJobs:
    """The native jobs of one epoch (``RowsFetcher``'s): what ``Epoch`` and its workers use.

    Args:
        rows: the dataset's ``BatchRows``.
        recs: the epoch's worker recorders (worker ``w`` runs jobs with ``recs[w]``).
        init_failures: per worker, the ``Failure`` of its ``worker_init_fn`` or None
            (written by the worker itself before it runs any job).

    Thread-safety: ``jobs`` and ``prepare`` on the consumer; ``recorder(w)`` on worker ``w``.
    """

    __slots__ = ("_rows", "_recs", "_init_failures")

    def __init__(self, rows: BatchRows, recs: list[Recorder], init_failures: list[Failure | None]) -> None:
        self._rows = rows
        self._recs = recs
        self._init_failures = init_failures

    def jobs(self, size: int) -> RowJobs:
        """The row-gather jobs of a window of ``size`` slots (one job per slot)."""
        return RowJobs(size, self._rows.source, self._rows.y_shape)

    def prepare(self, jobs: RowJobs, slot: int, indices: Any) -> Any:
        """The batch of ``indices`` as the builder returns it (a list of new columns), with
        ``slot``'s job set to fill it (consumer, before it publishes the batch); or None, and
        the slot holds no job: the builder then builds the batch (and raises what it raises)."""
        try:
            if type(indices) is PermutationSpan:  # the job computes the rows (_sampling/spans.py)
                return jobs.prepare_span(slot, indices.perm, indices.start, indices.count)
            if type(indices) is not np.ndarray:
                indices = as_index_array(indices)
            return jobs.prepare(slot, indices)
        except Exception:  # not indices, or columns that cannot be allocated (MemoryError):
            jobs.drop(slot)  # raised for its batch by the builder, on the general path, not here
            return None

    def recorder(self, worker_id: int) -> Recorder | None:
        """The recorder worker ``worker_id`` runs jobs with, or None when it must not run
        them: its ``worker_init_fn`` failed, which fails every batch it builds."""
        return self._recs[worker_id] if self._init_failures[worker_id] is None else None
