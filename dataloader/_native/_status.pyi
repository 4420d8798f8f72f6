"""Type stubs for the native status vocabulary (private; see ``_status.pxd``)."""

from enum import IntEnum

class Status(IntEnum):
    """What a native kernel returns instead of raising.

    Window statuses are negative (a claim or a wait otherwise returns a batch number
    ``>= 0``); row-gather statuses are positive (a failed read is ``-errno``).
    """

    OK = 0
    END = -1
    TIMED_OUT = -2
    CANCELLED = -3
    GATED = -4
    EMPTY = -5
    GATHER_EOF = 1
    GATHER_BAD_INDEX = 2
    GATHER_FAULT = 3
    GATHER_CLOSED = 4
