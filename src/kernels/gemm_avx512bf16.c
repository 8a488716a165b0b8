/* gemm_avx512bf16.c -- gemm_bf16 on AVX512-BF16: VDPBF16PS
 * (_mm512_dpbf16_ps) over A and B packed as pairs of bf16 (half the bytes
 * of fp32 packing), rounded by VCVTNE2PS2BF16 as they are packed, a 14x32
 * register block (28 zmm accumulators) as the avx512 sgemm kernel.
 *
 * The instruction is the arithmetic of gemm_kernels.h: each lane adds the
 * product of the pair's high halves, then the low halves', each an FMA
 * with fma_ftz's flushing, whatever MXCSR says (regression/unit/
 * test_bf16_dot.c checks that against gemm_fma_ftz on this processor).
 * The closing multiply and FMA run under MXCSR.FTZ (mode_enter), which
 * flushes as fma_ftz does, so C is bitwise the emulating kernels' C. */
#include "gemm_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stdint.h>

#define GEMM_MR 14
#define GEMM_NV 2
#define GEMM_NR (GEMM_NV * 16)
#define AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx512bf16,fma")))

#include "gemm_avx512_transpose.h"
#include "bf16_simd.h"
#include "gemm_avx512_ukernel.h"
#include "gemm_pack.h"

/* Packed A: panels of MR rows; pair p of k (k = 2p, 2p+1) of row i at
 * 32-bit word [p*MR + i]: bf16 a(i,2p) in the low half, a(i,2p+1) in the
 * high one.  Packed B: panels of NR columns; pair p of column j at word
 * [p*NR + j], b(2p,j) low, b(2p+1,j) high.  k is padded with zeros to an
 * even count, rows and columns past the edge are zeros. */

/* Lanes [0, w) of 16 (w clamped to 0..16). */
static inline __mmask16 lanes_mask(int w)
{
    return w >= 16 ? (__mmask16)0xffff : w > 0 ? (__mmask16)((1u << w) - 1) : (__mmask16)0;
}

/* 16 words from rows k = 2p (r0) and 2p+1 (r1; NULL past kc: zeros) of 16
 * floats, the lanes in m (others zero): word x = (bf16 r0[x], bf16 r1[x]).
 * VCVTNE2PS2BF16 gives r0's 16 bf16 then r1's; VPERMW interleaves them. */
AVX512_TARGET static inline __attribute__((always_inline)) __m512i pairs_across(const float *r0, const float *r1,
                                                                                 __mmask16 m)
{
    static const uint16_t interleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                            8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    __m512 lo = _mm512_maskz_loadu_ps(m, r0), hi = r1 ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps();
    __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
    return _mm512_permutexvar_epi16(_mm512_loadu_si512(interleave), both);
}

/* dst[p*stride + x] = the pair p of source row x (k contiguous: src[x*ld +
 * k]) for x < lanes, p < kp/2; rows x >= rows are zeros.  32 values of k
 * (16 pairs) at a time: converted to 16 words of pairs in order, then
 * through transpose16.  Each row's next 32 values (within kc: two cache
 * lines where the row is 64-byte aligned) are asked for while these are
 * read: the rows are up to 16 streams, which the hardware's prefetchers
 * follow late (from memory, the forward's and the input gradient's
 * products 8-10 % faster on Zen 5; docs/performance.md). */
AVX512_TARGET static inline __attribute__((always_inline)) void
pairs_down(const float *src, long ld, int rows, int kc, uint32_t *dst, long stride, int lanes)
{
    const __mmask16 out = lanes_mask(lanes);
    for (int k0 = 0; k0 < kc; k0 += 32) {
        __mmask16 m0 = lanes_mask(kc - k0), m1 = lanes_mask(kc - k0 - 16);
        int np = (kc - k0 + 1) / 2 < 16 ? (kc - k0 + 1) / 2 : 16;
        __m512 r[16];
#pragma GCC unroll 16
        for (int x = 0; x < 16; x++) {
            if (x < rows) {
                const float *s = src + (long)x * ld + k0;
                if (k0 + 32 < kc) prefetch_span(s + 32, kc - k0 - 32 < 32 ? kc - k0 - 32 : 32);
                r[x] = (__m512)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, s + 16), _mm512_maskz_loadu_ps(m0, s));
            } else {
                r[x] = _mm512_setzero_ps();
            }
        }
        transpose16(r);
        for (int p = 0; p < np; p++) _mm512_mask_storeu_ps(dst + (long)(k0 / 2 + p) * stride, out, r[p]);
    }
}

