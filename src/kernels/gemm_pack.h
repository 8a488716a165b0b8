/* gemm_pack.h -- packing in plain C for the kernels that have no packing
 * of their own (generic, avx2's B as stored): the layouts of
 * gemm_kernels.h for a register block of MR rows and NR columns, and the
 * pieces the SIMD packers of gemm_avx2.c and gemm_avx512.c share with it.
 * Included by each kernel's file, so the loops are compiled (and
 * vectorised) for that kernel's target.
 *
 * Every packer takes bf16, a constant at each call (0 or 1), so that each
 * kernel compiles an fp32 packer, which is what it would be without the
 * flag, and a bf16 one.  With bf16 the packing makes the fp32 layouts for
 * gemm_bf16's arithmetic on fp32 FMAs (the kernels that emulate
 * VDPBF16PS) in the same pass: each value rounded by gemm_bf16_round, k
 * padded with a zero to kp (even), and each pair of k stored odd first
 * (packed position q holds k = q ^ 1), so that an fp32 micro-kernel
 * summing in packed order adds a(2p+1) b(2p+1) before a(2p) b(2p).
 * (Position q < kp holds k = q ^ 1 < kc, or a zero.)  Where the values of
 * one k lie in a row of their own (op(A) = A^T, op(B) = B) the rows are
 * read in order, each written at its position: read in pairs swapped, the
 * processor's prefetchers do not see the stride, and the loads wait. */
#ifndef TRIAD_GEMM_PACK_H
#define TRIAD_GEMM_PACK_H

/* Rows ahead that pack_b_c's bf16 packing of B as stored prefetches. */
#ifndef PACK_AHEAD
#define PACK_AHEAD 16
#endif

/* Rows ahead that the SIMD packers reading across the rows of their source
 * (op(A) = A^T, op(B) = B) ask for while they read a group of rows: the
 * next group's (groups of 8 rows; the AVX-512 fp32 packing of A^T reads
 * groups of 4, so it asks for the group after next, and the first two
 * groups of a block come unasked), each row's span of the panel (up to 32
 * floats: its first and last cache lines).  The hardware's prefetchers follow each row's
 * short run late; asked ahead, A^T's packing ran 9-16 % faster from memory
 * on Zen 5 (docs/performance.md). */
#ifndef PACK_AHEAD_ROWS
#define PACK_AHEAD_ROWS 8
#endif

static inline __attribute__((always_inline)) void prefetch_span(const float *x, int n)
{
    __builtin_prefetch(x, 0, 3);
    __builtin_prefetch(x + n - 1, 0, 3);
}

/* The values of k a packed panel holds: kc, with bf16 padded to even. */
static inline __attribute__((always_inline)) int pack_kp(int kc, const int bf16) { return bf16 ? (kc + 1) & ~1 : kc; }

/* x as packed: with bf16 rounded. */
static inline __attribute__((always_inline)) float pack_val(float x, const int bf16)
{
    return bf16 ? gemm_bf16_round(x) : x;
}

/* x[k * stride] as packed at the position that holds k: with bf16 rounded,
 * or a zero past kc. */
static inline __attribute__((always_inline)) float pack_at(const float *x, long stride, int k, int kc, const int bf16)
{
    return !bf16 || k < kc ? pack_val(x[(long)k * stride], bf16) : 0.0f;
}

