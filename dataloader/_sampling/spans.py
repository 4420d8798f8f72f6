"""Batches of a shuffled epoch as positions of its permutation, not yet as rows.

``RandomSampler`` (without replacement) draws each pass of an epoch as one keyed
``Permutation``; its rows at a run of positions are computed by ``Permutation.fill``
(~11 ns a row).  For an epoch whose batches the loader's workers build natively
(``_native/_rowjobs.pyx``), ``index_spans`` gives the batches of a ``BatchSampler`` over such
a sampler as ``PermutationSpan``s: the worker that builds a batch computes its rows, so the
consumer thread, which draws every batch of the epoch, does not.  The batches are exactly
those of ``BatchSampler._index_arrays`` (the same positions in the same order, cut every
``batch_size``); a batch that spans two passes is computed here, as an array.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from dataloader._sampling.base import readonly
from dataloader._sampling.batch import BatchSampler
from dataloader._sampling.permute import PermutationSpan
from dataloader._sampling.samplers import RandomSampler

__all__ = ["index_spans", "rebatch_spans"]


def rebatch_spans(spans: Iterator[PermutationSpan], size: int, drop_last: bool) -> Iterator[Any]:
    """Cut consecutive spans into batches of ``size`` rows: a ``PermutationSpan`` for a batch
    inside one span, an int64 array for one across two (``drop_last``: no short last batch)."""
    pending: list[np.ndarray] = []
    pending_n = 0
    for span in spans:
        m, pos = span.count, 0
        if pending_n:
            pos = min(size - pending_n, m)
            pending.append(PermutationSpan(span.perm, span.start, pos).rows())
            pending_n += pos
            if pending_n < size:
                continue
            yield readonly(np.concatenate(pending))
            pending, pending_n = [], 0
        full_end = pos + (m - pos) // size * size
        for start in range(pos, full_end, size):
            yield PermutationSpan(span.perm, span.start + start, size)
        if full_end < m:
            pending, pending_n = [PermutationSpan(span.perm, span.start + full_end, m - full_end).rows()], m - full_end
    if pending_n and not drop_last:
        yield readonly(np.concatenate(pending))


def index_spans(batch_sampler: Any) -> Iterator[Any] | None:
    """The batches of one epoch of ``batch_sampler`` as ``rebatch_spans`` gives them, or None
    (nothing drawn then) unless it is a ``BatchSampler`` over a ``RandomSampler`` without
    replacement, neither subclassed nor resumed mid-epoch by the batch sampler itself."""
    if type(batch_sampler) is not BatchSampler or batch_sampler._start:
        return None
    sampler = batch_sampler.sampler
    if type(sampler) is not RandomSampler or sampler.replacement:
        return None
    return rebatch_spans(sampler._index_spans(), batch_sampler.batch_size, batch_sampler.drop_last)
