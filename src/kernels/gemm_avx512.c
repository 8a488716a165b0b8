/* gemm_avx512.c -- the AVX-512 packed sgemm kernel: 14x32 register block
 * (28 zmm accumulators), 16x16 in-register transposes for packing.  The
 * arithmetic is gemm_kernels.h's, so it gives bitwise the same C as the
 * other paths.
 *
 * Its bf16 kernel, for AVX-512 processors without AVX512-BF16 (those with
 * it take gemm_avx512bf16.c's), is the same micro-kernel on gemm_pack.h's
 * bf16 layouts, which the same packing code makes with its bf16 flag, run
 * with MXCSR.FTZ, as gemm_avx2.c's. */
#include "gemm_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#define GEMM_MR 14
#define GEMM_NV 2
#define GEMM_NR (GEMM_NV * 16)
#define AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

#include "gemm_avx512_transpose.h"
#include "bf16_simd.h"
#include "gemm_avx512_ukernel.h"
#include "gemm_pack.h"

/* The micro-kernel of gemm_kernels.h: kc fp32 FMAs per accumulator, in
 * gemm_avx512_ukernel.h's frame. */
AVX512_TARGET
static inline __attribute__((always_inline)) unsigned
ukernel_body(const int rows, int kc, const float *restrict ap, const float *restrict bp,
             float *restrict c, long ldc, float alpha, float beta, int nr, const float *bias, int round)
{
    __m512 acc[GEMM_MR][GEMM_NV];
    __mmask16 mask[GEMM_NV];
    ukernel_open(rows, c, ldc, nr, acc, mask);
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
    return ukernel_close(rows, acc, mask, c, ldc, alpha, beta, bias, round);
}
UKERNEL_ROWS

/* gemm_bf16_round on 16 floats (packing with bf16). */
AVX512_TARGET static inline __attribute__((always_inline)) __m512 round16(__m512 x)
{
    const __m512i u = _mm512_castps_si512(x);
    const __m512i one = _mm512_set1_epi32(1);
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)),
                                 _mm512_and_si512(_mm512_srli_epi32(u, 16), one)); /* to nearest even */
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000)); /* NaN: made quiet */
    __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7f800000));
    /* keep the upper half, or of zeros and subnormals the sign alone */
    __m512i keep =
        _mm512_mask_mov_epi32(_mm512_set1_epi32((int)0xffff0000u), tiny, _mm512_set1_epi32((int)0x80000000u));
    return _mm512_castsi512_ps(_mm512_and_si512(r, keep));
}

/* x as packed: with bf16 rounded. */
AVX512_TARGET static inline __attribute__((always_inline)) __m512 pack16(__m512 x, const int bf16)
{
    return bf16 ? round16(x) : x;
}

/* dst[q*stride + i] = src[i*ld + k] for i < lanes (<= 16), packed position
 * q < kp holding k (gemm_pack.h: q ^ 1 with bf16): rows i >= rows are
 * zeros.  16 values of k at a time through transpose16. */
AVX512_TARGET
static inline __attribute__((always_inline)) void pack_transposed(const float *src, long ld, int rows, int kc,
                                                                  float *dst, long stride, int lanes, const int bf16)
{
    const __mmask16 out = (__mmask16)((1u << lanes) - 1);
    const int kp = pack_kp(kc, bf16);
    int k = 0;
    for (; k + 16 <= kc; k += 16) {
        __m512 r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
            r[i] = i < rows ? pack16(_mm512_loadu_ps(src + (long)i * ld + k), bf16) : _mm512_setzero_ps();
        transpose16(r);
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++) _mm512_mask_storeu_ps(dst + (long)(k + j) * stride, out, r[j ^ bf16]);
    }
    for (; k < kp; k++)
        for (int i = 0; i < lanes; i++)
            dst[(long)k * stride + i] = i < rows ? pack_at(src + (long)i * ld, 1, k ^ bf16, kc, bf16) : 0.0f;
}

/* Packed A: panels of MR rows; panel p holds op(A)(p*MR + i, k) at [k*MR + i]
 * (with bf16 gemm_pack.h's layout).  Rows past m are zeroed; the edge
 * kernels (ukernel_rows) never read them. */
