"""Type stub for the private row-copy kernels (see _rowcopy.pyx).

The ``.ndf`` kernels are ``cdef ... noexcept nogil`` functions cimported by ``_gather.pyx``;
``take_rows`` runs the in-memory one on NumPy arrays (``ArrayDataset``).
"""

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
