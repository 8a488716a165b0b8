/* gemm_avx512_ukernel.h -- the frame of the AVX-512 micro-kernels
 * (gemm_avx512.c's fp32 FMAs, gemm_avx512bf16.c's VDPBF16PS), whose sums
 * differ and whose edges and C update are the same: a register block of
 * GEMM_MR rows by GEMM_NV vectors of 16 columns; edges handled with exact
 * row counts (one micro-kernel per count) and masked columns, so no tile
 * is computed twice; C prefetched while the block is summed; then C =
 * alpha acc, or alpha acc + beta C (beta == 0 never reads C: it may hold
 * NaN garbage), with the epilogue's bias and rounding in registers.
 * Included after <immintrin.h> and bf16_simd.h by a file that defines
 * AVX512_TARGET, GEMM_MR and GEMM_NV; its ukernel_body sums between
 * ukernel_open and ukernel_close, and UKERNEL_ROWS makes ukernel_rows. */
#ifndef TRIAD_GEMM_AVX512_UKERNEL_H
#define TRIAD_GEMM_AVX512_UKERNEL_H

/* The columns' masks (the first nr of GEMM_NV x 16), C's rows prefetched,
 * the accumulators zeroed. */
AVX512_TARGET
static inline __attribute__((always_inline)) void ukernel_open(const int rows, const float *c, long ldc, int nr,
                                                               __m512 acc[GEMM_MR][GEMM_NV], __mmask16 mask[GEMM_NV])
{
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; v++) {
        int w = nr - 16 * v;
        mask[v] = w >= 16 ? (__mmask16)0xffff : w > 0 ? (__mmask16)((1u << w) - 1) : 0;
    }
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++) {         /* C arrives while we compute */
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) acc[i][v] = _mm512_setzero_ps();
}

/* C (rows, the columns of mask) = alpha acc (+ beta C), then the epilogue
 * (gemm_ukernel_fn): + bias, rounded.  The bias sum is the plain fp32 one
 * unless the kernel's mode (MXCSR.FTZ) flushed it, which leaves a zero
 * where the operands do not cancel: such a row is stored without the
 * epilogue and left to the caller. */
AVX512_TARGET
static inline __attribute__((always_inline)) unsigned ukernel_close(const int rows, __m512 acc[GEMM_MR][GEMM_NV],
                                                                    const __mmask16 mask[GEMM_NV], float *restrict c,
                                                                    long ldc, float alpha, float beta,
                                                                    const float *bias, int round)
{
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), bv[GEMM_NV], nb[GEMM_NV];
    unsigned left = 0;
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; v++) {
        bv[v] = bias ? _mm512_maskz_loadu_ps(mask[v], bias + v * 16) : _mm512_setzero_ps();
        /* -bias by its sign bit (an FTZ subtraction would flush a subnormal bias) */
        nb[v] = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(bv[v]), _mm512_set1_epi32((int)0x80000000u)));
    }
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        __m512 r[GEMM_NV], s[GEMM_NV];
        __mmask16 flushed = 0;
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) {
            r[v] = _mm512_mul_ps(va, acc[i][v]);
            if (beta != 0.0f) r[v] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], ci + v * 16), r[v]);
            s[v] = r[v];
            if (bias) {
                s[v] = _mm512_add_ps(r[v], bv[v]);
                flushed |= _mm512_mask_cmp_ps_mask(mask[v], s[v], _mm512_setzero_ps(), _CMP_EQ_OQ) &
                           _mm512_cmp_ps_mask(r[v], nb[v], _CMP_NEQ_UQ);
            }
        }
        if (flushed) {
            left |= 1u << i;
        } else {
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) {
                if (bias) r[v] = s[v];
                if (round) r[v] = _mm512_castsi512_ps(bf16_bits16(_mm512_castps_si512(r[v]))); /* lp_round's */
            }
        }
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) _mm512_mask_storeu_ps(ci + v * 16, mask[v], r[v]);
    }
    return left;
}

/* One micro-kernel per row count 1..MR over the file's ukernel_body, so
 * an edge panel of 3 rows costs 3 rows of work, not MR; ukernel_rows[rows]. */
#define UKERNEL(R)                                                                        \
    AVX512_TARGET static unsigned ukernel_##R(int kc, const void *ap, const void *bp,     \
                                              float *c, long ldc, float alpha, float beta, \
                                              int nr, const float *bias, int round)       \
    {                                                                                     \
        return ukernel_body(R, kc, ap, bp, c, ldc, alpha, beta, nr, bias, round);         \
    }
#if GEMM_MR != 14
#error "UKERNEL_ROWS lists row counts 1..14: extend it with GEMM_MR"
#endif
#define UKERNEL_ROWS                                                                                          \
    UKERNEL(1) UKERNEL(2) UKERNEL(3) UKERNEL(4) UKERNEL(5) UKERNEL(6) UKERNEL(7)                              \
    UKERNEL(8) UKERNEL(9) UKERNEL(10) UKERNEL(11) UKERNEL(12) UKERNEL(13) UKERNEL(14)                         \
    static gemm_ukernel_fn *const ukernel_rows[GEMM_MR + 1] = {                                               \
        NULL, ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7,                    \
        ukernel_8, ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14,                     \
    };

#endif
