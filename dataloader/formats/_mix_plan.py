"""Which source each position of a :class:`~dataloader.formats.mix.MixDataset` comes from.

The choice is **counter-based**: position ``p`` of epoch ``e`` maps to ``(source, k)`` (``k``:
the how-many-th draw from that source) by a pure function of ``(seed, e, p)`` and the weights,
computed for a whole batch of positions at once with NumPy, with no RNG state anywhere; so it
is the same for any worker count, any order of evaluation, and after a resume.

**Stratified blocks.**  The weights become integer shares ``W_s`` summing to ``2**32``
(``F_s``: their running sums, ``F_S = 2**32``).  Positions are cut into blocks of
``B = 2**bits`` (``bits >= 12``, larger when a weight is below ``1/4096`` so every positive
weight gets a slot in every block).  Source ``s`` holds exactly ``T_s(b + 1) - T_s(b)``
positions of block ``b``, where ``T_s(b) = floor(F_s·bB/2**32) - floor(F_{s-1}·bB/2**32)``
is how many of the first ``b`` blocks' positions are ``s``'s: within 1 of ``w_s·bB`` at every
block boundary, so shares are exact to one position per block boundary, not just in
expectation.  In block ``b`` the slots ``[C_{s-1}, C_s)`` are source ``s``'s
(``C_s = G_s(b + 1) - G_s(b)``, ``G_s(b) = floor(F_s·bB/2**32)``), and a keyed bijection of
``[0, B)`` (three rounds of add-key, multiply-by-odd-key and xor-shift, keyed by
``splitmix64(seed, epoch, block)``) maps offsets to slots: so the order within a block is a
pseudo-random shuffle, new in every epoch, and slot ``j`` of source ``s`` is its draw
``k = T_s(b) + j - C_{s-1}``.

**The final block** (the stopping rules ``first_exhausted`` / ``all_exhausted``) is partial:
``r`` positions whose per-source counts ``c_s(r)`` are apportioned the same way
(``floor(F_s·r/2**32) - floor(F_{s-1}·r/2**32)``), ``r`` chosen so that no source gives more
items than it has (first) or every source gives all of them (all).  Its offsets are mapped to
slots by the same bijection on the next power of two, walking cycles until the slot is
``< r``.  Its counts do not depend on the epoch, so neither does the length.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["CACHED_BLOCKS", "CACHED_FINAL", "MAX_BLOCK_BITS", "MIN_BLOCK_BITS", "MixPlan", "shares_of", "splitmix64"]

SHARE_ONE = 1 << 32  # the integer shares sum to this: 2**-32 is the finest weight resolution
MIN_BLOCK_BITS = 12  # 4096-position blocks: stratified over 4096, shuffled within
MAX_BLOCK_BITS = 24  # a positive weight below 2**-24 of the total is refused (the block would be 16 Mi)
CACHED_BLOCKS = 1 << 16  # an epoch's per-block tables are kept up to 65,536 blocks (~6 MB with 3 sources)
CACHED_FINAL = 1 << 16  # and the final partial block's placement up to 65,536 positions (1 MB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser of ``x + golden`` (uint64 array in, uint64 array out, wrapping)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def shares_of(weights: Sequence[float] | np.ndarray, n_sources: int) -> np.ndarray:
    """Integer shares (uint64, summing to ``2**32``) of ``n_sources`` non-negative weights.

    Raises:
        ValueError: not one weight per source, a negative / NaN / infinite weight, all zero,
            or a positive weight below ``2**-24`` of the total (named).
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n_sources,):
        raise ValueError(f"weights must be {n_sources} numbers (one per source), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"weights must be finite and >= 0, got {w.tolist()}")
    given = w
    with np.errstate(over="ignore"):
        total = float(w.sum())
    if total <= 0:
        raise ValueError(f"weights must not all be zero, got {w.tolist()}")
    if not np.isfinite(total):  # finite weights whose sum overflows: the same ratios, scaled down
        w = w / w.max()
        total = float(w.sum())
    cum = np.floor(np.cumsum(w) / total * SHARE_ONE + 0.5).astype(np.uint64)
    cum[-1] = SHARE_ONE
    shares = np.diff(cum, prepend=np.uint64(0))
    small = np.flatnonzero((w > 0) & (shares < (SHARE_ONE >> MAX_BLOCK_BITS)))
    if small.size:
        s = int(small[0])
        raise ValueError(f"weights[{s}]={given[s]} is below 2**-{MAX_BLOCK_BITS} of the total; use 0 to leave it out")
    return shares


def _bits_for(shares: np.ndarray) -> int:
    """The block size's bits: every positive share holds at least one slot of every block."""
    smallest = int(shares[shares > 0].min())
    bits = MIN_BLOCK_BITS
    while (smallest << bits) < SHARE_ONE:
        bits += 1
    return bits


def _round_keys(key: np.ndarray) -> np.ndarray:
    """The three rounds' (add, odd multiplier) of each key: uint64, shape ``(len(key), 3, 2)``."""
    out = np.empty((len(key), 3, 2), dtype=np.uint64)
    for r in range(3):
        k = splitmix64(key + np.uint64(r))
        out[:, r, 0] = k
        out[:, r, 1] = (k >> np.uint64(32)) | np.uint64(1)
    return out


def _permute(x: np.ndarray, rounds: np.ndarray, bits: int) -> np.ndarray:
    """A keyed bijection of ``[0, 2**bits)`` applied to ``x`` (uint64): add, multiply by an odd
    number, xor-shift, three times (each step invertible modulo ``2**bits``).  ``rounds``:
    ``_round_keys`` of one key (shape ``(1, 3, 2)``) or of each element's (``(len(x), 3, 2)``)."""
    mask = np.uint64((1 << bits) - 1)
    shift = np.uint64(bits // 2 + 1)
    for r in range(3):
        x = (((x + rounds[:, r, 0]) & mask) * rounds[:, r, 1]) & mask
        x = x ^ (x >> shift)
    return x


class _Tables:
    """What placing positions of some blocks needs, per block: the permutation's round keys,
    the slot bounds ``C_s`` and ``T_s - C_{s-1}`` (a slot's draw is that plus the slot)."""

    __slots__ = ("rounds", "bounds", "base", "final")

    def __init__(self, rounds: np.ndarray, bounds: np.ndarray, base: np.ndarray) -> None:
        self.rounds, self.bounds, self.base = rounds, bounds, base
        self.final: tuple[np.ndarray, np.ndarray] | None = None


class MixPlan:
    """The position -> (source, draw) map of one weights setting (see the module docstring).

    Args:
        shares: the integer shares (``shares_of``), one per source.
        seed: the mix's key (int, ``0 <= seed < 2**64``).
        final: for the stopping rules, ``(full_blocks, counts)``: the number of whole blocks
            and the final partial block's per-source counts; ``None``: every
            block whole (``stop_on="never"`` and streams).
        length: the positions that will be asked for (``None``: unbounded); with at most
            ``CACHED_BLOCKS`` blocks, each epoch's per-block tables are computed once (the last
            two epochs kept) and a batch's placement is ~30 NumPy operations.

    Thread-safety: the tables cache is filled idempotently (two threads may both compute an
    epoch's tables; either result is the same), everything else is immutable.
    """

    __slots__ = ("shares", "cum", "bits", "seed", "full_blocks", "final_cum", "cached_blocks", "_cache")

    def __init__(self, shares: np.ndarray, seed: int, final: tuple[int, np.ndarray] | None = None,
                 length: int | None = None) -> None:
        self.shares = shares
        self.cum = np.cumsum(shares).astype(np.uint64)
        self.bits = _bits_for(shares)
        self.seed = seed
        self.full_blocks: int | None = None if final is None else final[0]
        self.final_cum = None if final is None else np.cumsum(final[1])
        blocks = None if length is None else -(-length >> self.bits)
        self.cached_blocks = blocks if blocks is not None and blocks <= CACHED_BLOCKS else None
        self._cache: tuple[tuple[int, _Tables], ...] = ()  # (epoch, tables), newest first

    def drawn_before(self, block: int) -> np.ndarray:
        """``T_s(block)`` for every source: the draws of each source in blocks ``< block`` (int64)."""
        g = [(int(c) * (block << self.bits)) >> 32 for c in self.cum]
        return np.diff(np.array(g, dtype=np.int64), prepend=np.int64(0))

    def _keys(self, epoch: int, blocks: np.ndarray) -> np.ndarray:
        base = splitmix64(np.array([self.seed, epoch], dtype=np.uint64))
        return splitmix64(splitmix64(blocks ^ base[1]) ^ base[0])

    def _tables(self, epoch: int, blocks: np.ndarray) -> _Tables:
        """The tables of ``blocks`` (uint64) in ``epoch``."""
        # G_s(b) = floor(F_s·b·2**bits / 2**32) = (F_s·b) >> (32 - bits): exact in uint64 for
        # blocks below 2**32 (positions below 2**44 at least).
        down = np.uint64(32 - self.bits)
        cum: np.ndarray = self.cum[None, :]
        start = ((cum * blocks[:, None]) >> down).astype(np.int64)
        end = ((cum * (blocks[:, None] + np.uint64(1))) >> down).astype(np.int64)
        bounds = end - start  # C_s: the slot bounds of each source in the block
        drawn = np.diff(start, axis=1, prepend=np.int64(0))  # T_s(b)
        base = drawn - np.concatenate([np.zeros((len(blocks), 1), np.int64), bounds[:, :-1]], axis=1)
        return _Tables(_round_keys(self._keys(epoch, blocks)), bounds[:, :-1].copy(), base)

    def _epoch_tables(self, epoch: int) -> _Tables | None:
        if self.cached_blocks is None:
            return None
        cache = self._cache  # one read: a tuple is replaced whole, never changed
        for cached_epoch, cached in cache:
            if cached_epoch == epoch:
                return cached
        tables = self._tables(epoch, np.arange(self.cached_blocks, dtype=np.uint64))
        if self.final_cum is not None and 0 < self.final_cum[-1] <= CACHED_FINAL:
            tables.final = self._place_final(np.arange(int(self.final_cum[-1]), dtype=np.int64), epoch)
        self._cache = ((epoch, tables),) + cache[:1]  # this epoch and the one before
        return tables

    def place(self, positions: np.ndarray, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """``(source, draw)`` of each position (int64 arrays in and out, positions >= 0).

        ``draw`` is the source's running count (not yet reduced modulo its length).
        """
        tables = self._epoch_tables(epoch)
        first = None if self.full_blocks is None else self.full_blocks << self.bits
        if first is None or not len(positions) or int(positions.max()) < first:
            return self._place_whole(positions, epoch, tables)
        whole = positions < first
        src = np.empty(len(positions), dtype=np.int64)
        draw = np.empty(len(positions), dtype=np.int64)
        src[whole], draw[whole] = self._place_whole(positions[whole], epoch, tables)
        rest = positions[~whole] - first
        if tables is not None and tables.final is not None:
            src[~whole], draw[~whole] = tables.final[0][rest], tables.final[1][rest]
        else:
            src[~whole], draw[~whole] = self._place_final(rest, epoch)
        return src, draw

    def _place_whole(self, positions: np.ndarray, epoch: int, tables: _Tables | None) -> tuple[np.ndarray, np.ndarray]:
        p = np.ascontiguousarray(positions, dtype=np.int64).view(np.uint64)  # >= 0: no copy
        blocks = p >> np.uint64(self.bits)
        if tables is None:
            unique, at = np.unique(blocks, return_inverse=True)
            tables = self._tables(epoch, unique)
        else:
            at = blocks.view(np.int64)
        slot = _permute(p & np.uint64((1 << self.bits) - 1), tables.rounds[at], self.bits).view(np.int64)
        # The source is how many of C_0 .. C_{S-2} the slot reaches.
        src = (slot[:, None] >= tables.bounds[at]).sum(axis=1, dtype=np.int64)
        return src, tables.base[at, src] + slot

    def _place_final(self, offsets: np.ndarray, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        assert self.final_cum is not None and self.full_blocks is not None
        size = int(self.final_cum[-1])
        bits = max(1, (size - 1).bit_length())
        rounds = _round_keys(self._keys(epoch, np.array([self.full_blocks], dtype=np.uint64)))
        slot = _permute(offsets.astype(np.uint64), rounds, bits)
        while True:  # cycle-walk into [0, size): fewer than 2 rounds on average
            out = slot >= np.uint64(size)
            if not out.any():
                break
            slot[out] = _permute(slot[out], rounds, bits)
        slot64 = slot.astype(np.int64)
        src = np.searchsorted(self.final_cum, slot64, side="right")
        lower = np.where(src > 0, self.final_cum[np.maximum(src - 1, 0)], 0)
        return src, self.drawn_before(self.full_blocks)[src] + slot64 - lower
