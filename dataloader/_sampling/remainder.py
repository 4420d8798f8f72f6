"""What is left of an epoch after some ranks consumed part of it: the elastic resume's order.

An epoch of ``DistributedSampler`` or ``ShardSampler`` is a *sequence* ``S`` of ``s`` dataset
indices split among ``W`` ranks by a *rule*:

- ``"distributed"`` (PyTorch's ``DistributedSampler``): each rank gets ``ns`` samples,
  ``ns = ceil(s / W)``, or with ``drop_last`` (and ``s % W != 0``) ``ceil((s - W) / W)``;
  rank ``r``'s ``j``-th sample is ``S[(r + W * j) % s]`` (positions past ``s`` repeat the
  sequence's head: the padding);
- ``"shard"`` (``ShardSampler``): rank ``r`` gets ``S[r * s // W : (r + 1) * s // W]`` in order.

A fresh epoch's sequence is the sampler's own: ``DistributedSampler``'s permutation of
``[0, n)`` (the identity without ``shuffle``); for ``ShardSampler`` the concatenation of its
``W`` shards' permuted ranges (shard ``r``'s ``j``-th index at position ``r * n // W + j``).

A *level* ``(W, consumed)`` says that rank ``r`` of ``W`` consumed the first ``consumed[r]`` of
its samples (``0 <= consumed[r] <= ``its share).  The *remainder* is the subsequence of ``S`` at
the positions no rank consumed, in increasing position order, restricted to ``[0, L)``: ``L = s``
except for the ``"distributed"`` rule with ``drop_last``, where ``L = ns * W`` (the tail the old
ranks dropped stays dropped).  A padding position consumed by a rank (``"distributed"``, past
``s``) consumes the head position it repeats.  The remainder is itself a sequence, split among
the new ranks by the same rule (so ``DistributedSampler``'s padding, or its ``drop_last`` cut,
applies to what remains), and may be cut again by a later level: a chain of levels describes an
epoch resumed elastically any number of times.

Memory: a level keeps ``O(W)`` segments of positions plus at most ``W - 1`` padding holes
(``O(W**2)`` ints at worst, when every rank stopped at a different count); nothing is ``s``-sized,
and index ``i`` of the remainder is computed in ``O(log W)`` (vectorised over chunks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from dataloader._constants import INDEX_CHUNK_ROWS
from dataloader._sampling.base import readonly

__all__ = ["RULES", "Level", "RemainderOrder", "shard_bounds", "share"]

RULES = ("distributed", "shard")
Indices = Callable[[np.ndarray], np.ndarray]


def share(rule: str, s: int, world: int, rank: int, drop_last: bool) -> int:
    """Samples rank ``rank`` of ``world`` gets of a sequence of ``s`` under ``rule``."""
    if rule == "shard":
        return (rank + 1) * s // world - rank * s // world
    if drop_last and s % world:
        return (s - 1) // world  # PyTorch's ceil((s - world) / world), in integers
    return -(-s // world)


def shard_bounds(s: int, world: int) -> np.ndarray:
    """``[0, s // W, 2 * s // W, ..., s]``: the ``W + 1`` shard boundaries (int64)."""
    return np.array([r * s // world for r in range(world + 1)], dtype=np.int64)


def rank_positions(rule: str, s: int, world: int, rank: int, drop_last: bool, first: int) -> Iterator[np.ndarray]:
    """Positions in the sequence of rank ``rank``'s samples ``first, first + 1, ...`` (chunks)."""
    ns = share(rule, s, world, rank, drop_last)
    offset = rank * s // world
    for lo in range(first, ns, INDEX_CHUNK_ROWS):
        j = np.arange(lo, min(lo + INDEX_CHUNK_ROWS, ns), dtype=np.int64)
        if rule == "shard":
            yield j + offset
            continue
        p = j * world + rank
        if ns * world > s:
            p %= s
        yield p


class Level:
    """One cut: the remainder of a sequence of ``s`` after rank ``r`` of ``world`` consumed
    ``consumed[r]`` samples (module docstring).  ``len(level)`` is the remainder's length;
    ``index(i)`` maps remainder positions (int64 array) to the sequence's positions.

    Raises:
        ValueError: a count outside ``[0, share]`` of its rank, or ``len(consumed) != world``.
    """

    def __init__(self, rule: str, s: int, world: int, consumed: Sequence[int], drop_last: bool) -> None:
        if len(consumed) != world:
            raise ValueError(f"elastic level has {len(consumed)} consumed counts for world size {world}")
        for r, c in enumerate(consumed):
            top = share(rule, s, world, r, drop_last)
            if not 0 <= c <= top:
                raise ValueError(f"elastic level: rank {r} consumed {c} samples of its {top}")
        if rule == "shard":
            bounds = shard_bounds(s, world)
            starts = bounds[:-1] + np.asarray(consumed, dtype=np.int64)
            self._setup(starts, bounds[1:] - starts, np.zeros(0, dtype=np.int64))
        else:
            self._distributed(s, world, list(consumed), drop_last)

    def _setup(self, starts: np.ndarray, counts: np.ndarray, holes: np.ndarray) -> None:
        """Runs ``[starts[k], starts[k] + counts[k])`` of plain positions (no holes), or the
        ``_rows`` segments (``_distributed``), minus ``holes`` (segment indices, sorted)."""
        self._starts = starts
        self._cum = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._holes = holes - np.arange(len(holes), dtype=np.int64)
        self._len = int(self._cum[-1]) - len(holes)
        self._rows: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int] | None = None

    def _distributed(self, s: int, world: int, consumed: list[int], drop_last: bool) -> None:
        ns = share("distributed", s, world, 0, drop_last)
        limit = min(s, ns * world)  # positions past it: padding, or the dropped tail
        rows = -(-limit // world)
        cuts = sorted({min(c, rows) for c in consumed} | {rows})
        segments: list[tuple[int, int, list[int]]] = []  # rows [a, b), columns (ranks)
        for a, b in zip(cuts, cuts[1:]):
            cols = [r for r in range(world) if consumed[r] <= a]
            if b * world > limit:  # the last row is cut at limit
                if b - 1 > a:
                    segments.append((a, b - 1, cols))
                a = b - 1
                cols = [r for r in cols if a * world + r < limit]
            if cols and b > a:
                segments.append((a, b, cols))
        row0 = np.array([a for a, _, _ in segments], dtype=np.int64)
        width = np.array([len(c) for _, _, c in segments], dtype=np.int64)
        counts = np.array([(b - a) * len(c) for a, b, c in segments], dtype=np.int64)
        col0 = np.concatenate(([0], np.cumsum(width)[:-1])).astype(np.int64) if segments else width
        flat = np.array([r for _, _, c in segments for r in c], dtype=np.int64)
        holes = sorted({
            self._below(p % s, segments, world)
            for r in range(world) for j in range(max(0, -(-(s - r) // world)), consumed[r])
            if not _taken((p := r + world * j) % s, world, consumed)
        }) if ns * world > s else []
        self._setup(np.zeros(0, dtype=np.int64), counts, np.asarray(holes, dtype=np.int64))
        self._rows = (row0, width, col0, flat, world)

    @staticmethod
    def _below(q: int, segments: list[tuple[int, int, list[int]]], world: int) -> int:
        """Segment positions before position ``q`` (``q`` itself is one of them)."""
        row, col = divmod(q, world)
        total = 0
        for a, b, cols in segments:
            if row >= b:
                total += (b - a) * len(cols)
            elif row >= a:
                total += (row - a) * len(cols) + sum(1 for r in cols if r < col)
        return total

    def __len__(self) -> int:
        return self._len

    def index(self, i: np.ndarray) -> np.ndarray:
        """The sequence's positions of remainder positions ``i`` (int64, each in ``[0, len)``)."""
        x = i + np.searchsorted(self._holes, i, side="right") if len(self._holes) else i
        if len(x) > 1 and bool((x[1:] >= x[:-1]).all()):  # ascending (a rank's chunk): by segment
            out = np.empty_like(x)
            cuts = np.searchsorted(x, self._cum).tolist()
            for k, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
                if hi > lo:
                    out[lo:hi] = self._in_segment(k, x[lo:hi])
            return out
        seg = np.searchsorted(self._cum, x, side="right") - 1
        off = x - self._cum[seg]
        if self._rows is None:
            return self._starts[seg] + off
        row0, width, col0, flat, world = self._rows
        w = width[seg]
        return (row0[seg] + off // w) * world + flat[col0[seg] + off % w]

    def _in_segment(self, k: int, x: np.ndarray) -> np.ndarray:
        """Positions of segment ``k``'s entries ``x`` (all in it), with scalar divisors."""
        if self._rows is None:  # a run of plain positions
            return x + (int(self._starts[k]) - int(self._cum[k]))
        row0, width, col0, flat, world = self._rows
        w, c0 = int(width[k]), int(col0[k])
        rows, cols = np.divmod(x - int(self._cum[k]), w)
        rows += int(row0[k])
        rows *= world
        rows += flat[c0 : c0 + w][cols]
        return rows


def _taken(q: int, world: int, consumed: list[int]) -> bool:
    j, r = divmod(q, world)
    return j < consumed[r]


class RemainderOrder:
    """A sequence after a chain of levels (module docstring), split among new ranks.

    Args:
        base: maps positions of the fresh epoch's sequence to dataset indices (int64 arrays).
        s: the fresh sequence's length.
        rule: ``"distributed"`` or ``"shard"``.
        drop_last: ``DistributedSampler``'s ``drop_last`` (ignored by ``"shard"``).
        levels: ``(world, consumed)`` pairs, oldest first.

    Raises:
        ValueError: a level's counts do not fit its sequence (``Level``).
    """

    def __init__(self, base: Indices, s: int, rule: str, drop_last: bool,
                 levels: Sequence[tuple[int, Sequence[int]]]) -> None:
        self._base = base
        self._rule = rule
        self._drop_last = drop_last
        self._levels: list[Level] = []
        for world, consumed in levels:
            level = Level(rule, s, world, consumed, drop_last)
            self._levels.append(level)
            s = len(level)
        self.length = s

    def indices(self, positions: np.ndarray) -> np.ndarray:
        """Dataset indices at remainder ``positions`` (int64)."""
        for level in reversed(self._levels):
            positions = level.index(positions)
        return self._base(positions)

    def share(self, world: int, rank: int) -> int:
        """Samples rank ``rank`` of ``world`` gets of the remainder."""
        return share(self._rule, self.length, world, rank, self._drop_last)

    def chunks(self, world: int, rank: int, first: int = 0) -> Iterator[np.ndarray]:
        """Rank ``rank`` of ``world``'s indices from its sample ``first`` on, as read-only chunks."""
        for p in rank_positions(self._rule, self.length, world, rank, self._drop_last, first):
            yield readonly(self.indices(p))
