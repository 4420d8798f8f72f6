"""Type stubs for the private ``dataloader._native._resize`` extension."""

import numpy as np
import numpy.typing as npt

ORDER_PILLOW_12: int
ORDER_PILLOW_13: int

def resize(
    src: npt.NDArray[np.uint8], out: npt.NDArray[np.uint8], filter_id: int, order: int = ...
) -> None: ...
