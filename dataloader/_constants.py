"""Tunable constants, each with its unit in the name and where its value came from."""

from __future__ import annotations

__all__ = ["BUFFER_RETURN_TIMEOUT_S"]

# How long a finished ImageBatch waits for its buffer pool's lock before giving
# up and simply freeing the buffer.  The lock is only ever held for a list
# operation (microseconds); the wait only runs out when a thread was frozen while
# holding it (daemon threads at interpreter shutdown), where blocking forever in a
# finalizer would hang the process.  1 s is four orders of magnitude above any
# legitimate wait measured on the 2-core reference machine.
BUFFER_RETURN_TIMEOUT_S = 1.0
