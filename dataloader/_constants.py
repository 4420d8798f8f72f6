"""Constants shared by the loader, with their units in their names.

Each default says where it came from.
"""

from __future__ import annotations

__all__ = [
    "MAX_BATCH_SIZE",
    "MAX_ITEM_CONCURRENCY",
    "MAX_NUM_WORKERS",
    "MAX_WINDOW_BATCHES",
    "BUFFER_RETURN_TIMEOUT_S",
    "INDEX_CHUNK_ROWS",
    "PERMUTATION_CHUNK_ROWS",
    "DEFAULT_PREFETCH_DEPTH",
    "SHUTDOWN_JOIN_TIMEOUT_S",
    "ASYNC_STOP_RESERVE_S",
    "WAIT_SLICE_S",
    "WORKER_THREAD_PREFIX",
    "LANE_THREAD_PREFIX",
]

# Batches prefetched beyond one per worker; seed 000 (dataloader-rs) uses 2, which keeps
# a 2-core machine busy while the consumer runs a training step.
DEFAULT_PREFETCH_DEPTH = 2

# How long closing an iterator (or a loader: its epoch and its threads together) waits
# for batches in flight to finish before it gives up on them; the seed's Python
# binding waits the same 5 s.
SHUTDOWN_JOIN_TIMEOUT_S = 5.0

# What DataLoader.close() keeps of its SHUTDOWN_JOIN_TIMEOUT_S for stopping an AsyncDataset's
# event loop (dataloader._engine.async_loop), so that a loop whose epochs used up the rest (item
# coroutines that ignore cancellation) still stops, or is abandoned, within the budget: a
# cancellation pass and closing the loop take milliseconds.
ASYNC_STOP_RESERVE_S = 0.25

# Slices in which waits re-check for cancellation and run signal handlers (joining
# threads; the native window uses the same 50 ms, CONSUMER_SLICE_US in _ring.pyx);
# 50 ms keeps Ctrl-C responsive.
WAIT_SLICE_S = 0.05

# Thread names, as PyTorch users see them in a debugger: dataloader-worker-N.
WORKER_THREAD_PREFIX = "dataloader-worker"
LANE_THREAD_PREFIX = "dataloader-lane"

# Indices a sampler draws or materialises per step (int64: 64 Ki rows = 512 KiB, about an L2
# cache).  Big enough that the per-chunk Python overhead (~1 us) is noise next to the per-index
# work of a chunk, small enough that starting an epoch over 10**9 rows is instant and memory
# stays constant.  Changing it changes the exact draws of seeded samplers with replacement.
INDEX_CHUNK_ROWS = 1 << 16

# Indices of a shuffled epoch computed per step (``Permutation.fill``, ~11 ns a row: ~11 us a
# chunk).  The permutation is a pure function of the position, so this changes no index.
# Small because the consumer computes a chunk while it delivers nothing: with 64 Ki rows
# (0.7 ms) the workers of a cheap-batch epoch sat idle once their window was full (W1, 2
# workers, prefetch_depth 2, 3.13t, us a batch: 13.3 with 64 Ki rows, 14.7 with 8 Ki, 13.0 with
# 2 Ki, 11.0-11.4 with 1 Ki, 11.8 with 512, 12.3 with 256: the per-chunk Python, ~1 us, shows).
PERMUTATION_CHUNK_ROWS = 1 << 10

# How long a finished ImageBatch waits for its buffer pool's lock before giving
# up and simply freeing the buffer.  The lock is only ever held for a list
# operation (microseconds); the wait only runs out when a thread was frozen while
# holding it (daemon threads at interpreter shutdown), where blocking forever in a
# finalizer would hang the process.  1 s is four orders of magnitude above any
# legitimate wait measured on the 2-core reference machine.
BUFFER_RETURN_TIMEOUT_S = 1.0

# Upper bounds on options that size thread pools and the reorder ring.  They are far
# beyond any useful setting (PyTorch's default prefetch is 2 batches per worker; a
# machine has at most a few hundred cores) and exist so that a typo such as
# prefetch_depth=2**62 is a clear ValueError instead of an abort or a hang.
MAX_NUM_WORKERS = 1024
# A batch is cut with itertools.islice, which takes at most sys.maxsize items.
MAX_BATCH_SIZE = 2**63 - 1
MAX_ITEM_CONCURRENCY = 1024
MAX_WINDOW_BATCHES = 1 << 20
