"""Iterator fakes shared by the engine tests and the PyTorch parity tests."""

from __future__ import annotations


class Resumable:
    """A (broken) iterator that raises StopIteration once (6th call), then yields again
    (7..11) and stops for good: a stream must end at its first StopIteration."""

    def __init__(self) -> None:
        self.i = 0

    def __iter__(self) -> Resumable:
        return self

    def __next__(self) -> int:
        self.i += 1
        if self.i == 6 or self.i > 11:
            raise StopIteration
        return self.i
