/* gemm_generic.c -- the packed sgemm kernel in plain C, for any 64-bit
 * processor: a 4x16 register block that compilers vectorise where the
 * target has vector FMA (aarch64, or x86-64 built with -mfma).  fmaf keeps
 * gemm_kernels.h's arithmetic, so it gives bitwise the same C as the SIMD
 * paths; on an x86-64 baseline build each fmaf is a libm call (slow, but
 * the processors that need this path are not x86 ones with AVX2). */
#include "gemm_kernels.h"

#include <math.h>
#include <stddef.h>

#include "gemm_pack.h"

#define MR 4
#define NR 16

static void pack_a(int transA, int m, int kc, const float *A, long lda, float *ap)
{
    pack_a_c(transA, m, kc, A, lda, ap, MR);
}

static void pack_b(int transB, int kc, int n, const float *B, long ldb, float *bp)
{
    pack_b_c(transB, kc, n, B, ldb, bp, NR);
}

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

#define UKERNEL(R)                                                                                   \
    static void ukernel_##R(int kc, const float *ap, const float *bp, float *c, long ldc, float alpha, \
                            float beta, int nr)                                                      \
    {                                                                                                \
        ukernel_body(R, kc, ap, bp, c, ldc, alpha, beta, nr);                                        \
    }
UKERNEL(1) UKERNEL(2) UKERNEL(3) UKERNEL(4)

static gemm_ukernel_fn *const ukernel_rows[MR + 1] = {NULL, ukernel_1, ukernel_2, ukernel_3, ukernel_4};

const struct gemm_kernel gemm_kernel_generic = {
    .name = "triad generic sgemm (4x16 C micro-kernel)",
    .mr = MR, .nr = NR, .mc = MR * 32,
    .pack_a = pack_a, .pack_b = pack_b, .ukernel = ukernel_rows,
};
