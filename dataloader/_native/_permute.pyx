# cython: freethreading_compatible=True
"""A keyed bijection of ``[0, n)`` evaluated position by position, without the GIL.

Construction (what ``Permutation`` computes):

* Domain: ``[0, 2**b)`` with ``b = max(MIN_DOMAIN_BITS, bit_length(n - 1))``: the smallest
  power of two ``>= n``, but at least 2**8.  For ``n > 128``, ``2**b < 2n``, so cycle-walking
  (below) takes fewer than 2 cipher steps per index on average (``2**b / n``) and at most
  ``2**b - n``; below that the walks are longer (up to 256 / n on average) over tiny ranges.
  Why the floor of 8 bits: Feistel halves of 1-2 bits make round functions with 2-4 possible
  inputs, and chi-square shows biased positions (up to 20x the expected statistic at
  ``n = 5``, domain 8); from halves of 3 bits on it is at noise level, 4 keep a margin.
* Cipher on the domain: an alternating (nearly balanced) Feistel network of ``ROUNDS`` = 8
  rounds.  A ``b``-bit value is split into a low part of ``w_lo`` bits and a high part of
  ``w_hi = b - w_lo`` bits; one round maps ``(hi, lo)`` to ``(lo, hi ^ F_i(lo))``, i.e.
  ``x -> (lo << w_hi) | (hi ^ F_i(lo))``, then the two widths swap.  Round 0 uses
  ``w_lo = b // 2``; for even ``b`` this is the classic balanced Feistel network, for odd ``b``
  the halves differ by one bit.  (The brief's "smallest even-bit domain" would be up to 2x
  larger, doubling the cycle-walking work; an unbalanced-by-one Feistel network has the same
  structure and the same proofs up to one bit.)  Each round is a bijection whatever ``F_i``
  is, so the network is one too, inverted by running the rounds backwards.
* Parity flip: every Feistel round is an even permutation of the domain, so a Feistel
  network alone only reaches even permutations, and cycle-walking turns that into a visible
  bias on small ranges (exhaustively, over all even permutations of 8 elements, n = 5 gets
  orders with 0.64x / 1.36x their fair probability).  A key bit decides whether the
  transposition (0 1) is applied before the rounds, so both parities are equally likely.
* Round function: ``F_i(lo) = top w_hi bits of mix(lo ^ key_i)`` where ``mix`` is the
  SplitMix64 finaliser (multiply, xor-shift, multiply): every output bit depends on every
  input bit (full avalanche), and its top bits are the best mixed.  ``key_i`` are ``ROUNDS``
  independent 64-bit words (drawn by the caller from the seeded NumPy generator), plus one
  word for the parity flip: ``KEY_WORDS`` = 9.
* Cycle-walking: ``index_at(p)`` applies the cipher to ``p`` and again to its output until
  the value is ``< n``; the result restricted to ``[0, n)`` is a bijection (Black & Rogaway,
  2002).  ``position_of`` walks the inverse cipher the same way.

Why 8 rounds: Luby-Rackoff shows 4 rounds of independent random functions give a strong
pseudorandom permutation; Patarin's bounds improve with more rounds, and our round
functions are keyed hash mixes rather than random functions, so we double that margin.
Positions and pairs of consecutive indices are uniform by chi-square over many seeds
(tests/sampling/test_permute.py).  This is a statistical shuffle for training, not cryptography:
the round function is not a cryptographic PRF.  As with ``numpy``'s ``permutation`` (a
128-bit state), only a tiny subset of the ``n!`` orders is reachable for large ``n``; what
training needs is that no low-order statistic (where an index lands, which indices share a
batch) is biased.

Speed: ``fill``/``take`` cycle-walk ``BLOCK`` values together and run the rounds on ``LANES``
independent values in lockstep (each value's rounds are a dependency chain of multiplies).

Memory: the struct below (88 bytes) whatever ``n``.  Thread-safety: immutable after
construction; every method may be called from any number of threads at once.
"""

