# Keyed bijection of [0, n) (see _permute.pyx for the construction and why it is good enough).
#
# All kernels are pure functions of the (immutable) feistel_t; they never touch Python
# objects and may run on any number of threads at once.

from libc.stdint cimport int64_t, uint64_t


cdef enum:
    _ROUNDS = 8             # Feistel rounds (and round keys)


cdef struct feistel_t:
    uint64_t n              # size of the permuted range, 1 <= n <= 2**63 - 1
    int lo_bits             # width of the low part in round 0 (b // 2)
    int hi_bits             # width of the high part in round 0 (b - b // 2)
    uint64_t keys[_ROUNDS]  # round keys
    uint64_t odd            # 1: swap 0 and 1 before the rounds (odd permutations too), else 0


# The cipher on [0, 2**(lo_bits + hi_bits)) and its inverse.
cdef uint64_t encrypt(const feistel_t* f, uint64_t x) noexcept nogil
cdef uint64_t decrypt(const feistel_t* f, uint64_t x) noexcept nogil

# The index at `position` / the position of `index` (both < n), by cycle-walking.
cdef uint64_t feistel_index_at(const feistel_t* f, uint64_t position) noexcept nogil
cdef uint64_t feistel_position_of(const feistel_t* f, uint64_t index) noexcept nogil

# out[k] = index at position start + k for k < count (caller checks start + count <= n).
cdef void feistel_fill(
    const feistel_t* f, uint64_t start, int64_t* out, Py_ssize_t count
) noexcept nogil

# out[k] = index at positions[k]; returns the offset of the first position outside [0, n)
# (nothing written then), or -1.
cdef Py_ssize_t feistel_take(
    const feistel_t* f, const int64_t* positions, int64_t* out, Py_ssize_t count
) noexcept nogil


cdef class Permutation:
    cdef feistel_t _f
