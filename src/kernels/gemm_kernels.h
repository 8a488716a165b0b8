/* gemm_kernels.h -- the packed micro-kernels behind gemm.c, one per SIMD
 * path (gemm_generic.c, gemm_avx2.c, gemm_avx512.c).
 *
 * gemm.c runs the Goto/BLIS loop nest (jc -> pc -> ic -> jr -> ir) over a
 * kernel's packing routines and micro-kernels.  Every kernel computes each
 * element of C in the same arithmetic, so every path gives bitwise the same
 * C:
 *
 *   for each block of GEMM_KC values of k, in order:
 *       acc = 0;  for k in the block, in order:  acc = fma(a(i,k), b(k,j), acc)
 *       C(i,j) = first block && beta == 0 ? alpha*acc
 *                                         : fma(first block ? beta : 1, C(i,j), alpha*acc)
 *
 * fma rounds once (fmaf, vfmadd); alpha*acc is one rounded product.  The
 * vector width only decides how many j are computed at once. */
#ifndef TRIAD_GEMM_KERNELS_H
#define TRIAD_GEMM_KERNELS_H

/* The K block every kernel sums in (part of the arithmetic above). */
#define GEMM_KC 256
/* Column block of packed B (a multiple of every NR). */
#define GEMM_NC 1024

/* C (rows, nr; row stride ldc) = alpha * Ap Bp + beta * C over kc steps,
 * for a packed A panel (MR floats per k, the first `rows` used) and a packed
 * B panel (NR floats per k, the first nr used); beta == 0 never reads C. */
typedef void gemm_ukernel_fn(int kc, const float *ap, const float *bp, float *c, long ldc, float alpha,
                             float beta, int nr);

struct gemm_kernel {
    const char *name;   /* "triad avx2 sgemm (6x16 micro-kernel)" */
    int mr, nr, mc;     /* register block MR x NR; rows of packed A per block (a multiple of MR) */
    /* Packed A: panels of MR rows; panel p holds op(A)(p*MR + i, k) at
     * [p*MR*kc + k*MR + i], rows past m zero. */
    void (*pack_a)(int transA, int m, int kc, const float *A, long lda, float *ap);
    /* Packed B: panels of NR columns; panel q holds op(B)(k, q*NR + j) at
     * [q*NR*kc + k*NR + j], columns past n zero.  bp is 64-byte aligned. */
    void (*pack_b)(int transB, int kc, int n, const float *B, long ldb, float *bp);
    gemm_ukernel_fn *const *ukernel; /* [rows], rows = 1 .. mr */
};

/* gemm_kernel_avx2 and gemm_kernel_avx512 exist in x86-64 builds only. */
extern const struct gemm_kernel gemm_kernel_generic, gemm_kernel_avx2, gemm_kernel_avx512;

/* The largest NR and MC of the kernels: the packing buffers' sizes. */
#define GEMM_NR_MAX 32
#define GEMM_MC_MAX 224

#endif
