/* gemm_avx512_transpose.h -- the 16 x 16 in-register transpose of 32-bit
 * lanes that the AVX-512 kernels pack with (gemm_avx512.c, and
 * gemm_avx512bf16.c, where a lane is a pair of bf16).  Included after
 * <immintrin.h> by a file that defines AVX512_TARGET. */
#ifndef TRIAD_GEMM_AVX512_TRANSPOSE_H
#define TRIAD_GEMM_AVX512_TRANSPOSE_H

/* dst[x] = the even 128-bit quarters of src[x] then src[y]; dst[y] the odd. */
AVX512_TARGET
static inline __attribute__((always_inline)) void lanes128(__m512 *dst, const __m512 *src, int x, int y)
{
    dst[x] = _mm512_shuffle_f32x4(src[x], src[y], 0x88);
    dst[y] = _mm512_shuffle_f32x4(src[x], src[y], 0xdd);
}

/* In-register transpose: r[i] lane j  ->  r[j] lane i (16 x 16 floats). */
AVX512_TARGET
static inline __attribute__((always_inline)) void transpose16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        lanes128(t, r, i, i + 4);
        lanes128(t, r, i + 8, i + 12);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        lanes128(r, t, i, i + 8);
        lanes128(r, t, i + 4, i + 12);
    }
}

#endif
