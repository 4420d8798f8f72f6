"""Fixtures of the CLI tests."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def table() -> np.ndarray:
    rng = np.random.default_rng(1)
    t = rng.standard_normal((103, 5))
    t[:, 4] = rng.integers(0, 4, 103)
    return t
