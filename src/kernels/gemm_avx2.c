/* gemm_avx2.c -- the AVX2 + FMA packed sgemm kernel: a 6x16 register block
 * (12 ymm accumulators, 2 for B, 1 broadcast: 15 of the 16 registers), as
 * BLIS's Haswell kernel.  The arithmetic is gemm_kernels.h's, so it gives
 * bitwise the same C as the other paths.
 *
 * Its bf16 kernel is the same micro-kernel on gemm_pack.h's bf16 layouts
 * (rounded values, pairs stored odd first), which the same packing code
 * makes with its bf16 flag, run with MXCSR.FTZ: x86 flushes exactly
 * fma_ftz's tiny results, so each FMA is fma_ftz. */
#include "gemm_kernels.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <stddef.h>

#define AVX2_TARGET __attribute__((target("avx2,fma")))

#include "bf16_simd.h"
#include "gemm_pack.h"

#define MR 6
#define NR 16

/* Lanes [0, w) of an 8-float vector, as a maskload/maskstore mask. */
AVX2_TARGET static inline __m256i lane_mask(int w)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(w), idx);
}

/* In-register transpose: r[i] lane j  ->  r[j] lane i (8 x 8 floats). */
AVX2_TARGET static inline __attribute__((always_inline)) void transpose8(__m256 r[8])
{
    __m256 t[8], s[8];
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
}

/* gemm_bf16_round on 8 floats (packing with bf16). */
AVX2_TARGET static inline __attribute__((always_inline)) __m256 round8(__m256 x)
{
    const __m256i u = _mm256_castps_si256(x), one = _mm256_set1_epi32(1);
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)),
                                 _mm256_and_si256(_mm256_srli_epi32(u, 16), one)); /* to nearest even */
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan); /* NaN: made quiet */
    __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7f800000)), _mm256_setzero_si256());
    /* keep the upper half, or of zeros and subnormals the sign alone */
    __m256i keep = _mm256_blendv_epi8(_mm256_set1_epi32((int)0xffff0000u), _mm256_set1_epi32((int)0x80000000u), tiny);
    return _mm256_castsi256_ps(_mm256_and_si256(r, keep));
}

/* x as packed: with bf16 rounded. */
AVX2_TARGET static inline __attribute__((always_inline)) __m256 pack8(__m256 x, const int bf16)
{
    return bf16 ? round8(x) : x;
}

/* dst[q*stride + i] = src[i*ld + k] for i < lanes (<= 8), packed position
 * q < kp holding k (gemm_pack.h: q ^ 1 with bf16): rows i >= rows are
 * zeros.  8 values of k at a time through transpose8; each position's
 * lanes go out in an 8-wide store whose spare lanes the next position
 * overwrites (the last of the panel is stored masked). */
AVX2_TARGET static inline __attribute__((always_inline)) void
pack_transposed(const float *src, long ld, int rows, int kc, float *dst, long stride, int lanes, const int bf16)
{
    const __m256i out = lane_mask(lanes);
    const int kp = pack_kp(kc, bf16);
    int k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            r[i] = i < rows ? pack8(_mm256_loadu_ps(src + (long)i * ld + k), bf16) : _mm256_setzero_ps();
        transpose8(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            if (lanes < 8 && k + j == kp - 1)
                _mm256_maskstore_ps(dst + (long)(k + j) * stride, out, r[j ^ bf16]);
            else
                _mm256_storeu_ps(dst + (long)(k + j) * stride, r[j ^ bf16]);
        }
    }
    for (; k < kp; k++)
        for (int i = 0; i < lanes; i++)
            dst[(long)k * stride + i] = i < rows ? pack_at(src + (long)i * ld, 1, k ^ bf16, kc, bf16) : 0.0f;
}

/* A row-major (op(A) = A) is packed through pack_transposed (the MR rows and
 * two of zeros); A transposed by rows of A, with the same 8-wide stores. */
