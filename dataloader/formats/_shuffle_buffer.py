"""The bounded shuffle buffer of a sample stream, with a state that names its samples.

WebDataset's ``shuffle(bufsize)`` rule: samples enter a buffer; once it holds ``size``
samples, each new sample is appended, one sample is drawn uniformly from the buffer, swapped
to the end and emitted; at the end of the stream the rest is emitted in random order.  A
sample can therefore leave at most ``size - 1`` places before its arrival and stays in the
buffer a geometric time (mean ``size`` arrivals); two samples more than about ``size`` apart
in the stream keep their order with high probability.  Memory: ``size`` samples.

The draws come from ``numpy.random.Generator(PCG64(SeedSequence(key)))``; the buffer keeps, for
each sample it holds, its *reference* (whatever the caller gives: the reader's
``[shard position, sample ordinal]``), so a state is the references in buffer order plus the
generator's state: small, JSON-friendly, and exact when the same samples are put back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ShuffleBuffer"]


class ShuffleBuffer:
    """A buffer of at most ``size`` samples (``size >= 2``), each with its reference.

    Args:
        size: samples held; larger shuffles better (see the module) and costs ``size`` samples
            of memory per worker.
        key: the generator's seed sequence entropy (e.g. ``(seed, epoch, slot)``).

    Thread-safety: one thread (the stream that owns it).
    """

    def __init__(self, size: int, key: Sequence[int]) -> None:
        self.size = size
        self._rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(key))))
        self._refs: list[Any] = []
        self._samples: list[Any] = []

    def __len__(self) -> int:
        return len(self._samples)

    def push(self, ref: Any, sample: Any) -> tuple[bool, Any]:
        """Add a sample; ``(True, emitted sample)`` once the buffer is full, else ``(False, None)``."""
        self._refs.append(ref)
        self._samples.append(sample)
        if len(self._samples) < self.size:
            return False, None
        return True, self.pop()

    def pop(self) -> Any:
        """Emit one sample drawn uniformly from the buffer (it must not be empty)."""
        k = int(self._rng.integers(len(self._samples)))
        refs, samples = self._refs, self._samples
        refs[k], refs[-1] = refs[-1], refs[k]
        samples[k], samples[-1] = samples[-1], samples[k]
        refs.pop()
        return samples.pop()

    def state(self) -> dict[str, Any]:
        """``{"refs": [reference, ...] in buffer order, "rng": the generator's state}`` (copies)."""
        return {"refs": [list(r) for r in self._refs], "rng": self._rng.bit_generator.state}

    def restore(self, state: dict[str, Any], samples: list[Any]) -> None:
        """Put back a ``state()``'s buffer: ``samples[i]`` is the sample of ``state["refs"][i]``.

        Raises:
            ValueError: the counts differ, or the generator state is not PCG64's.
        """
        refs = [list(r) for r in state["refs"]]
        if len(refs) != len(samples):
            raise ValueError(f"shuffle buffer state: {len(refs)} references but {len(samples)} samples found")
        rng_state = state["rng"]
        if not isinstance(rng_state, dict) or rng_state.get("bit_generator") != "PCG64":
            raise ValueError(f"shuffle buffer state: not a PCG64 generator state: {rng_state!r}")
        self._rng.bit_generator.state = rng_state
        self._refs, self._samples = refs, list(samples)
