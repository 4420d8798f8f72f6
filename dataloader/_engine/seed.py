"""The loader's base seed: from ``seed``, a ``generator`` (NumPy's or torch's), or the OS."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dataloader._rng import check_seed

__all__ = ["base_seed", "pinned_seed"]

_PINNED = threading.local()  # .seed: what the next base_seed() on this thread returns


@contextmanager
def pinned_seed(seed: int) -> Iterator[None]:
    """The first ``base_seed()`` call on this thread within returns ``seed`` and draws nothing:
    a copied loader is rebuilt with its original's seed, and its ``__init__`` must not draw one
    from a ``generator`` that ``copy.copy`` shares with the original (the user's stream moved)."""
    _PINNED.seed = seed
    try:
        yield
    finally:
        _PINNED.seed = None


def base_seed(seed: int | None, generator: Any) -> int:
    """The base seed, an int in ``[0, 2**63)``.

    Raises:
        ValueError: both given, or ``seed`` out of range.
        TypeError: a ``generator`` of another type.
    """
    pinned = getattr(_PINNED, "seed", None)
    if pinned is not None:  # a copy's rebuild (pinned_seed): its arguments were checked when first built
        _PINNED.seed = None
        return pinned
    if seed is not None and generator is not None:
        raise ValueError("pass either seed or generator, not both")
    if generator is not None:
        torch = sys.modules.get("torch")  # a torch.Generator exists only if torch is imported
        if torch is not None and isinstance(generator, torch.Generator):
            # torch's own draw of a loader's base seed: one int64 in [0, 2**63).
            return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())
        if not isinstance(generator, np.random.Generator):
            raise TypeError(
                "generator must be a numpy.random.Generator, a torch.Generator or None, "
                f"got {type(generator).__name__}"
            )
        return int(generator.integers(0, 2**63))
    if seed is not None:
        seed = check_seed(seed)
        if seed >= 2**63:
            raise ValueError(f"{seed=} must be < 2**63")
        return seed
    entropy: Any = np.random.SeedSequence().entropy
    return int(entropy) % 2**63