AVX2_TARGET static inline __attribute__((always_inline)) void
pack_a_any(int transA, int m, int kc, const float *A, long lda, void *ap_, float *sums, const int bf16)
{
    const __m256i last = lane_mask(MR);
    const int kp = pack_kp(kc, bf16);
    float *ap = ap_;
    if (transA) { /* op(A)(i,k) = A[k*lda + i]: 8 rows of A at a time, across, each panel's 8 k in turn */
        /* (with bf16 a pair of k at a time); positions written in order (gemm_pack.h): an 8-wide store's
         * spare lanes are the next position's, stored after it; each panel's last masked */
        for (int k0 = 0; k0 < kp; k0 += 8) {
            int k1 = k0 + 8 < kp ? k0 + 8 : kp;
            for (int p = 0; p < m; p += MR) {
                int mr = m - p < MR ? m - p : MR;
                __m256 s = sums ? _mm256_maskload_ps(sums + p, lane_mask(mr)) : _mm256_setzero_ps();
                for (int k = k0 + PACK_AHEAD_ROWS; k < k1 + PACK_AHEAD_ROWS && k < kc; k++)
                    prefetch_span(A + (long)k * lda + p, mr);
                for (int k = k0; k < k1; k += 1 + bf16) {
                    __m256 r[2];
#pragma GCC unroll 2
                    for (int h = 0; h <= bf16; h++) {
                        if (bf16 && k + h >= kc) { /* (kc padded to even) */
                            r[h] = _mm256_setzero_ps();
                            continue;
                        }
                        const float *a = A + (long)(k + h) * lda + p; /* a whole panel: its spare lanes read too */
                        __m256 x = p + 8 <= m ? _mm256_loadu_ps(a) : _mm256_maskload_ps(a, lane_mask(mr));
                        if (sums) s = _mm256_add_ps(s, x); /* (the spare lanes' sums are not stored) */
                        r[h] = pack8(x, bf16);
                    }
#pragma GCC unroll 2
                    for (int h = 0; h <= bf16; h++) {
                        float *at = ap + (long)p * kp + (long)(k + h) * MR;
                        if (k + h == kp - 1)
                            _mm256_maskstore_ps(at, last, r[h ^ bf16]);
                        else
                            _mm256_storeu_ps(at, r[h ^ bf16]);
                    }
                }
                if (sums) _mm256_maskstore_ps(sums + p, lane_mask(mr), s);
            }
        }
        return;
    }
    for (int p = 0; p < m; p += MR, ap += (long)MR * kp) {
        int mr = m - p < MR ? m - p : MR;
        pack_transposed(A + (long)p * lda, lda, mr, kc, ap, MR, MR, bf16);
    }
}

/* B transposed (op(B)(k,j) = B[j*ldb + k]) is packed 8 columns by 8 values
 * of k at a time through register transposes (attention's q k^T is such a
 * product, with few k per column); B as stored is copied row by row. */
AVX2_TARGET static inline __attribute__((always_inline)) void
pack_b_any(int transB, int kc, int n, const float *B, long ldb, void *bp_, const int bf16)
{
    const int kp = pack_kp(kc, bf16);
    float *bp = bp_;
    if (!transB && !bf16) { /* a row of NR columns per k: two vectors; 8 rows of B at a time, across */
        for (int k0 = 0; k0 < kc; k0 += 8) {
            int k1 = k0 + 8 < kc ? k0 + 8 : kc;
            for (int q = 0; q < n; q += NR) {
                int nr = n - q < NR ? n - q : NR;
                float *d = bp + (long)q * kp;
                const float *b = B + q;
                if (nr == NR)
                    for (int k = k0; k < k1; k++) {
                        _mm256_store_ps(d + (long)k * NR, _mm256_loadu_ps(b + (long)k * ldb));
                        _mm256_store_ps(d + (long)k * NR + 8, _mm256_loadu_ps(b + (long)k * ldb + 8));
                    }
                else {          /* (masked loads give zeros past n) */
                    const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
                    for (int k = k0; k < k1; k++) {
                        _mm256_store_ps(d + (long)k * NR, _mm256_maskload_ps(b + (long)k * ldb, m0));
                        _mm256_store_ps(d + (long)k * NR + 8, _mm256_maskload_ps(b + (long)k * ldb + 8, m1));
                    }
                }
            }
        }
        return;
    }
    if (!transB) {
        pack_b_c(transB, kc, n, B, ldb, bp, NR, bf16);
        return;
    }
    for (int q = 0; q < n; q += NR, bp += (long)NR * kp) {
        int nr = n - q < NR ? n - q : NR;
        for (int v = 0; v < NR / 8; v++)
            pack_transposed(B + (long)(q + 8 * v) * ldb, ldb, nr - 8 * v, kc, bp + 8 * v, NR, 8, bf16);
    }
}

/* The fp32 packing, and gemm_pack.h's bf16 layouts made in the same pass. */
GEMM_PACKERS(AVX2_TARGET)

/* One row of C's two vectors, r = alpha acc (+ beta C), with the epilogue
 * (gemm_ukernel_fn) as gemm_avx512_ukernel.h's close does it; 1 when the
 * kernel's mode flushed a bias sum (r then left as it was). */