static inline __attribute__((always_inline)) void pack_a_c(int transA, int m, int kc, const float *restrict A, long lda,
                                                           float *restrict ap, float *restrict sums, const int MR,
                                                           const int bf16)
{
    const int kp = pack_kp(kc, bf16);
    for (int p = 0; p < m; p += MR, ap += (long)MR * kp) {
        int mr = m - p < MR ? m - p : MR;
        if (transA) {             /* op(A)(i,k) = A[k*lda + i]: the MR rows lie side by side */
            for (int k = 0; k < kp; k++) {  /* k in order, at its packed position */
                float *d = ap + (long)(k ^ bf16) * MR;
                for (int i = 0; i < MR; i++) d[i] = i < mr ? pack_at(A + p + i, lda, k, kc, bf16) : 0.0f;
                if (sums && k < kc)
                    for (int i = 0; i < mr; i++) sums[p + i] += A[(long)k * lda + p + i];
            }
        } else {                  /* op(A)(i,k) = A[i*lda + k]: one row at a time */
            for (int i = 0; i < MR; i++) {
                const float *a = A + (long)(p + i) * lda;
                if (i < mr)
                    for (int q = 0; q < kp; q++) ap[(long)q * MR + i] = pack_at(a, 1, q ^ bf16, kc, bf16);
                else
                    for (int q = 0; q < kp; q++) ap[(long)q * MR + i] = 0.0f;
            }
        }
    }
}

static inline __attribute__((always_inline)) void pack_b_c(int transB, int kc, int n, const float *restrict B, long ldb,
                                                           float *restrict bp, const int NR, const int bf16)
{
    const int kp = pack_kp(kc, bf16);
    for (int q0 = 0; q0 < n; q0 += NR, bp += (long)NR * kp) {
        int nr = n - q0 < NR ? n - q0 : NR;
        if (!transB) {            /* op(B)(k,j) = B[k*ldb + j]: a row of NR columns per k */
            for (int k = 0; k < kp; k++) {  /* k in order, at its packed position */
                float *d = bp + (long)(k ^ bf16) * NR;
                if (bf16 && k >= kc) {
                    for (int j = 0; j < NR; j++) d[j] = 0.0f;
                    continue;
                }
                const float *b = B + (long)k * ldb + q0;
                /* (with bf16 the rounding makes a row's loop long: fewer rows' loads in flight) */
                if (bf16 && k + PACK_AHEAD < kc) __builtin_prefetch(b + PACK_AHEAD * ldb);
                if (nr == NR)
                    for (int j = 0; j < NR; j++) d[j] = pack_val(b[j], bf16);
                else
                    for (int j = 0; j < NR; j++) d[j] = j < nr ? pack_val(b[j], bf16) : 0.0f;
            }
        } else {                  /* op(B)(k,j) = B[j*ldb + k]: one column at a time */
            for (int j = 0; j < NR; j++) {
                const float *b = B + (long)(q0 + j) * ldb;
                if (j < nr)
                    for (int q = 0; q < kp; q++) bp[(long)q * NR + j] = pack_at(b, 1, q ^ bf16, kc, bf16);
                else
                    for (int q = 0; q < kp; q++) bp[(long)q * NR + j] = 0.0f;
            }
        }
    }
}

/* A kernel's four packers for struct gemm_kernel, fp32 and bf16 (pack_a,
 * pack_b, pack_a_bf16, pack_b_bf16), over the pack_a_any and pack_b_any
 * that its file defines, with the function attribute TARGET (or none). */
#define GEMM_PACKERS(TARGET)                                                                                   \
    TARGET static void pack_a(int transA, int m, int kc, const float *A, long lda, void *ap, float *sums)       \
    {                                                                                                          \
        pack_a_any(transA, m, kc, A, lda, ap, sums, 0);                                                        \
    }                                                                                                          \
    TARGET static void pack_b(int transB, int kc, int n, const float *B, long ldb, void *bp)                   \
    {                                                                                                          \
        pack_b_any(transB, kc, n, B, ldb, bp, 0);                                                              \
    }                                                                                                          \
    TARGET static void pack_a_bf16(int transA, int m, int kc, const float *A, long lda, void *ap, float *sums)  \
    {                                                                                                          \
        pack_a_any(transA, m, kc, A, lda, ap, sums, 1);                                                        \
    }                                                                                                          \
    TARGET static void pack_b_bf16(int transB, int kc, int n, const float *B, long ldb, void *bp)              \
    {                                                                                                          \
        pack_b_any(transB, kc, n, B, ldb, bp, 1);                                                              \
    }

#endif
