"""A small deterministic map-style dataset for CachedDataset tests."""

from __future__ import annotations

import numpy as np

from dataloader import Dataset


class Rows(Dataset):
    """``n`` items ``(np.full(3, float(i)), i)``: a float64 row of shape (3,) and an int label."""

    def __init__(self, n: int = 16) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return np.full(3, float(i)), i
