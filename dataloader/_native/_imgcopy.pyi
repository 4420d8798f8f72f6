"""Type stubs for the private ``dataloader._native._imgcopy`` extension."""

import numpy as np
import numpy.typing as npt

def collate_u8(images: list[npt.ArrayLike], out: npt.NDArray[np.uint8], nchw: bool) -> None: ...
def collate_f32(
    images: list[npt.ArrayLike],
    out: npt.NDArray[np.float32],
    nchw: bool,
    scale: npt.NDArray[np.float32],
    bias: npt.NDArray[np.float32],
) -> None: ...
