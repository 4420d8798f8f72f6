"""Contiguous, exactly-once sharding of a map-style dataset across ranks.

Shard ``s`` of ``N`` owns the contiguous index range
``[s * n // N, (s + 1) * n // N)`` (the data.nu seed's rule): the N shards
are disjoint and cover ``[0, n)`` exactly once for every n and N, their
lengths differ by at most one, and nothing is padded or dropped (unlike
torch's DistributedSampler, ranks may get one item more or less).  Within a
shard the order is a permutation that is a pure function of (seed, epoch).
"""

from __future__ import annotations

from dataloader._sampling.shard import ShardSampler

__all__ = ["ShardSampler"]

# Defined in a private module; shown (and pickled) under its public home.
ShardSampler.__module__ = __name__
