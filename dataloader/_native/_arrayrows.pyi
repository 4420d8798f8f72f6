"""Type stub for the rows of NumPy arrays (see _arrayrows.pyx): ``ArrayDataset``'s gather."""

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

def can_take(source: object) -> bool: ...
def take_rows(
    source: np.ndarray, indices: npt.NDArray[np.int64], out: np.ndarray | None = None
) -> np.ndarray: ...
def take_columns(
    arrays: Sequence[np.ndarray], indices: npt.NDArray[np.int64]
) -> tuple[np.ndarray, ...] | None: ...