cimport cython
from libc.stdint cimport int64_t, uint64_t

import numpy as np

ROUNDS = _ROUNDS
KEY_WORDS = _ROUNDS + 1  # round keys, then the word whose low bit is the parity flip

cdef enum:
    LANES = 8    # values encrypted in lockstep (independent multiply chains in flight)
    BLOCK = 256  # values cycle-walked together by fill / take (2 KiB on the stack)
MAX_N = (1 << 63) - 1
MIN_DOMAIN_BITS = 8


cdef inline uint64_t round_fn(uint64_t x, uint64_t key) noexcept nogil:
    x ^= key
    x *= 0xbf58476d1ce4e5b9ULL
    x ^= x >> 27
    x *= 0x94d049bb133111ebULL
    return x


cdef uint64_t encrypt(const feistel_t* f, uint64_t x) noexcept nogil:
    cdef int wl = f.lo_bits
    cdef int wh = f.hi_bits
    cdef int t, i
    cdef uint64_t lo, hi
    x ^= f.odd & <uint64_t>(x < 2)  # the transposition (0 1) when the parity flip is on
    for i in range(_ROUNDS):
        lo = x & ((<uint64_t>1 << wl) - 1)
        hi = x >> wl
        x = (lo << wh) | (hi ^ (round_fn(lo, f.keys[i]) >> (64 - wh)))
        t = wl
        wl = wh
        wh = t
    return x


cdef uint64_t decrypt(const feistel_t* f, uint64_t x) noexcept nogil:
    cdef int wl, wh, i
    cdef uint64_t lo, hi
    for i in range(_ROUNDS - 1, -1, -1):
        # Round i ran with (wl, wh) = (lo_bits, hi_bits) when i is even, swapped when odd.
        if i & 1:
            wl = f.hi_bits
            wh = f.lo_bits
        else:
            wl = f.lo_bits
            wh = f.hi_bits
        lo = x >> wh
        hi = (x & ((<uint64_t>1 << wh) - 1)) ^ (round_fn(lo, f.keys[i]) >> (64 - wh))
        x = (hi << wl) | lo
    x ^= f.odd & <uint64_t>(x < 2)
    return x


cdef uint64_t feistel_index_at(const feistel_t* f, uint64_t position) noexcept nogil:
    cdef uint64_t x = encrypt(f, position)
    while x >= f.n:
        x = encrypt(f, x)
    return x


cdef uint64_t feistel_position_of(const feistel_t* f, uint64_t index) noexcept nogil:
    cdef uint64_t x = decrypt(f, index)
    while x >= f.n:
        x = decrypt(f, x)
    return x


cdef inline void encrypt_lanes(const feistel_t* f, uint64_t* v) noexcept nogil:
    # encrypt() on LANES values in lockstep: the rounds of one value form a dependency
    # chain (two multiplies each), so interleaving independent values keeps the multiplier
    # busy (measured 2-3x faster than one value at a time; benchmarks/bench_permute.py).
    cdef int wl = f.lo_bits
    cdef int wh = f.hi_bits
    cdef int t, i, j
    cdef uint64_t lo, key, lo_mask
    for j in range(LANES):
        v[j] ^= f.odd & <uint64_t>(v[j] < 2)
    for i in range(_ROUNDS):
        key = f.keys[i]
        lo_mask = (<uint64_t>1 << wl) - 1
        for j in range(LANES):
            lo = v[j] & lo_mask
            v[j] = (lo << wh) | ((v[j] >> wl) ^ (round_fn(lo, key) >> (64 - wh)))
        t = wl
        wl = wh
        wh = t


