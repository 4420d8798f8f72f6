"""Samplers with PyTorch's names, arguments, lengths and validation (``torch.utils.data.sampler``).

A sampler yields dataset indices (``int``), a batch sampler yields lists of them.  Differences
from PyTorch, all about randomness: ``generator`` is ``None``, an ``int`` seed or a
``numpy.random.Generator`` instead of a ``torch.Generator`` (see :mod:`dataloader._rng`);
seeded samplers count epochs themselves (``set_epoch``); exact random draws differ from torch's,
their distributions do not.

Laziness: no sampler builds the epoch's list of indices or batches.  ``SequentialSampler`` and
``RandomSampler`` keep constant memory for any length: the shuffle is a keyed Feistel permutation
(``dataloader._sampling.permute``) evaluated one chunk of indices at a time.

Loader fast path (internal): :meth:`BatchSampler._index_arrays` yields the same batches as
``iter(batch_sampler)`` but as 1-D int64 NumPy arrays.  Over our ``SequentialSampler``,
``RandomSampler``, ``WeightedRandomSampler`` and ``DistributedSampler`` it slices the sampler's
index chunks (``_index_chunks()``) directly, without per-index Python work; over anything else
(or a subclass overriding ``__iter__``) it converts each list.  The arrays may be read-only
views: do not modify them.  ``dataloader._sampling.batch.iter_index_arrays(batch_sampler)`` does
the same for any batch sampler.

Thread-safety: construct and iterate a sampler on one thread (the loader's consumer thread);
epoch claiming is locked, but an iterator must not be shared between threads.
"""

from __future__ import annotations

from dataloader._sampling.base import Sampler
from dataloader._sampling.batch import BatchSampler
from dataloader._sampling.samplers import (
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

# Defined in private modules; shown (and pickled) under their public home.
for _cls in (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
             WeightedRandomSampler):
    _cls.__module__ = __name__
del _cls
