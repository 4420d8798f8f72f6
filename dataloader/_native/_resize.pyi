"""Type stubs for the private ``dataloader._native._resize`` extension."""

import enum

import numpy as np
import numpy.typing as npt

class Filter(enum.IntEnum):
    BOX = 0
    BILINEAR = 1
    HAMMING = 2
    BICUBIC = 3
    LANCZOS = 4

ORDER_PILLOW_12: int
ORDER_PILLOW_13: int

def resize(
    src: npt.NDArray[np.uint8], out: npt.NDArray[np.uint8], filter_id: Filter, order: int = ...
) -> None: ...
