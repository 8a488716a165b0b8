/* bf16_simd.h -- lp_round's bf16 rounding (precision.h) on 16 and 8 lanes:
 * to nearest even on the bits (an overflow carries into Inf), a NaN made
 * quiet, subnormals kept.  Integer operations, which no floating-point mode
 * changes.  Shared by precision.c's array loops and the GEMM micro-kernels'
 * epilogue (gemm_avx512_ukernel.h, gemm_avx2.c); x86-64 with GCC or Clang
 * only, after <immintrin.h>. */
#ifndef TRIAD_BF16_SIMD_H
#define TRIAD_BF16_SIMD_H

/* u (16 floats' bits) rounded: the bf16 value in the upper half, the lower zero. */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline __m512i bf16_bits16(__m512i u)
{
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), hi = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i quiet_bit = _mm512_set1_epi32(0x00400000), abs = _mm512_set1_epi32(0x7fffffff);
    const __m512i inf = _mm512_set1_epi32(0x7f800000);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, bias), lsb), hi);
    __m512i q = _mm512_and_si512(_mm512_or_si512(u, quiet_bit), hi);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf);
    return _mm512_mask_blend_epi32(nan, r, q);
}

/* The same on 8 floats' bits. */
__attribute__((target("avx2"), always_inline)) static inline __m256i bf16_bits8(__m256i u)
{
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), hi = _mm256_set1_epi32((int)0xffff0000u);
    const __m256i quiet_bit = _mm256_set1_epi32(0x00400000), abs = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, bias), lsb), hi);
    __m256i q = _mm256_and_si256(_mm256_or_si256(u, quiet_bit), hi);
    /* |u| > Inf as signed ints: both sides are non-negative */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf);
    return _mm256_blendv_epi8(r, q, nan);
}

#endif
