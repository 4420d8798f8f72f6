"""The bounded shuffle buffer of a sample stream, with a state that names its samples.

WebDataset's ``shuffle(bufsize)`` rule: samples enter a buffer; once it holds ``size``
samples, each new sample is appended, one sample is drawn uniformly from the buffer, swapped
to the end and emitted; at the end of the stream the rest is emitted in random order.  A
sample can therefore leave at most ``size - 1`` places before its arrival and stays in the
buffer a geometric time (mean ``size`` arrivals); two samples more than about ``size`` apart
in the stream keep their order with high probability.  Memory: ``size`` samples.

The draws come from ``numpy.random.Generator(PCG64(SeedSequence(key)))``; the buffer keeps, for
each sample it holds, its *reference*, an int the caller gives (the reader's
``shard position << 32 | sample ordinal``), so a state is the references in buffer order plus
the generator's state: small, JSON-friendly, and exact when the same samples are put back.
The references travel as one base64 string of little-endian int64 (``encode_refs``): the loader
deep-copies a worker's state after every batch, and a string is copied for free where a list
of 1,000 references cost ~2 ms a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import base64

import numpy as np

__all__ = ["ShuffleBuffer", "decode_refs", "encode_refs"]


def encode_refs(refs: list[int]) -> str:
    """``refs`` (ints in ``[0, 2**63)``) as one base64 string of little-endian int64."""
    return base64.b64encode(np.asarray(refs, dtype="<i8").tobytes()).decode("ascii")


def decode_refs(text: str) -> list[int]:
    """The ints of an ``encode_refs`` string.

    Raises:
        ValueError: ``text`` is not such a string.
    """
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError, AttributeError) as exc:
        raise ValueError(f"shuffle buffer state: references are not base64 int64: {exc}") from None
    if len(raw) % 8:
        raise ValueError(f"shuffle buffer state: {len(raw)} bytes of references is not a whole number of int64")
    return np.frombuffer(raw, dtype="<i8").tolist()


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
        self._refs: list[int] = []
        self._samples: list[Any] = []

    def __len__(self) -> int:
        return len(self._samples)

    def push(self, ref: int, sample: Any) -> tuple[bool, Any]:
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
        """``{"refs": the references in buffer order (``encode_refs``), "rng": the generator's
        state}``."""
        return {"refs": encode_refs(self._refs), "rng": self._rng.bit_generator.state}

    def restore(self, state: dict[str, Any], samples: list[Any]) -> None:
        """Put back a ``state()``'s buffer: ``samples[i]`` is the sample of reference ``i``.

        Raises:
            ValueError: the counts differ, or the generator state is not PCG64's.
        """
        refs = decode_refs(state["refs"])
        if len(refs) != len(samples):
            raise ValueError(f"shuffle buffer state: {len(refs)} references but {len(samples)} samples found")
        rng_state = state["rng"]
        if not isinstance(rng_state, dict) or rng_state.get("bit_generator") != "PCG64":
            raise ValueError(f"shuffle buffer state: not a PCG64 generator state: {rng_state!r}")
        self._rng.bit_generator.state = rng_state
        self._refs, self._samples = refs, list(samples)
