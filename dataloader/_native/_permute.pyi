"""Type stub for the private native keyed permutation (see _permute.pyx)."""

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

ROUNDS: int
KEY_WORDS: int
MIN_DOMAIN_BITS: int
MAX_N: int

class Permutation:
    """A keyed bijection of ``[0, n)``: position -> index in O(1) time and memory."""

    def __init__(self, n: int, keys: Iterable[int]) -> None: ...
    def __len__(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def domain_bits(self) -> int: ...
    def index_at(self, position: int) -> int: ...
    def position_of(self, index: int) -> int: ...
    def fill(self, start: int, out: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...
    def take(
        self, positions: npt.NDArray[np.int64], out: npt.NDArray[np.int64] | None = None
    ) -> npt.NDArray[np.int64]: ...
