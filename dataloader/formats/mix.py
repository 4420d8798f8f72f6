"""``MixDataset``: several sources mixed by weight, each sample's source a pure function of
``(seed, epoch, position)`` (``dataloader.formats._mix_plan``).

Map-style sources give a map-style dataset (a sampler-level mix: index ``i`` of the mix is
draw ``k`` of source ``s``, item ``k mod len(source)``), so any sampler, ``DistributedSampler``
and ``ShardSampler`` included, shuffles and splits it as any dataset, and the loader's exact
resume holds as is.  Iterable sources give a :class:`~dataloader.formats.mix_stream.MixStream`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dataloader._context import thread_state
from dataloader._datasets.base import Dataset, IterableDataset
from dataloader._datasets.concat import grouped_items
from dataloader._indices import as_index_array
from dataloader._rng import check_seed
from dataloader._validate import check_int
from dataloader.formats._mix_plan import MixPlan, shares_of
from dataloader.formats._mix_stops import check_stop, stop_plan

__all__ = ["MixDataset"]


class MixDataset(Dataset[Any]):
    """Samples of several datasets mixed by weight (PyTorch-style map-style dataset).

    Args:
        sources: a non-empty sequence of map-style datasets with ``__len__`` (read once), or
            of :class:`~dataloader.IterableDataset` s: then the result is a
            :class:`~dataloader.formats.mix_stream.MixStream` (a stream-level mix; see there).
        weights: one non-negative number per source (any scale: they are normalised); 0 leaves
            a source out.  Shares are exact per block of 4096 positions (see below).
        seed: int >= 0; with the epoch and the position it decides each sample's source.
        stop_on: how long the mix is (``len``):

            - ``"first_exhausted"`` (default): until the first source would have to give an item
              a second time: every source's items at most once, the source that runs out first
              exactly once;
            - ``"all_exhausted"``: until every source has given all its items at least once;
              smaller sources go round again (item ``k mod len``), in order;
            - ``"never"``: ``num_samples`` positions (default: the sum of the sources' lengths),
              every source cycling.
        num_samples: the length with ``stop_on="never"`` (int >= 0); ``None``: the sum of the
            sources' lengths.  Refused with the other rules.

    Which source and item index ``i`` is: a pure, counter-based function of ``(seed, epoch, i)``
    and the weights (no RNG state; ``dataloader.formats._mix_plan``): positions come in blocks
    of 4096 (more when a weight is below 1/4096) holding each source's exact share,
    shuffled within the block anew every epoch; a source's items are drawn in passes
    (``0, 1, ..., len - 1``, then again), block after block, in a shuffled order within each
    block; the loader's sampler shuffles the positions further.  The
    epoch is the loader's (inside a loader's batch), else the last :meth:`set_epoch`.
    ``len`` depends on the lengths, the weights and ``stop_on`` only, never on the epoch.

    A batch (``__getitems__``) is placed with NumPy in one pass, grouped by source and fetched
    with each source's own ``__getitems__`` (``ConcatDataset``'s grouping), so a batch of
    columns (``BatchedItems``) stays one.

    Thread-safety: reading (``[]``, ``__getitems__``, ``len``, ``location``) from any number of
    threads is safe; :meth:`set_weights` swaps one immutable plan (readers see the old or the
    new one, never a mix).

    Raises:
        TypeError: a source that is neither a sized map-style dataset nor all iterable.
        ValueError: no source, a bad weight (negative, NaN, all zero, one per source, or a
            positive one below ``2**-24`` of the total), an empty source with a positive weight,
            an unknown ``stop_on``, ``num_samples`` with another rule.
    """

    def __new__(cls, sources: Sequence[Any] | None = None, *args: Any, **kwargs: Any) -> Any:
        # No sources: a copy or an unpickling (``cls.__new__(cls)``), whose __dict__ follows.
        if cls is MixDataset and sources is not None and _all_iterable(sources):
            from dataloader.formats.mix_stream import MixStream  # lazy: only streams need it

            return MixStream(sources, *args, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        sources: Sequence[Any],
        weights: Sequence[float] | np.ndarray,
        *,
        seed: int = 0,
        stop_on: str = "first_exhausted",
        num_samples: int | None = None,
    ) -> None:
        self.sources = list(sources)
        if not self.sources:
            raise ValueError("MixDataset needs at least one source, got none")
        self.lengths = np.array([_length(d, i) for i, d in enumerate(self.sources)], dtype=np.int64)
        self.stop_on, self.num_samples = check_stop(stop_on, num_samples)
        self.seed = check_seed(seed)
        self._epoch = 0
        self._current = self._make_plan(weights)  # (plan, length): swapped together

    def _make_plan(self, weights: Sequence[float] | np.ndarray) -> tuple[MixPlan, int]:
        shares = shares_of(weights, len(self.sources))
        empty = np.flatnonzero((shares > 0) & (self.lengths == 0))
        if empty.size:
            raise ValueError(f"sources[{int(empty[0])}] is empty but has a positive weight")
        if self.stop_on == "never":
            n = int(self.lengths.sum()) if self.num_samples is None else self.num_samples
            return MixPlan(shares, self.seed, length=n), n
        return stop_plan(shares, self.seed, self.lengths, self.stop_on)

    @property
    def weights(self) -> np.ndarray:
        """The weights in use, normalised to sum to 1 (float64, one per source; a copy)."""
        return self._current[0].shares.astype(np.float64) / float(1 << 32)

    def set_weights(self, weights: Sequence[float] | np.ndarray) -> None:
        """Mix by ``weights`` from now on (every index read after the call).

        Call it between epochs, or after ``loader.load_state_dict(state)`` and before iterating:
        the rest of a resumed epoch then uses the new weights from its next sample.  With
        ``stop_on="never"`` the length stays; with the other rules it follows the weights, so the
        loader's ``load_state_dict`` refuses a mid-epoch state saved under other weights (its
        recorded length differs): change them at an epoch boundary there.  Items drawn before
        the change may come again after it within that epoch.

        Raises:
            ValueError: bad weights (as in the constructor).
        """
        self._current = self._make_plan(weights)

    def set_epoch(self, epoch: int) -> None:
        """The epoch used outside a loader's batch (inside, the loader's own epoch is used)."""
        self._epoch = check_seed(epoch, "epoch")

    def __len__(self) -> int:
        return self._current[1]

    def _epoch_now(self) -> int:
        key = thread_state().epoch_key
        return self._epoch if key is None else key[1]

    def source_of(self, indices: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(source, item)`` of each index (1-D int64 arrays): ``mix[i] == sources[s][item]``.

        Args:
            indices: ints (a sequence or an integer array), each in ``[-len, len)``.

        Raises:
            IndexError: an index out of range (named).
        """
        idx = as_index_array(indices)
        plan, n = self._current
        if idx.size:
            lo, hi = int(idx.min()), int(idx.max())
            if lo < -n or hi >= n:
                raise IndexError(f"index {lo if lo < -n else hi} is out of range for MixDataset of length {n}")
            if lo < 0:
                idx = np.where(idx < 0, idx + n, idx)
        src, draw = plan.place(idx, self._epoch_now())
        if self.stop_on != "first_exhausted":  # first_exhausted never draws past a source's end
            draw %= self.lengths[src]
        return src, draw

    def __getitem__(self, index: int) -> Any:
        (s,), (k,) = self.source_of([check_int(index, "index")])
        return self.sources[int(s)][int(k)]

    def __getitems__(self, indices: Sequence[int] | np.ndarray) -> Sequence[Any]:
        """Items ``indices``: placed at once, fetched per source with its batch path."""
        src, item = self.source_of(indices)
        return grouped_items(self.sources, src, item) if len(src) else []

    def location(self, index: int) -> str | None:
        """The item's source's ``location(item)`` where the source has one, else None."""
        (s,), (k,) = self.source_of([check_int(index, "index")])
        method = getattr(self.sources[int(s)], "location", None)
        return method(int(k)) if callable(method) else None

    def __repr__(self) -> str:
        w = ", ".join(f"{x:.4g}" for x in self.weights)
        return f"MixDataset({len(self.sources)} sources, weights=[{w}], stop_on={self.stop_on!r}, len={len(self)})"


def _all_iterable(sources: Sequence[Any]) -> bool:
    if isinstance(sources, Iterator):  # read here, it would reach __init__ empty
        raise TypeError(f"MixDataset sources must be a sequence (e.g. a list), got an iterator "
                        f"({type(sources).__name__})")
    kinds = [isinstance(d, IterableDataset) for d in sources]
    if any(kinds) and not all(kinds):
        raise TypeError("MixDataset sources must be all map-style or all IterableDataset, not both")
    return bool(kinds) and all(kinds)


def _length(dataset: Any, i: int) -> int:
    try:
        n = len(dataset)
    except TypeError:
        raise TypeError(f"sources[{i}] ({type(dataset).__name__}) must be a map-style dataset with __len__") from None
    return check_int(n, f"len(sources[{i}])", minimum=0)