cdef void walk_block(const feistel_t* f, uint64_t* v, int m, int64_t* out) noexcept nogil:
    # v[0:m] (positions < n, m <= BLOCK) -> the indices at them, written to out[0:m].  Every value is encrypted
    # once in lockstep groups; those that land outside [0, n) are gathered and encrypted
    # again, group by group, until none is left (cycle-walking, batched).
    cdef int pend[BLOCK]
    cdef uint64_t lanes[LANES]
    cdef int j, g, npend = 0
    g = 0
    while g + LANES <= m:  # first step: contiguous groups, no gathering
        encrypt_lanes(f, v + g)
        g += LANES
    for j in range(g, m):
        pend[npend] = j
        npend += 1
    while True:
        g = 0
        while g < npend:
            for j in range(LANES):
                # Pad a short last group with copies of its first value.
                lanes[j] = v[pend[g + j]] if g + j < npend else v[pend[g]]
            encrypt_lanes(f, lanes)
            for j in range(LANES):
                if g + j < npend:
                    v[pend[g + j]] = lanes[j]
            g += LANES
        npend = 0
        for j in range(m):
            if v[j] >= f.n:
                pend[npend] = j
                npend += 1
        if npend == 0:
            break
    for j in range(m):
        out[j] = <int64_t>v[j]


cdef void feistel_fill(
    const feistel_t* f, uint64_t start, int64_t* out, Py_ssize_t count
) noexcept nogil:
    cdef uint64_t v[BLOCK]
    cdef Py_ssize_t k = 0
    cdef int j, m
    while k < count:
        m = <int>min(<Py_ssize_t>BLOCK, count - k)
        for j in range(m):
            v[j] = start + <uint64_t>(k + j)
        walk_block(f, v, m, out + k)
        k += m


cdef Py_ssize_t feistel_take(
    const feistel_t* f, const int64_t* positions, int64_t* out, Py_ssize_t count
) noexcept nogil:
    """Map ``count`` positions; returns the first out-of-range one's offset, or -1."""
    cdef uint64_t v[BLOCK]
    cdef Py_ssize_t k
    cdef int j, m
    for k in range(count):
        if <uint64_t>positions[k] >= f.n:  # one unsigned compare: negatives too
            return k
    k = 0
    while k < count:
        m = <int>min(<Py_ssize_t>BLOCK, count - k)
        for j in range(m):
            v[j] = <uint64_t>positions[k + j]
        walk_block(f, v, m, out + k)
        k += m
    return -1


def _check_n(n):
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"n must be an int, got {type(n).__name__} {n!r}")
    n = n.__index__()
    if not 1 <= n <= MAX_N:
        raise ValueError(f"n={n} must be in [1, 2**63 - 1]")
    return n


def _check_position(value, n, name):
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    value = value.__index__()
    if not 0 <= value < n:
        raise IndexError(f"{name}={value} is outside [0, {n})")
    return value


