/* Channel planes from interleaved uint8 pixels (used by _imgcopy.pyx).
 *
 * Plain C so that the compiler vectorises it.  A stride-3 byte deinterleave
 * needs a byte shuffle (pshufb), which baseline x86-64 (SSE2) lacks: GCC then
 * leaves the loop scalar (~1 ns a pixel, 2.7+ ms for 64 x 224x224x3).  On
 * x86-64 Linux with GCC or clang each function is built three times (AVX2,
 * SSSE3, baseline) and the dynamic loader picks the best one the CPU has (an
 * ifunc, resolved once).  Checked with -fopt-info-vec and objdump (GCC 12):
 * the AVX2 and SSSE3 clones of dl_planes3_u8 use 32- and 16-byte vectors, the
 * baseline clone stays scalar; dl_planes4_u8 is vectorised in all three.
 */
#ifndef DL_PLANES_H
#define DL_PLANES_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__)
#define DL_CLONES __attribute__((target_clones("avx2", "ssse3", "default")))
#else
#define DL_CLONES
#endif
#if defined(_MSC_VER)
#define DL_RESTRICT __restrict
#else
#define DL_RESTRICT __restrict__
#endif

/* o0[i], o1[i], o2[i] = src[3 i], src[3 i + 1], src[3 i + 2] for i < n. */
DL_CLONES static void dl_planes3_u8(
    const uint8_t *DL_RESTRICT src, ptrdiff_t n, uint8_t *DL_RESTRICT o0,
    uint8_t *DL_RESTRICT o1, uint8_t *DL_RESTRICT o2)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        o0[i] = src[3 * i];
        o1[i] = src[3 * i + 1];
        o2[i] = src[3 * i + 2];
    }
}

/* The same for 4 channels. */
DL_CLONES static void dl_planes4_u8(
    const uint8_t *DL_RESTRICT src, ptrdiff_t n, uint8_t *DL_RESTRICT o0,
    uint8_t *DL_RESTRICT o1, uint8_t *DL_RESTRICT o2, uint8_t *DL_RESTRICT o3)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        o0[i] = src[4 * i];
        o1[i] = src[4 * i + 1];
        o2[i] = src[4 * i + 2];
        o3[i] = src[4 * i + 3];
    }
}

#endif
