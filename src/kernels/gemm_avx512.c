/* gemm_avx512.c -- the AVX-512 packed sgemm kernel: 14x32 register block
 * (28 zmm accumulators), 16x16 in-register transposes for packing.  The
 * arithmetic is gemm_kernels.h's, so it gives bitwise the same C as the
 * other paths.
 *
 * Its bf16 kernel, for AVX-512 processors without AVX512-BF16 (those with
 * it take gemm_avx512bf16.c's), is the same micro-kernel on gemm_pack.h's
 * bf16 packing run with MXCSR.FTZ, as gemm_avx2.c's. */
#include "gemm_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GEMM_MR 14
#define GEMM_NV 2
#define GEMM_NR (GEMM_NV * 16)
#define AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

#include "gemm_avx512_transpose.h"
#include "gemm_pack.h"

/* The micro-kernel of gemm_kernels.h.  Edges are handled here, with exact
 * row counts and masked columns, so no tile is computed twice.  beta == 0
 * never reads C (it may hold NaN garbage). */
AVX512_TARGET
static inline __attribute__((always_inline)) void
ukernel_body(const int rows, int kc, const float *restrict ap, const float *restrict bp,
             float *restrict c, long ldc, float alpha, float beta, int nr)
{
    __m512 acc[GEMM_MR][GEMM_NV];
    __mmask16 mask[GEMM_NV];
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

    for (int k = 0; k < kc; k++) {
        __m512 b[GEMM_NV];
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) b[v] = _mm512_load_ps(bp + v * 16);
#pragma GCC unroll 16
        for (int i = 0; i < rows; i++) {
            __m512 a = _mm512_set1_ps(ap[i]);
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
        }
        ap += GEMM_MR;
        bp += GEMM_NR;
    }

    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) {
            __m512 r = _mm512_mul_ps(va, acc[i][v]);
            if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], ci + v * 16), r);
            _mm512_mask_storeu_ps(ci + v * 16, mask[v], r);
        }
    }
}

/* One micro-kernel per row count 1..MR, so an edge panel of 3 rows costs
 * 3 rows of work, not MR. */
#define UKERNEL(R)                                                                        \
    AVX512_TARGET static void ukernel_##R(int kc, const void *ap, const void *bp,         \
                                          float *c, long ldc, float alpha, float beta,    \
                                          int nr)                                         \
    {                                                                                     \
        ukernel_body(R, kc, ap, bp, c, ldc, alpha, beta, nr);                             \
    }
UKERNEL(1) UKERNEL(2) UKERNEL(3) UKERNEL(4) UKERNEL(5) UKERNEL(6) UKERNEL(7)
UKERNEL(8) UKERNEL(9) UKERNEL(10) UKERNEL(11) UKERNEL(12) UKERNEL(13) UKERNEL(14)
#if GEMM_MR != 14
#error "the ukernel table below lists row counts 1..14: extend it with GEMM_MR"
#endif
static gemm_ukernel_fn *const ukernel_rows[GEMM_MR + 1] = {
    NULL, ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7,
    ukernel_8, ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14,
};

/* dst[k*stride + i] = src[i*ld + k] for i < lanes (<= 16), k < kc: rows
 * i >= rows are zeros.  16 values of k at a time through transpose16. */
AVX512_TARGET
static inline __attribute__((always_inline)) void pack_transposed(const float *src, long ld, int rows, int kc,
                                                                  float *dst, long stride, int lanes)
{
    const __mmask16 out = (__mmask16)((1u << lanes) - 1);
    int k = 0;
    for (; k + 16 <= kc; k += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_loadu_ps(src + (long)i * ld + k) : _mm512_setzero_ps();
        transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(dst + (long)(k + j) * stride, out, r[j]);
    }
    for (; k < kc; k++)
        for (int i = 0; i < lanes; i++) dst[(long)k * stride + i] = i < rows ? src[(long)i * ld + k] : 0.0f;
}

/* Packed A: panels of MR rows; panel p holds op(A)(p*MR + i, k) at [k*MR + i].
 * Rows past m are zeroed; the edge kernels (ukernel_rows) never read them. */
