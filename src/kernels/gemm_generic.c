/* gemm_generic.c -- the packed kernels in plain C, for any 64-bit
 * processor: a 4x16 register block that compilers vectorise where the
 * target has vector FMA (aarch64, or x86-64 built with -mfma).  fmaf keeps
 * gemm_kernels.h's arithmetic, so it gives bitwise the same C as the SIMD
 * paths; on an x86-64 processor without FMA each fmaf is a libm call
 * (slow, but the processors that need this path are not x86 ones with
 * AVX2; UKERNEL_CLONES below).
 *
 * The bf16 kernel flushes tiny results in C, portably (aarch64's own
 * flush-to-zero decides tininess before rounding, x86's after): the block
 * is summed with plain FMAs while watching for a result in (0, FLT_MIN];
 * only if one appeared (practically never) is it summed again, one
 * gemm_fma_ftz at a time. */
#include "gemm_kernels.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gemm_pack.h"

#define MR 4
#define NR 16

/* On x86-64 the micro-kernels are built twice, for the baseline and for
 * processors with FMA, the copy chosen when the program loads
 * (target_clones): there fmaf is one instruction, not a libm call, and the
 * generic path this processor is forced onto for testing (TRIAD_ISA)
 * runs its cases five times faster.  The same C either way: fmaf rounds
 * once whatever evaluates it. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__ELF__) && defined(__GLIBC__) /* (ifunc) */
#define UKERNEL_CLONES __attribute__((target_clones("fma", "default")))
#else
#define UKERNEL_CLONES
#endif

static inline __attribute__((always_inline)) void pack_a_any(int transA, int m, int kc, const float *A, long lda,
                                                             void *ap, float *sums, const int bf16)
{
    pack_a_c(transA, m, kc, A, lda, ap, sums, MR, bf16);
}

static inline __attribute__((always_inline)) void pack_b_any(int transB, int kc, int n, const float *B, long ldb,
                                                             void *bp, const int bf16)
{
    pack_b_c(transB, kc, n, B, ldb, bp, NR, bf16);
}

GEMM_PACKERS()

static inline __attribute__((always_inline)) void
ukernel_body(const int rows, int kc, const float *restrict ap, const float *restrict bp, float *restrict c,
             long ldc, float alpha, float beta, int nr)
{
    float acc[MR][NR];
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = 0.0f;
    for (int k = 0; k < kc; k++, ap += MR, bp += NR)
        for (int i = 0; i < rows; i++) {
            float a = ap[i];
            for (int j = 0; j < NR; j++) acc[i][j] = fmaf(a, bp[j], acc[i][j]);
        }
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < nr; j++) {
            float r = alpha * acc[i][j];
            ci[j] = beta != 0.0f ? fmaf(beta, ci[j], r) : r;
        }
    }
}

/* gemm_bf16's micro-kernel on the fp32 packing of gemm_pack.h (pairs
 * stored odd first): plain FMAs while no result is tiny, else fma_ftz. */
static inline __attribute__((always_inline)) void
ukernel_bf16_body(const int rows, int kc, const float *restrict ap, const float *restrict bp, float *restrict c,
                  long ldc, float alpha, float beta, int nr)
{
    float acc[MR][NR];
    uint32_t tiny = 0; /* a result r with 0 < |r| <= FLT_MIN: bits - 1 (sign cleared) below FLT_MIN's */
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = 0.0f;
    for (int k = 0; k < kc; k++)
        for (int i = 0; i < rows; i++) {
            float a = ap[(long)k * MR + i];
            for (int j = 0; j < NR; j++) {
                float r = fmaf(a, bp[(long)k * NR + j], acc[i][j]);
                uint32_t u;
                memcpy(&u, &r, sizeof u);
                tiny |= (u & 0x7fffffffu) - 1u < 0x00800000u;
                acc[i][j] = r;
            }
        }
    if (tiny) {
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < NR; j++) acc[i][j] = 0.0f;
        for (int k = 0; k < kc; k++)
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < NR; j++)
                    acc[i][j] = gemm_fma_ftz(ap[(long)k * MR + i], bp[(long)k * NR + j], acc[i][j]);
    }
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < nr; j++) {
            float r = gemm_mul_ftz(alpha, acc[i][j]);
            ci[j] = beta != 0.0f ? gemm_fma_ftz(beta, ci[j], r) : r;
        }
    }
}

/* No epilogue of their own: the caller does it on the rows they leave (all). */
#define UKERNEL(R)                                                                                    \
    UKERNEL_CLONES static unsigned ukernel_##R(int kc, const void *ap, const void *bp, float *c, long ldc, \
                                               float alpha, float beta, int nr, const float *bias, int round) \
    {                                                                                                 \
        ukernel_body(R, kc, ap, bp, c, ldc, alpha, beta, nr);                                         \
        return bias || round ? (1u << R) - 1 : 0;                                                     \
    }                                                                                                 \
    UKERNEL_CLONES static unsigned ukernel_bf16_##R(int kc, const void *ap, const void *bp, float *c, long ldc, \
                                                    float alpha, float beta, int nr, const float *bias,  \
                                                    int round)                                           \
    {                                                                                                 \
        ukernel_bf16_body(R, kc, ap, bp, c, ldc, alpha, beta, nr);                                    \
        return bias || round ? (1u << R) - 1 : 0;                                                     \
    }
UKERNEL(1) UKERNEL(2) UKERNEL(3) UKERNEL(4)

static gemm_ukernel_fn *const ukernel_rows[MR + 1] = {NULL, ukernel_1, ukernel_2, ukernel_3, ukernel_4};
static gemm_ukernel_fn *const ukernel_bf16_rows[MR + 1] = {NULL, ukernel_bf16_1, ukernel_bf16_2, ukernel_bf16_3,
                                                           ukernel_bf16_4};

const struct gemm_kernel gemm_kernel_generic = {
    .name = "triad generic sgemm (4x16 C micro-kernel)",
    .mr = MR, .nr = NR, .mc = MR * 32, .bf16 = 0, .elem = 4,
    .pack_a = pack_a, .pack_b = pack_b, .ukernel = ukernel_rows,
};

const struct gemm_kernel gemm_kernel_generic_bf16 = {
    .name = "triad generic bf16 gemm (4x16 C micro-kernel, VDPBF16PS's arithmetic in fp32 FMAs)",
    .mr = MR, .nr = NR, .mc = MR * 32, .bf16 = 1, .elem = 4,
    .pack_a = pack_a_bf16, .pack_b = pack_b_bf16, .ukernel = ukernel_bf16_rows,
};
