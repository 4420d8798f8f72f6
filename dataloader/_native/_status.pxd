# cython: freethreading_compatible=True
# The native status vocabulary: what a nogil kernel returns instead of raising.
#
# One enum for every native module.  Two ranges, so that a status never reads as a value:
#
# - window statuses are negative: a claim or a wait returns a batch number (>= 0) or one
#   of these (``_window_core``, ``_ring``, ``_rowjobs``);
# - row-gather (job) statuses are positive: a gather returns OK (0), one of these, or
#   ``-errno`` from a failed ``preadv`` (``_rowcopy``, ``_gather``, ``_arrayrows``,
#   ``_rowjobs``).
#
# Raising rule: kernels return statuses; the layer attached to the interpreter raises, in
# one place per kind: the window's statuses in ``dataloader._engine.epoch``
# (``Epoch._raise_status``) and ``dataloader._engine.work`` (the worker loop); a gather's in
# the ``def`` entry that ran it (``Reader.error``, ``_arrayrows._take_rows`` with ``gather_fault``,
# ``RowJobs.error``).  Python sees the values as ``Status`` (an ``IntEnum`` in ``_status.pyi``).

cpdef enum Status:
    OK = 0
    # -- window statuses (negative: a batch number is >= 0) --
    END = -1           # claim: the epoch is finished and every batch claimed, or it was cancelled
    TIMED_OUT = -2     # wait / wait_any: timeout_s passed
    CANCELLED = -3     # wait / wait_any / publish / try_claim: the epoch was cancelled
    GATED = -4         # RowJobs.work: the worker is not admitted (window.limit)
    EMPTY = -5         # try_claim, and the nogil internals: nothing ready or claimable now
    # -- row-gather (job) statuses (positive: a failed read is -errno) --
    GATHER_EOF = 1        # the file ended before a requested row
    GATHER_BAD_INDEX = 2  # an index is outside [0, n) (its position is returned beside)
    GATHER_FAULT = 3      # SIGBUS in a guarded range: a mapped file is shorter than mapped
    GATHER_CLOSED = 4     # the Reader was closed