AVX512_TARGET
static void pack_a(int transA, int m, int kc, const float *A, long lda, void *ap_)
{
    float *ap = ap_;
    const __mmask16 full = (__mmask16)((1u << GEMM_MR) - 1);
    if (transA) {             /* op(A)(i,k) = A[k*lda + i]: 16 rows of A at a time, across */
        for (int k0 = 0; k0 < kc; k0 += 16) {
            int k1 = k0 + 16 < kc ? k0 + 16 : kc;
            for (int p = 0; p < m; p += GEMM_MR) {
                int mr = m - p < GEMM_MR ? m - p : GEMM_MR;
                __mmask16 mk = (__mmask16)((1u << mr) - 1);
                for (int k = k0; k < k1; k++)
                    _mm512_mask_storeu_ps(ap + (long)p * kc + (long)k * GEMM_MR, full,
                                          _mm512_maskz_loadu_ps(mk, A + (long)k * lda + p));
            }
        }
        return;
    }
    for (int p = 0; p < m; p += GEMM_MR, ap += (long)GEMM_MR * kc) {
        int mr = m - p < GEMM_MR ? m - p : GEMM_MR;   /* op(A)(i,k) = A[i*lda + k] */
        pack_transposed(A + (long)p * lda, lda, mr, kc, ap, GEMM_MR, GEMM_MR);
    }
}

/* Packed B: panels of NR columns; panel q holds op(B)(k, q*NR + j) at [k*NR + j]. */
AVX512_TARGET
static void pack_b(int transB, int kc, int n, const float *B, long ldb, void *bp_)
{
    float *bp = bp_;
    if (!transB) {            /* op(B)(k,j) = B[k*ldb + j]: 16 rows of B at a time, across */
        for (int k0 = 0; k0 < kc; k0 += 16) {
            int k1 = k0 + 16 < kc ? k0 + 16 : kc;
            for (int q = 0; q < n; q += GEMM_NR)
#pragma GCC unroll 16
                for (int v = 0; v < GEMM_NV; v++) {
                    int w = n - q - 16 * v;
                    __mmask16 mk = w >= 16 ? (__mmask16)0xffff : w > 0 ? (__mmask16)((1u << w) - 1) : 0;
                    for (int k = k0; k < k1; k++)
                        _mm512_store_ps(bp + (long)q * kc + (long)k * GEMM_NR + 16 * v,
                                        _mm512_maskz_loadu_ps(mk, B + (long)k * ldb + q + 16 * v));
                }
        }
        return;
    }
    for (int q = 0; q < n; q += GEMM_NR, bp += (long)GEMM_NR * kc) {
        int nr = n - q < GEMM_NR ? n - q : GEMM_NR;
#pragma GCC unroll 16
        for (int v = 0; v < GEMM_NV; v++)     /* op(B)(k,j) = B[j*ldb + k] */
            pack_transposed(B + (long)(q + 16 * v) * ldb, ldb, nr - 16 * v, kc, bp + 16 * v, GEMM_NR, 16);
    }
}

const struct gemm_kernel gemm_kernel_avx512 = {
    .name = "triad avx512 sgemm (14x32 micro-kernel)",
    .mr = GEMM_MR, .nr = GEMM_NR, .mc = GEMM_MR * 16, .bf16 = 0, .elem = 4,
    .pack_a = pack_a, .pack_b = pack_b, .ukernel = ukernel_rows,
};

/* gemm_pack.h's bf16 layouts: the fp32 packing, then pairs swapped and rounded in place (kc odd: in C). */
AVX512_TARGET static void pack_a_bf16(int transA, int m, int kc, const float *A, long lda, void *ap)
{
    if (kc % 2) {
        pack_a_bf16_c(transA, m, kc, A, lda, ap, GEMM_MR);
        return;
    }
    pack_a(transA, m, kc, A, lda, ap);
    bf16_pairs(ap, (long)(m + GEMM_MR - 1) / GEMM_MR * GEMM_MR * kc, GEMM_MR);
}

AVX512_TARGET static void pack_b_bf16(int transB, int kc, int n, const float *B, long ldb, void *bp)
{
    if (kc % 2) {
        pack_b_bf16_c(transB, kc, n, B, ldb, bp, GEMM_NR);
        return;
    }
    pack_b(transB, kc, n, B, ldb, bp);
    bf16_pairs(bp, (long)(n + GEMM_NR - 1) / GEMM_NR * GEMM_NR * kc, GEMM_NR);
}

const struct gemm_kernel gemm_kernel_avx512_bf16 = {
    .name = "triad avx512 bf16 gemm (14x32 micro-kernel, VDPBF16PS's arithmetic in FMAs with MXCSR.FTZ)",
    .mr = GEMM_MR, .nr = GEMM_NR, .mc = GEMM_MR * 16, .bf16 = 1, .elem = 4,
    .pack_a = pack_a_bf16, .pack_b = pack_b_bf16, .ukernel = ukernel_rows,
    .mode_enter = gemm_mxcsr_ftz_enter, .mode_leave = gemm_mxcsr_leave,
};
#endif
