"""Constants shared by the loader, with their units in their names.

Each default says where it came from.
"""

from __future__ import annotations

__all__ = [
    "BUFFER_RETURN_TIMEOUT_S",
    "INDEX_CHUNK_ROWS",
    "DEFAULT_PREFETCH_DEPTH",
    "SHUTDOWN_JOIN_TIMEOUT_S",
    "WAIT_SLICE_S",
    "WORKER_THREAD_PREFIX",
    "LANE_THREAD_PREFIX",
]

# Batches prefetched beyond one per worker; seed 000 (dataloader-rs) uses 2, which keeps
# a 2-core machine busy while the consumer runs a training step.
DEFAULT_PREFETCH_DEPTH = 2

# How long closing an iterator (or a loader) waits for batches in flight to finish
# before it gives up on them; the seed's Python binding waits the same 5 s.
SHUTDOWN_JOIN_TIMEOUT_S = 5.0

# Slices in which Python-level waits (iterable workers, lanes) re-check for
# cancellation and run signal handlers; 50 ms keeps Ctrl-C responsive.
WAIT_SLICE_S = 0.05

# Thread names, as PyTorch users see them in a debugger: dataloader-worker-N.
WORKER_THREAD_PREFIX = "dataloader-worker"
LANE_THREAD_PREFIX = "dataloader-lane"

# Indices a sampler draws or materialises per step (int64: 64 Ki rows = 512 KiB, about an L2
# cache).  Big enough that the per-chunk Python overhead (~1 us) is noise next to the per-index
# work of a chunk, small enough that starting an epoch over 10**9 rows is instant and memory
# stays constant.  Changing it changes the exact draws of seeded samplers with replacement.
INDEX_CHUNK_ROWS = 1 << 16

# How long a finished ImageBatch waits for its buffer pool's lock before giving
# up and simply freeing the buffer.  The lock is only ever held for a list
# operation (microseconds); the wait only runs out when a thread was frozen while
# holding it (daemon threads at interpreter shutdown), where blocking forever in a
# finalizer would hang the process.  1 s is four orders of magnitude above any
# legitimate wait measured on the 2-core reference machine.
BUFFER_RETURN_TIMEOUT_S = 1.0
