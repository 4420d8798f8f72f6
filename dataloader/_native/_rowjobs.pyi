"""Type stubs for the native row-gather jobs (private; see ``_rowjobs.pyx``)."""

from collections.abc import Sequence

import numpy as np

from dataloader._native._gather import Reader
from dataloader._native._permute import Permutation
from dataloader._native._ring import Window
from dataloader._native._stats import Recorder

def can_run(sources: Reader | Sequence[np.ndarray]) -> bool: ...

class RowJobs:
    """One native row-gather job per slot of an epoch's window."""

    def __init__(
        self, size: int, sources: Reader | Sequence[np.ndarray], y_shape: tuple[int, ...] | None = None
    ) -> None: ...
    @property
    def size(self) -> int: ...
    def prepare(self, slot: int, indices: np.ndarray) -> list[np.ndarray] | None: ...
    def prepare_span(self, slot: int, perm: Permutation, start: int, count: int) -> list[np.ndarray] | None: ...
    def drop(self, slot: int) -> None: ...
    def error(self, slot: int) -> Exception | None: ...
    def take(self, slot: int) -> Exception | None: ...
    def run(self, window: Window, k: int, rec: Recorder) -> bool: ...
    def work(self, window: Window, rec: Recorder, worker_id: int = -1) -> int:
        """A worker's loop without the GIL: claim, build and complete native batches.

        Returns:
            A claimed batch that is not native (the caller builds it), ``Status.END`` (the
            window is finished and every batch claimed, or cancelled) or ``Status.GATED``
            (``worker_id >= window.limit``).

        Raises:
            ValueError: the window is tagged or its size is not this ``RowJobs``' size.
        """
    def help(self, window: Window, k: int, rec: Recorder) -> int: ...
