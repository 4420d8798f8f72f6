"""Type stub for the private native in-memory row gatherer (see _rows.pyx)."""

import numpy as np
import numpy.typing as npt

def can_take(source: object) -> bool: ...
def take_rows(
    source: np.ndarray, indices: npt.NDArray[np.int64], out: np.ndarray | None = None
) -> np.ndarray: ...