AVX512_TARGET static void pack_a(int transA, int m, int kc, const float *A, long lda, void *ap_, float *sums)
{
    uint32_t *ap = ap_;
    int kp2 = (kc + 1) / 2; /* pairs */
    const __mmask16 full = lanes_mask(GEMM_MR);
    if (transA) {             /* op(A)(i,k) = A[k*lda + i]: two rows of A per pair, across, 4 pairs at a time */
        for (int pb = 0; pb < kp2; pb += 4) {
            int pe = pb + 4 < kp2 ? pb + 4 : kp2;
            for (int p0 = 0; p0 < m; p0 += GEMM_MR) {
                __mmask16 mk = lanes_mask(m - p0), ms = mk & full; /* (ms: the panel's rows alone) */
                __m512 s = sums ? _mm512_maskz_loadu_ps(ms, sums + p0) : _mm512_setzero_ps();
                for (int k = 2 * pb + PACK_AHEAD_ROWS; k < 2 * pe + PACK_AHEAD_ROWS && k < kc; k++)
                    prefetch_span(A + (long)k * lda + p0, m - p0 < GEMM_MR ? m - p0 : GEMM_MR);
                for (int p = pb; p < pe; p++) {
                    const float *r0 = A + (long)(2 * p) * lda + p0;
                    const float *r1 = 2 * p + 1 < kc ? r0 + lda : NULL;
                    _mm512_mask_storeu_epi32(ap + (long)p0 * kp2 + (long)p * GEMM_MR, full, pairs_across(r0, r1, mk));
                    if (sums) { /* (the rows pairs_across just read, from L1) */
                        s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(ms, r0));
                        if (r1) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(ms, r1));
                    }
                }
                if (sums) _mm512_mask_storeu_ps(sums + p0, ms, s);
            }
        }
        return;
    }
    for (int p0 = 0; p0 < m; p0 += GEMM_MR, ap += (long)GEMM_MR * kp2) { /* op(A)(i,k) = A[i*lda + k] */
        int mr = m - p0 < GEMM_MR ? m - p0 : GEMM_MR;
        pairs_down(A + (long)p0 * lda, lda, mr, kc, ap, GEMM_MR, GEMM_MR);
    }
}

AVX512_TARGET static void pack_b(int transB, int kc, int n, const float *B, long ldb, void *bp_)
{
    uint32_t *bp = bp_;
    int kp2 = (kc + 1) / 2;
    if (!transB) {            /* op(B)(k,j) = B[k*ldb + j]: two rows of B per pair, across, 4 pairs at a time */
        for (int pb = 0; pb < kp2; pb += 4) {
            int pe = pb + 4 < kp2 ? pb + 4 : kp2;
            for (int q = 0; q < n; q += GEMM_NR) {
                for (int k = 2 * pb + PACK_AHEAD_ROWS; k < 2 * pe + PACK_AHEAD_ROWS && k < kc; k++)
                    prefetch_span(B + (long)k * ldb + q, n - q < GEMM_NR ? n - q : GEMM_NR);
#pragma GCC unroll 2
                for (int v = 0; v < GEMM_NV; v++) {
                    __mmask16 mk = lanes_mask(n - q - 16 * v);
                    for (int p = pb; p < pe; p++) {
                        const float *r0 = B + (long)(2 * p) * ldb + q + 16 * v;
                        const float *r1 = 2 * p + 1 < kc ? r0 + ldb : NULL;
                        _mm512_store_si512(bp + (long)q * kp2 + (long)p * GEMM_NR + 16 * v, pairs_across(r0, r1, mk));
                    }
                }
            }
        }
        return;
    }
    for (int q = 0; q < n; q += GEMM_NR, bp += (long)GEMM_NR * kp2) {
        int nr = n - q < GEMM_NR ? n - q : GEMM_NR;
#pragma GCC unroll 2
        for (int v = 0; v < GEMM_NV; v++) /* op(B)(k,j) = B[j*ldb + k] */
            pairs_down(B + (long)(q + 16 * v) * ldb, ldb, nr - 16 * v, kc, bp + 16 * v, GEMM_NR, 16);
    }
}

/* The micro-kernel: kc (even) values of k, kc/2 VDPBF16PS per accumulator,
 * in gemm_avx512_ukernel.h's frame (the avx512 sgemm kernel's edges and C
 * update). */
AVX512_TARGET
static inline __attribute__((always_inline)) unsigned
ukernel_body(const int rows, int kc, const uint32_t *restrict ap, const uint32_t *restrict bp, float *restrict c,
             long ldc, float alpha, float beta, int nr, const float *bias, int round)
{
    __m512 acc[GEMM_MR][GEMM_NV];
    __mmask16 mask[GEMM_NV];
    ukernel_open(rows, c, ldc, nr, acc, mask);
    for (int p = 0; p < kc / 2; p++) {
        __m512bh b[GEMM_NV];
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) b[v] = (__m512bh)_mm512_load_si512(bp + v * 16);
#pragma GCC unroll 16
        for (int i = 0; i < rows; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)ap[i]);
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
        }
        ap += GEMM_MR;
        bp += GEMM_NR;
    }
    return ukernel_close(rows, acc, mask, c, ldc, alpha, beta, bias, round);
}
UKERNEL_ROWS

const struct gemm_kernel gemm_kernel_avx512bf16 = {
    .name = "triad avx512bf16 bf16 gemm (14x32 VDPBF16PS micro-kernel)",
    .mr = GEMM_MR, .nr = GEMM_NR, .mc = GEMM_MR * 16, .bf16 = 1, .elem = 2,
    .pack_a = pack_a, .pack_b = pack_b, .ukernel = ukernel_rows,
    .mode_enter = gemm_mxcsr_ftz_enter, .mode_leave = gemm_mxcsr_leave,
};
#endif
