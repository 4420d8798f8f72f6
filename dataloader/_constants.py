"""Tunable constants, each with its unit in the name and where its value came from."""

from __future__ import annotations

__all__ = ["INDEX_CHUNK_ROWS"]

# Indices a sampler draws or materialises per step (int64: 64 Ki rows = 512 KiB, about an L2
# cache).  Big enough that the per-chunk Python overhead (~1 us) is noise next to the per-index
# work of a chunk, small enough that starting an epoch over 10**9 rows is instant and memory
# stays constant.  Changing it changes the exact draws of seeded samplers with replacement.
INDEX_CHUNK_ROWS = 1 << 16
