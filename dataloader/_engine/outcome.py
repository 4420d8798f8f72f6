"""What building a batch can come to besides a batch: the engine's outcome vocabulary.

- ``Failure``: an exception raised while building a batch, carried to the consumer, which
  re-raises it for that batch (``Failure.reraise``).
- ``END``: what a stream's builder returns once its stream has ended (never a batch).
- ``interrupted``: whether an outcome is an interrupt (Ctrl-C, ``sys.exit()``), which
  ``next()`` raises without counting a position.
- ``no_stop_iteration``: the one ``StopIteration`` rule for user code (PEP 479).
"""

from __future__ import annotations

import sys
from types import FrameType, TracebackType
from typing import Any

from dataloader._engine.errors import INTERRUPTS

__all__ = ["END", "Failure", "interrupted", "no_stop_iteration"]

END: Any = type("End", (), {"__repr__": lambda self: "END", "__slots__": ()})()
"""What ``StreamBatcher`` (``dataloader._engine.build``) returns for a stream that has ended (never a batch)."""


class Failure:
    """An exception raised while building a batch, carried to the consumer.

    The exception object keeps its original type and traceback; ``reraise``
    raises it on the consumer thread, where Python appends the consumer's frames.
    Each raise starts again from the traceback the worker caught, so one exception
    carried for several batches (a failing ``worker_init_fn``) does not grow.
    """

    __slots__ = ("exc", "tb")

    def __init__(self, exc: BaseException, tb: TracebackType | None = None) -> None:
        if tb is None:
            # Drop the engine's own leading frames: the worker loop's frame is still running
            # on its thread, and a traceback that holds it keeps the epoch's locals alive and
            # lets the consumer read a frame while its own thread tears it down (a data race
            # inside CPython that ThreadSanitizer reports on free-threaded builds).
            tb = _without_engine_frames(exc.__traceback__)
            exc.__traceback__ = tb
        self.exc: BaseException | None = exc
        self.tb = tb

    def again(self) -> Failure:
        """A new ``Failure`` of the same exception and traceback (one per batch)."""
        assert self.exc is not None
        return Failure(self.exc, self.tb)

    def reraise(self) -> None:
        exc, tb = self.exc, self.tb
        self.exc = self.tb = None
        assert exc is not None
        try:
            raise exc.with_traceback(tb)
        finally:
            del exc, tb


def interrupted(out: Any) -> bool:
    """``out`` is a ``Failure`` of an interrupt (``INTERRUPTS``: Ctrl-C, ``sys.exit()``): not
    the batch's own error, so ``next()`` raises it without counting a position."""
    return type(out) is Failure and isinstance(out.exc, INTERRUPTS)


def no_stop_iteration(exc: BaseException, who: str, doing: str) -> BaseException:
    """The one ``StopIteration`` rule: user code's ``StopIteration`` is a ``RuntimeError``
    (its cause), never the end of an epoch (PEP 479); any other exception is returned as is."""
    if not isinstance(exc, StopIteration):
        return exc
    error = RuntimeError(f"{who} raised StopIteration while {doing}")
    error.__cause__ = exc
    return error


def _without_engine_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` past its leading entries that are frames still running on this thread (the
    worker's own loop: the user's frames, and any finished frame, stay).

    Only frame identities are compared: reading another thread's frame (a lane's) while it
    is torn down is a data race inside CPython on free-threaded builds.
    """
    running = set()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        running.add(id(frame))
        frame = frame.f_back
    while tb is not None and tb.tb_next is not None and id(tb.tb_frame) in running:
        tb = tb.tb_next
    return tb