@cython.final
cdef class Permutation:
    """A keyed bijection of ``[0, n)``: position -> index, in O(1) time and memory.

    Args:
        n: size of the permuted range, an int in ``[1, 2**63 - 1]`` (rows).
        keys: ``KEY_WORDS`` (9) ints in ``[0, 2**64)``: the ``ROUNDS`` round keys, then a
            word whose low bit turns the parity flip on (draw them all from a seeded
            generator: see ``dataloader._sampling.permute``).

    Raises:
        TypeError: ``n`` or a key is not an int, or ``keys`` is not a sequence.
        ValueError: ``n`` outside ``[1, 2**63 - 1]``, a key outside ``[0, 2**64)`` or not
            not exactly ``KEY_WORDS`` keys.

    Thread-safety: immutable; all methods may run concurrently (``fill``/``take`` release
    the GIL while they compute).
    """

    def __cinit__(self, n, keys):
        cdef int b
        cdef Py_ssize_t i
        n = _check_n(n)
        try:
            keys = list(keys)
        except TypeError:
            raise TypeError(
                f"keys must be a sequence of {KEY_WORDS} ints, got {keys!r}"
            ) from None
        if len(keys) != KEY_WORDS:
            raise ValueError(f"keys must hold {KEY_WORDS} ints, got {len(keys)}")
        for i in range(KEY_WORDS):
            k = keys[i]
            if isinstance(k, bool) or not hasattr(k, "__index__"):
                raise TypeError(f"keys[{i}] must be an int, got {type(k).__name__} {k!r}")
            k = k.__index__()
            if not 0 <= k < (1 << 64):
                raise ValueError(f"keys[{i}]={k} must be in [0, 2**64)")
            if i < _ROUNDS:
                self._f.keys[i] = <uint64_t>k
            else:
                self._f.odd = <uint64_t>k & 1
        b = max(MIN_DOMAIN_BITS, (n - 1).bit_length())
        self._f.n = <uint64_t>n
        self._f.lo_bits = b // 2
        self._f.hi_bits = b - b // 2

    def __len__(self):
        return <Py_ssize_t>self._f.n

    @property
    def n(self):
        """Size of the permuted range (rows)."""
        return int(self._f.n)

    @property
    def domain_bits(self):
        """``b``: the cipher runs on ``[0, 2**b)``, the smallest power of two >= n (>= 4)."""
        return self._f.lo_bits + self._f.hi_bits

    def index_at(self, position):
        """The index at ``position`` (an int in ``[0, n)``); raises IndexError outside it."""
        cdef uint64_t p = _check_position(position, self._f.n, "position")
        return int(feistel_index_at(&self._f, p))

    def position_of(self, index):
        """The position of ``index`` (an int in ``[0, n)``); the inverse of ``index_at``."""
        cdef uint64_t i = _check_position(index, self._f.n, "index")
        return int(feistel_position_of(&self._f, i))

    def fill(self, start, out):
        """Write the indices at positions ``start .. start + len(out) - 1`` into ``out``.

        Args:
            start: first position, an int >= 0 with ``start + len(out) <= n``.
            out: int64 array of shape (k,), C-contiguous, writable; overwritten.

        Returns:
            ``out``.

        Raises:
            IndexError: the positions run outside ``[0, n)``.
            TypeError, ValueError: ``out`` is not a writable C-contiguous int64 array.
        """
        cdef int64_t[::1] dst = out
        cdef Py_ssize_t count = dst.shape[0]
        cdef uint64_t s
        if count == 0:
            return out
        s = _check_position(start, self._f.n, "start")
        if <uint64_t>count > self._f.n - s:
            raise IndexError(
                f"positions {s}..{s + count - 1} (start={s}, len(out)={count}) "
                f"run past n={self._f.n}"
            )
        with nogil:
            feistel_fill(&self._f, s, &dst[0], count)
        return out

    def take(self, const int64_t[::1] positions not None, out=None):
        """``out[k] = index_at(positions[k])`` for an int64 array of positions.

        Args:
            positions: int64 array of shape (k,), C-contiguous; each in ``[0, n)``.
            out: int64 array of shape (k,), C-contiguous, writable, or None for a new one.

        Returns:
            ``out`` (a new int64 NumPy array when it was None).

        Raises:
            IndexError: a position outside ``[0, n)`` (nothing is written then).
            ValueError: ``out`` has another length.
        """
        cdef Py_ssize_t count = positions.shape[0]
        cdef Py_ssize_t bad
        cdef int64_t[::1] dst
        if out is None:
            out = np.empty(count, dtype=np.int64)
        dst = out
        if dst.shape[0] != count:
            raise ValueError(f"out has {dst.shape[0]} rows, positions has {count}")
        if count == 0:
            return out
        with nogil:
            bad = feistel_take(&self._f, &positions[0], &dst[0], count)
        if bad >= 0:
            raise IndexError(
                f"positions[{bad}]={positions[bad]} is outside [0, {self._f.n})"
            )
        return out

    def __reduce__(self):
        keys = [int(self._f.keys[i]) for i in range(_ROUNDS)] + [int(self._f.odd)]
        return (Permutation, (self.n, keys))

    def __repr__(self):
        return f"Permutation(n={self.n}, domain_bits={self.domain_bits}, rounds={_ROUNDS})"
