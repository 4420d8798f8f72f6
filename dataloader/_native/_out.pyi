"""Type stubs for the one ``out=`` validator (private; see ``_out.pyx``)."""

import numpy as np
from numpy.typing import DTypeLike

def check_out_array(out: object, name: str, shape: tuple[int, ...], dtype: DTypeLike) -> np.ndarray:
    """``out`` once it is an array a kernel may fill with ``shape`` x ``dtype``.

    Raises:
        TypeError: ``out`` is not a ``numpy.ndarray``, or has another dtype.
        ValueError: ``out`` has another shape, is not C-contiguous, or is read-only.
    """