AVX2_TARGET static inline __attribute__((always_inline)) int close_row(__m256 r[2], const __m256 bv[2],
                                                                       const float *bias, int round)
{
    if (bias) {
        /* -bias by its sign bit (an FTZ subtraction would flush a subnormal bias) */
        __m256 s0 = _mm256_add_ps(r[0], bv[0]), s1 = _mm256_add_ps(r[1], bv[1]), z = _mm256_setzero_ps();
        __m256 sign = _mm256_set1_ps(-0.0f);
        __m256 f0 = _mm256_and_ps(_mm256_cmp_ps(s0, z, _CMP_EQ_OQ),
                                  _mm256_cmp_ps(r[0], _mm256_xor_ps(bv[0], sign), _CMP_NEQ_UQ));
        __m256 f1 = _mm256_and_ps(_mm256_cmp_ps(s1, z, _CMP_EQ_OQ),
                                  _mm256_cmp_ps(r[1], _mm256_xor_ps(bv[1], sign), _CMP_NEQ_UQ));
        if (_mm256_movemask_ps(_mm256_or_ps(f0, f1))) return 1;
        r[0] = s0;
        r[1] = s1;
    }
    if (round) {
        r[0] = _mm256_castsi256_ps(bf16_bits8(_mm256_castps_si256(r[0]))); /* lp_round's */
        r[1] = _mm256_castsi256_ps(bf16_bits8(_mm256_castps_si256(r[1])));
    }
    return 0;
}

AVX2_TARGET static inline __attribute__((always_inline)) unsigned
ukernel_body(const int rows, int kc, const float *restrict ap, const float *restrict bp, float *restrict c,
             long ldc, float alpha, float beta, int nr, const float *bias, int round)
{
    __m256 acc[MR][2];
    unsigned left = 0;
#pragma GCC unroll 6
    for (int i = 0; i < rows; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        acc[i][0] = _mm256_setzero_ps();
        acc[i][1] = _mm256_setzero_ps();
    }
    for (int k = 0; k < kc; k++) {
        __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 6
        for (int i = 0; i < rows; i++) {
            __m256 a = _mm256_broadcast_ss(ap + i);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
        }
        ap += MR;
        bp += NR;
    }
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), bv[2];
    if (nr == NR) {
        bv[0] = bias ? _mm256_loadu_ps(bias) : _mm256_setzero_ps();
        bv[1] = bias ? _mm256_loadu_ps(bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
        for (int i = 0; i < rows; i++) {
            float *ci = c + i * ldc;
            __m256 r[2] = {_mm256_mul_ps(va, acc[i][0]), _mm256_mul_ps(va, acc[i][1])};
            if (beta != 0.0f) {
                r[0] = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), r[0]);
                r[1] = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), r[1]);
            }
            left |= (unsigned)close_row(r, bv, bias, round) << i;
            _mm256_storeu_ps(ci, r[0]);
            _mm256_storeu_ps(ci + 8, r[1]);
        }
        return left;
    }
    __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
    bv[0] = bias ? _mm256_maskload_ps(bias, m0) : _mm256_setzero_ps();
    bv[1] = bias ? _mm256_maskload_ps(bias + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        __m256 r[2] = {_mm256_mul_ps(va, acc[i][0]), _mm256_mul_ps(va, acc[i][1])};
        if (beta != 0.0f) {
            r[0] = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci, m0), r[0]);
            r[1] = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8, m1), r[1]);
        }
        left |= (unsigned)close_row(r, bv, bias, round) << i;
        _mm256_maskstore_ps(ci, m0, r[0]);
        _mm256_maskstore_ps(ci + 8, m1, r[1]);
    }
    return left;
}

#define UKERNEL(R)                                                                                   \
    AVX2_TARGET static unsigned ukernel_##R(int kc, const void *ap, const void *bp, float *c, long ldc, \
                                            float alpha, float beta, int nr, const float *bias,      \
                                            int round)                                               \
    {                                                                                                \
        return ukernel_body(R, kc, ap, bp, c, ldc, alpha, beta, nr, bias, round);                    \
    }
UKERNEL(1) UKERNEL(2) UKERNEL(3) UKERNEL(4) UKERNEL(5) UKERNEL(6)

static gemm_ukernel_fn *const ukernel_rows[MR + 1] = {
    NULL, ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6,
};

const struct gemm_kernel gemm_kernel_avx2 = {
    .name = "triad avx2 sgemm (6x16 micro-kernel)",
    .mr = MR, .nr = NR, .mc = MR * 24, .bf16 = 0, .elem = 4,
    .pack_a = pack_a, .pack_b = pack_b, .ukernel = ukernel_rows,
};

const struct gemm_kernel gemm_kernel_avx2_bf16 = {
    .name = "triad avx2 bf16 gemm (6x16 micro-kernel, VDPBF16PS's arithmetic in FMAs with MXCSR.FTZ)",
    .mr = MR, .nr = NR, .mc = MR * 24, .bf16 = 1, .elem = 4,
    .pack_a = pack_a_bf16, .pack_b = pack_b_bf16, .ukernel = ukernel_rows,
    .mode_enter = gemm_mxcsr_ftz_enter, .mode_leave = gemm_mxcsr_leave,
};
#endif
