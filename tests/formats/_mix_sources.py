"""Sources for MixStream tests: ``Counter`` streams and a state saved mid-epoch."""

from __future__ import annotations

import itertools
import json

from dataloader import IterableDataset, MixDataset


class Counter(IterableDataset):
    """``base + i`` for ``i`` in ``range(n)`` (``n=None``: endless); no state of its own
    (a mix resumes it by replay)."""

    def __init__(self, base: int, n: int | None) -> None:
        self.base, self.n = base, n

    def __iter__(self):
        numbers = itertools.count() if self.n is None else range(self.n)
        return (self.base + i for i in numbers)


def state_after(mix: MixDataset, draws: int) -> dict:
    """``mix``'s state after ``draws`` samples of a fresh ``iter(mix)``, through JSON (as saved)."""
    it = iter(mix)
    for _ in range(draws):
        next(it)
    return json.loads(json.dumps(mix.state_dict()))