AVX512_TARGET
static inline __attribute__((always_inline)) void pack_a_any(int transA, int m, int kc, const float *A, long lda,
                                                             void *ap_, float *sums, const int bf16)
{
    float *ap = ap_;
    const __mmask16 full = (__mmask16)((1u << GEMM_MR) - 1);
    const int kp = pack_kp(kc, bf16);
    if (transA) {             /* op(A)(i,k) = A[k*lda + i]: 4 rows of A at a time, across, each panel's 4 k */
        for (int k0 = 0; k0 < kp; k0 += 4) {
            int k1 = k0 + 4 < kp ? k0 + 4 : kp;
            for (int p = 0; p < m; p += GEMM_MR) {
                int mr = m - p < GEMM_MR ? m - p : GEMM_MR;
                __mmask16 mk = (__mmask16)((1u << mr) - 1);
                __m512 s = sums ? _mm512_maskz_loadu_ps(mk, sums + p) : _mm512_setzero_ps();
                for (int k = k0 + PACK_AHEAD_ROWS; k < k1 + PACK_AHEAD_ROWS && k < kc; k++)
                    prefetch_span(A + (long)k * lda + p, mr);
                for (int k = k0; k < k1; k++) {  /* k in order, at its packed position (gemm_pack.h) */
                    __m512 x = !bf16 || k < kc ? _mm512_maskz_loadu_ps(mk, A + (long)k * lda + p) : _mm512_setzero_ps();
                    if (sums && k < kc) s = _mm512_add_ps(s, x);
                    _mm512_mask_storeu_ps(ap + (long)p * kp + (long)(k ^ bf16) * GEMM_MR, full, pack16(x, bf16));
                }
                if (sums) _mm512_mask_storeu_ps(sums + p, mk, s);
            }
        }
        return;
    }
    for (int p = 0; p < m; p += GEMM_MR, ap += (long)GEMM_MR * kp) {
        int mr = m - p < GEMM_MR ? m - p : GEMM_MR;   /* op(A)(i,k) = A[i*lda + k] */
        pack_transposed(A + (long)p * lda, lda, mr, kc, ap, GEMM_MR, GEMM_MR, bf16);
    }
}

/* Packed B: panels of NR columns; panel q holds op(B)(k, q*NR + j) at [k*NR + j]
 * (with bf16 gemm_pack.h's layout). */
AVX512_TARGET
static inline __attribute__((always_inline)) void pack_b_any(int transB, int kc, int n, const float *B, long ldb,
                                                             void *bp_, const int bf16)
{
    float *bp = bp_;
    const int kp = pack_kp(kc, bf16);
    if (!transB) {            /* op(B)(k,j) = B[k*ldb + j]: 8 rows of B at a time, across */
        for (int k0 = 0; k0 < kp; k0 += 8) {
            int k1 = k0 + 8 < kp ? k0 + 8 : kp;
            for (int q = 0; q < n; q += GEMM_NR) {
                for (int k = k0 + PACK_AHEAD_ROWS; k < k1 + PACK_AHEAD_ROWS && k < kc; k++)
                    prefetch_span(B + (long)k * ldb + q, n - q < GEMM_NR ? n - q : GEMM_NR);
#pragma GCC unroll 16
                for (int v = 0; v < GEMM_NV; v++) {
                    int w = n - q - 16 * v;
                    __mmask16 mk = w >= 16 ? (__mmask16)0xffff : w > 0 ? (__mmask16)((1u << w) - 1) : 0;
                    for (int k = k0; k < k1; k++) /* k in order, at its packed position (gemm_pack.h) */
                        _mm512_store_ps(bp + (long)q * kp + (long)(k ^ bf16) * GEMM_NR + 16 * v,
                                        !bf16 || k < kc
                                            ? pack16(_mm512_maskz_loadu_ps(mk, B + (long)k * ldb + q + 16 * v), bf16)
                                            : _mm512_setzero_ps());
                }
            }
        }
        return;
    }
    for (int q = 0; q < n; q += GEMM_NR, bp += (long)GEMM_NR * kp) {
        int nr = n - q < GEMM_NR ? n - q : GEMM_NR;
#pragma GCC unroll 16
        for (int v = 0; v < GEMM_NV; v++)     /* op(B)(k,j) = B[j*ldb + k] */
            pack_transposed(B + (long)(q + 16 * v) * ldb, ldb, nr - 16 * v, kc, bp + 16 * v, GEMM_NR, 16, bf16);
    }
}

/* The fp32 packing, and gemm_pack.h's bf16 layouts made in the same pass. */
GEMM_PACKERS(AVX512_TARGET)

const struct gemm_kernel gemm_kernel_avx512 = {
    .name = "triad avx512 sgemm (14x32 micro-kernel)",
    .mr = GEMM_MR, .nr = GEMM_NR, .mc = GEMM_MR * 16, .bf16 = 0, .elem = 4,
    .pack_a = pack_a, .pack_b = pack_b, .ukernel = ukernel_rows,
};

const struct gemm_kernel gemm_kernel_avx512_bf16 = {
    .name = "triad avx512 bf16 gemm (14x32 micro-kernel, VDPBF16PS's arithmetic in FMAs with MXCSR.FTZ)",
    .mr = GEMM_MR, .nr = GEMM_NR, .mc = GEMM_MR * 16, .bf16 = 1, .elem = 4,
    .pack_a = pack_a_bf16, .pack_b = pack_b_bf16, .ukernel = ukernel_rows,
    .mode_enter = gemm_mxcsr_ftz_enter, .mode_leave = gemm_mxcsr_leave,
};
#endif
