"""The ``generator`` argument of samplers and ``random_split``: validation and per-epoch RNGs.

PyTorch samplers take a ``torch.Generator``.  Ours take one of three things, checked once
at construction by :func:`check_generator`:

* ``None``: every epoch draws from fresh OS entropy (like torch without a generator).
* an ``int`` seed ``s >= 0``: epoch ``e``'s order is a pure function of ``(s, e)``, drawn from
  ``numpy.random.Generator(PCG64(SeedSequence([s, e])))``.  Epochs start at 0 and count up
  by one at every ``__iter__``; ``set_epoch(e)`` chooses the epoch of the next ``__iter__``.
* a ``numpy.random.Generator``: drawn from directly; its state advances, so a run is
  reproducible given the generator's own seed.

Exact draws differ from torch's (different bit generator); the distributions are the same.
"""

from __future__ import annotations

import threading

import numpy as np

from dataloader._validate import check_int

__all__ = ["EpochRng", "check_generator", "check_seed", "rng_for"]


def check_seed(seed: object, name: str = "seed") -> int:
    """Return ``seed`` as a non-negative Python int (``numpy.random.SeedSequence`` needs ``>= 0``).

    Raises:
        TypeError: ``seed`` is not an integer (``bool`` is rejected too).
        ValueError: ``seed`` is negative.
    """
    return check_int(seed, name, minimum=0)


def check_generator(generator: object) -> None | int | np.random.Generator:
    """Validate a ``generator`` argument and return its canonical form.

    Returns:
        ``None``, a non-negative ``int`` seed, or the ``numpy.random.Generator`` itself.

    Raises:
        TypeError: any other type (a ``torch.Generator`` included), naming the type.
        ValueError: a negative int seed.
    """
    if generator is None or isinstance(generator, np.random.Generator):
        return generator
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        return check_seed(generator, "generator")
    kind = f"{type(generator).__module__}.{type(generator).__qualname__}"
    raise TypeError(
        "generator must be None, an int seed or a numpy.random.Generator, "
        f"got {kind} ({generator!r})"
    )


def rng_for(generator: None | int | np.random.Generator, epoch: int) -> np.random.Generator:
    """The RNG one epoch draws from, for an already checked ``generator``."""
    if generator is None:
        return np.random.default_rng()
    if isinstance(generator, np.random.Generator):
        return generator
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([generator, epoch])))


class EpochRng:
    """Epoch counter plus ``generator``: hands out one RNG per ``__iter__``.

    Thread-safety: :meth:`next_rng` and :meth:`set_epoch` take a lock, so concurrent calls
    each claim a distinct epoch; iterating one sampler from several threads at once is still
    not meaningful (each call is a separate epoch).  Picklable / deep-copyable: the copy
    continues from the same epoch with a fresh lock.
    """

    __slots__ = ("_epoch", "_lock", "generator")

    def __init__(self, generator: object) -> None:
        self.generator = check_generator(generator)
        self._epoch = 0
        self._lock = threading.Lock()

    @property
    def epoch(self) -> int:
        """The epoch the next :meth:`next_rng` will use."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next :meth:`next_rng` use ``epoch`` (an int >= 0)."""
        value = check_seed(epoch, "epoch")
        with self._lock:
            self._epoch = value

    def __getstate__(self) -> tuple[None | int | np.random.Generator, int]:
        return (self.generator, self._epoch)  # the lock is not picklable; a copy gets its own

    def __setstate__(self, state: tuple[None | int | np.random.Generator, int]) -> None:
        self.generator, self._epoch = state
        self._lock = threading.Lock()

    def claim(self) -> int:
        """Claim the current epoch (then count up by one) and return it."""
        with self._lock:
            epoch = self._epoch
            self._epoch = epoch + 1
        return epoch

    def next_rng(self) -> np.random.Generator:
        """Claim the current epoch (then count up by one) and return its RNG."""
        return rng_for(self.generator, self.claim())
