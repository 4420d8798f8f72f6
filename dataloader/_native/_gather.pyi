"""Type stub for the private native `.ndf` row gatherer (see _gather.pyx)."""

import numpy as np
import numpy.typing as npt

ADVICE: tuple[str, str, str]

class Reader:
    """Owns an open .ndf descriptor (and mapping); gathers rows without the GIL."""

    name: object
    mapped: bool
    n: int
    d: int
    l: int  # noqa: E741
    x_dtype: np.dtype
    y_dtype: np.dtype
    def __init__(
        self,
        fd: int,
        name: object,
        n: int,
        d: int,
        l: int,  # noqa: E741
        data_offset: int,
        use_mmap: bool,
        advice: int,
        x_dtype: npt.DTypeLike = ...,
        y_dtype: npt.DTypeLike = ...,
    ) -> None: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def gather(
        self,
        indices: npt.NDArray[np.int64],
        out_x: np.ndarray,
        out_y: np.ndarray,
    ) -> None:
        """Copy rows ``indices`` into ``out_x`` (B, d) and ``out_y`` (B, l).

        Raises:
            TypeError: ``indices`` is not a 1-D C-contiguous native int64 array; an out array
                is not an ndarray of ``x_dtype`` / ``y_dtype`` (``_out.check_out``).
            ValueError: an out array has the wrong shape, is not C-contiguous or writeable;
                the reader is closed.
            IndexError: an index outside ``[0, n)``, named (nothing is copied).
            OSError: the read failed, or a mapping was truncated (EIO, naming the file).
        """
    def gather_one(self, index: int, out_x: np.ndarray, out_y: np.ndarray) -> None:
        """Copy row ``index`` into ``out_x`` (d elements) and ``out_y`` (l elements).

        Raises:
            What ``gather`` raises; ``ValueError`` names the element count.
        """
    def error(self, status: int, index: int = -1) -> Exception:
        """The exception of a gather that returned ``status`` (``index``: a bad index)."""
