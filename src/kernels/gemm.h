/* gemm.h -- the matmul path.  Row-major C (M,N) = alpha op(A) op(B) + beta C,
 * op(X) = X or X^T.  gemm_f32 is the program's hot path: triad's packed
 * kernel for the SIMD path in use (cpu.h), bitwise the same on every path,
 * or cblas_sgemm with TRIAD_GEMM=blas (docs/performance.md); gemm_bf16 the
 * same in bf16 x bf16 products with fp32 sums (a bf16 run's linear layers:
 * VDPBF16PS where the processor has AVX512-BF16, its arithmetic emulated
 * bitwise elsewhere; gemm_kernels.h); gemm_f64 is the BLAS's, for the
 * double-precision tests. */
#ifndef TRIAD_GEMM_H
#define TRIAD_GEMM_H

#include <stddef.h>

/* The arithmetic of a product (gemm_kernels.h). */
enum gemm_arith { GEMM_FP32, GEMM_BF16 };

void gemm_f32(int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc);
/* A and B are rounded to bf16 as they are packed (gemm_kernels.h's
 * gemm_bf16_round: a no-op on bf16 values, except that subnormal ones
 * become zeros); C and the sums are fp32. */
void gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc);
/* What C = op(A) op(B) (alpha 1, beta 0) does to each element after its
 * last sum, in this order: adds bias[j] of its column (an fp32 addition,
 * outside the kernels' FTZ mode; NULL: none), rounds it to bf16
 * (round_bf16).  The bits of the product followed by passes over C that do
 * the same, done on each register tile of C as its last sums are stored,
 * while it is in L1 (docs/performance.md). */
struct gemm_epilogue {
    const float *bias;
    int round_bf16;
};
void gemm_f32_ep(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                 float *C, int ldc, const struct gemm_epilogue *ep);
void gemm_bf16_ep(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                  float *C, int ldc, const struct gemm_epilogue *ep);
/* A weight's gradient and its bias's in one pass over the output gradient
 * (A, K x M, row-major): C (M, N) += A^T B (alpha 1, beta 1), and sums[i]
 * += A[k*lda + i] for k = 0 .. K-1 in order, fp32 adds in the caller's
 * floating-point mode, formed as A is packed (on the BLAS path, a loop
 * after the product).  Bitwise the product of gemm_f32 / gemm_bf16 and the
 * plain loop over the rows of A; sums NULL: the product alone. */
void gemm_f32_wgrad(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                    float *sums);
void gemm_bf16_wgrad(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                     float *sums);
/* Operands packed once and multiplied many times (attention's blocks of a
 * few dozen rows, each used against every block it meets): op(A) (m, k)
 * or op(B) (k, n) in the layout of the path's kernel for arithmetic a, k
 * cut in blocks of GEMM_KC as the product sums them (on the BLAS path:
 * op(X) copied row-major), in gemm_pack_a_bytes / gemm_pack_b_bytes bytes
 * (multiples of 64) at a 64-byte aligned address.  gemm_packed then forms
 * C (m, n) = alpha op(A) op(B) + beta C from them on the calling thread:
 * bitwise what gemm_f32 or gemm_bf16 gives for the same operands (on the
 * BLAS path, cblas_sgemm on the copies: deterministic, not bitwise the
 * transposed call). */
size_t gemm_pack_a_bytes(enum gemm_arith a, int m, int k);
size_t gemm_pack_b_bytes(enum gemm_arith a, int k, int n);
void gemm_pack_a(enum gemm_arith a, int transA, int m, int k, const float *A, int lda, void *ap);
void gemm_pack_b(enum gemm_arith a, int transB, int k, int n, const float *B, int ldb, void *bp);
void gemm_packed(enum gemm_arith a, int m, int n, int k, float alpha, const void *ap, const void *bp, float beta,
                 float *C, int ldc);
/* gemm_packed on a block of causal attention's diagonal, where the rows of
 * op(A), and the columns of op(B) or the values of k, stand for the same
 * positions of a sequence; the register tiles cut to what the mask keeps
 * (GEMM_CAUSAL_NONE: gemm_packed):
 *   GEMM_CAUSAL_COLS:   C(i, j) for j > i is not formed (the caller masks
 *                       it; some of it, in the diagonal's tiles, is);
 *   GEMM_CAUSAL_K_FROM: op(A)(i, k) is zero for k < i (the transposed
 *                       probabilities and dS): those leading terms are left
 *                       out of the sums, which start at +0 and stay +0
 *                       through them (fma(+-0, b, +0) = +0 for a finite b).
 * C is bitwise gemm_packed's wherever the caller reads it, for finite
 * operands (a masked term with an infinite or NaN b made NaN before).
 * (Trailing zero terms are not left out: a sum that underflowed to -0 may
 * become +0 at a zero term, so cutting them would change the sign of such
 * a zero, differently for each kernel's tile height.)  One K block (k <=
 * GEMM_KC); otherwise, and on the BLAS path, gemm_packed whole. */
enum gemm_causal { GEMM_CAUSAL_NONE, GEMM_CAUSAL_COLS, GEMM_CAUSAL_K_FROM };
void gemm_packed_causal(enum gemm_arith a, enum gemm_causal cut, int m, int n, int k, float alpha, const void *ap,
                        const void *bp, float beta, float *C, int ldc);
void gemm_f64(int transA, int transB, int M, int N, int K, double alpha,
              const double *A, int lda, const double *B, int ldb, double beta,
              double *C, int ldc);

/* Choose the path again on the next call (after cpu.h's isa_force or a
 * change of TRIAD_GEMM): tests, and benchmarks that compare paths. */
void gemm_reset_path(void);

/* Bytes of packing buffers a thread keeps once it has multiplied (the
 * planner's workspace). */
size_t gemm_pack_bytes(void);
/* Bytes gemm_peak_gflops allocates while it measures (the planner's probe). */
size_t gemm_probe_bytes(void);

/* Name of the implementation in use for arithmetic a (printed at start-up). */
const char *gemm_backend_name(enum gemm_arith a);

/* This path's rate in arithmetic a in GFLOP/s on this rank's threads,
 * measured now on a 1024^3 product (best of 5 after a warm-up, about 0.05
 * s): the peak for MFU. */
double gemm_peak_gflops(enum gemm_arith a);

#endif
