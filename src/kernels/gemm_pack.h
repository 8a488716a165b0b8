/* gemm_pack.h -- packing in plain C for the kernels that have no packing
 * of their own (generic, avx2; the bf16 kernels that emulate VDPBF16PS):
 * the layouts of gemm_kernels.h for a register block of MR rows and NR
 * columns.  Included by each kernel's file, so the loops are compiled (and
 * vectorised) for that kernel's target. */
#ifndef TRIAD_GEMM_PACK_H
#define TRIAD_GEMM_PACK_H

static inline __attribute__((always_inline)) void
pack_a_c(int transA, int m, int kc, const float *restrict A, long lda, float *restrict ap, const int MR)
{
    for (int p = 0; p < m; p += MR, ap += (long)MR * kc) {
        int mr = m - p < MR ? m - p : MR;
        if (transA) {             /* op(A)(i,k) = A[k*lda + i]: the MR rows lie side by side */
            for (int k = 0; k < kc; k++) {
                const float *a = A + (long)k * lda + p;
                float *d = ap + (long)k * MR;
                for (int i = 0; i < MR; i++) d[i] = i < mr ? a[i] : 0.0f;
            }
        } else {                  /* op(A)(i,k) = A[i*lda + k]: one row at a time */
            for (int i = 0; i < MR; i++) {
                const float *a = A + (long)(p + i) * lda;
                if (i < mr)
                    for (int k = 0; k < kc; k++) ap[(long)k * MR + i] = a[k];
                else
                    for (int k = 0; k < kc; k++) ap[(long)k * MR + i] = 0.0f;
            }
        }
    }
}

static inline __attribute__((always_inline)) void
pack_b_c(int transB, int kc, int n, const float *restrict B, long ldb, float *restrict bp, const int NR)
{
    for (int q = 0; q < n; q += NR, bp += (long)NR * kc) {
        int nr = n - q < NR ? n - q : NR;
        if (!transB) {            /* op(B)(k,j) = B[k*ldb + j]: a row of NR columns per k */
            for (int k = 0; k < kc; k++) {
                const float *b = B + (long)k * ldb + q;
                float *d = bp + (long)k * NR;
                if (nr == NR)
                    for (int j = 0; j < NR; j++) d[j] = b[j];
                else
                    for (int j = 0; j < NR; j++) d[j] = j < nr ? b[j] : 0.0f;
            }
        } else {                  /* op(B)(k,j) = B[j*ldb + k]: one column at a time */
            for (int j = 0; j < NR; j++) {
                const float *b = B + (long)(q + j) * ldb;
                if (j < nr)
                    for (int k = 0; k < kc; k++) bp[(long)k * NR + j] = b[k];
                else
                    for (int k = 0; k < kc; k++) bp[(long)k * NR + j] = 0.0f;
            }
        }
    }
}

/* The fp32 layouts, for gemm_bf16's arithmetic on fp32 FMAs: each value
 * rounded by gemm_bf16_round, k padded with zeros to kp (even), and each
 * pair of k stored odd first (packed position q holds k = q ^ 1), so that
 * an fp32 micro-kernel summing in packed order adds a(2p+1) b(2p+1) before
 * a(2p) b(2p).  (Position q < kp holds k = q ^ 1 < kc, or a zero.)
 *
 * With kc even, a kernel packs with its fp32 packing and then turns the
 * panels into these in place (bf16_pairs): n floats in groups of 2w (the
 * w values of one k, then the w of the next), each group's halves
 * swapped and rounded.  With kc odd (at most a product's last block) the
 * loops below pack directly. */
static inline __attribute__((always_inline)) void bf16_pairs(float *restrict x, long n, const int w)
{
    for (long g = 0; g < n; g += 2 * w)
        for (int i = 0; i < w; i++) {
            float lo = gemm_bf16_round(x[g + i]), hi = gemm_bf16_round(x[g + w + i]);
            x[g + i] = hi;
            x[g + w + i] = lo;
        }
}

static inline __attribute__((always_inline)) float bf16_at(const float *x, long stride, int k, int kc)
{
    return k < kc ? gemm_bf16_round(x[(long)k * stride]) : 0.0f;
}

static inline __attribute__((always_inline)) void
pack_a_bf16_c(int transA, int m, int kc, const float *restrict A, long lda, float *restrict ap, const int MR)
{
    int kp = (kc + 1) & ~1;
    for (int p = 0; p < m; p += MR, ap += (long)MR * kp) {
        int mr = m - p < MR ? m - p : MR;
        if (transA) {             /* op(A)(i,k) = A[k*lda + i] */
            for (int q = 0; q < kp; q++)
                for (int i = 0; i < MR; i++) ap[(long)q * MR + i] = i < mr ? bf16_at(A + p + i, lda, q ^ 1, kc) : 0.0f;
        } else {                  /* op(A)(i,k) = A[i*lda + k] */
            for (int i = 0; i < MR; i++)
                for (int q = 0; q < kp; q++)
                    ap[(long)q * MR + i] = i < mr ? bf16_at(A + (long)(p + i) * lda, 1, q ^ 1, kc) : 0.0f;
        }
    }
}

static inline __attribute__((always_inline)) void
pack_b_bf16_c(int transB, int kc, int n, const float *restrict B, long ldb, float *restrict bp, const int NR)
{
    int kp = (kc + 1) & ~1;
    for (int q0 = 0; q0 < n; q0 += NR, bp += (long)NR * kp) {
        int nr = n - q0 < NR ? n - q0 : NR;
        if (!transB) {            /* op(B)(k,j) = B[k*ldb + j] */
            for (int q = 0; q < kp; q++)
                for (int j = 0; j < NR; j++) bp[(long)q * NR + j] = j < nr ? bf16_at(B + q0 + j, ldb, q ^ 1, kc) : 0.0f;
        } else {                  /* op(B)(k,j) = B[j*ldb + k] */
            for (int j = 0; j < NR; j++)
                for (int q = 0; q < kp; q++)
                    bp[(long)q * NR + j] = j < nr ? bf16_at(B + (long)(q0 + j) * ldb, 1, q ^ 1, kc) : 0.0f;
        }
    }
}

#endif
