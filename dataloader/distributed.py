"""``DistributedSampler``: PyTorch's per-rank slice of a dataset, with its exact padding rules.

The epoch's order is a list of ``len(dataset)`` indices (``0..n-1``, or a permutation when
``shuffle``).  Without ``drop_last`` it is padded by repeating itself from the start to
``total_size = num_samples * num_replicas``; with ``drop_last`` its tail is cut to
``total_size``.  Rank ``r`` takes positions ``r, r + num_replicas, r + 2 * num_replicas, ...``.
Hence position ``p`` holds ``order[p % n]`` and no padded list is ever built.

The shuffle permutation is a keyed Feistel permutation whose round keys are drawn from
``numpy.random.Generator(PCG64(SeedSequence([seed, epoch])))`` (constant memory; see
``dataloader._sampling.permute``) instead of ``torch.randperm`` seeded with ``seed + epoch``:
exact draws differ from torch's, the
properties (a pure function of ``(seed, epoch)``, identical on every rank, disjoint rank slices
covering the dataset) do not.  As in PyTorch the epoch changes only through :meth:`set_epoch`.
"""

from __future__ import annotations

from dataloader._sampling.distributed import DistributedSampler

__all__ = ["DistributedSampler"]

# Defined in a private module; shown (and pickled) under its public home.
DistributedSampler.__module__ = __name__
