/* gemm_kernels.h -- the packed micro-kernels behind gemm.c, one per SIMD
 * path (gemm_generic.c, gemm_avx2.c, gemm_avx512.c, gemm_avx512bf16.c), and
 * the two arithmetics they compute in.
 *
 * gemm.c runs the Goto/BLIS loop nest (jc -> pc -> ic -> jr -> ir) over a
 * kernel's packing routines and micro-kernels.  Every kernel of an
 * arithmetic computes each element of C in it, so every path gives bitwise
 * the same C.
 *
 * gemm_f32 (fp32):
 *
 *   for each block of GEMM_KC values of k, in order:
 *       acc = 0;  for k in the block, in order:  acc = fma(a(i,k), b(k,j), acc)
 *       C(i,j) = first block && beta == 0 ? alpha*acc
 *                                         : fma(first block ? beta : 1, C(i,j), alpha*acc)
 *
 * fma rounds once (fmaf, vfmadd); alpha*acc is one rounded product.  The
 * vector width only decides how many j are computed at once.
 *
 * gemm_bf16 (bf16 x bf16 products, fp32 sums: what AVX512-BF16's VDPBF16PS
 * computes, per Intel's SDM, and what AMD Zen 4 was measured to compute,
 * regression/unit/test_bf16_dot.c):
 *
 *   a = gemm_bf16_round(a(i,k)), b = gemm_bf16_round(b(k,j))   (as they are packed)
 *   for each block of GEMM_KC values of k, in order, zero-padded to an even count:
 *       acc = 0;  for each pair k = 2p, 2p+1 of the block, in order:
 *           acc = fma_ftz(a(i,2p+1), b(2p+1,j), acc);  acc = fma_ftz(a(i,2p), b(2p,j), acc)
 *       C(i,j) = gemm_f32's last line, its product and fma flushing as fma_ftz does
 *
 * fma_ftz (gemm_fma_ftz) is an fp32 FMA rounded to nearest even whose
 * result, when tiny, becomes a zero of its sign (flush to zero); tiny
 * means below FLT_MIN in magnitude once rounded to 24 bits with an
 * unbounded exponent (x86's rule, tininess after rounding: MXCSR.FTZ
 * flushes exactly these).  A bf16 x bf16 product is exact in fp32's 24
 * bits, so the only roundings are the sums'.  The accumulator is never
 * subnormal, so VDPBF16PS's flushing of subnormal inputs touches only the
 * packed operands, which gemm_bf16_round flushes. */
#ifndef TRIAD_GEMM_KERNELS_H
#define TRIAD_GEMM_KERNELS_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The K block every kernel sums in (part of the arithmetic above). */
#define GEMM_KC 256
/* Column block of packed B (a multiple of every NR). */
#define GEMM_NC 1024

/* C (rows, nr; row stride ldc) = alpha * Ap Bp + beta * C over kc values
 * of k (even for a bf16 kernel: padded), for a packed A panel (the first
 * `rows` of MR used) and a packed B panel (the first nr of NR used); beta
 * == 0 never reads C.  Then, on a product's last K block, gemm.h's
 * epilogue on the tile as it is stored: bias (the tile's first column's;
 * NULL: none) added in plain fp32, the sum rounded to bf16 (round: as
 * lp_round rounds).  Returns the rows (bit i: row i) it left without the
 * epilogue, which the caller does: a kernel without one of its own leaves
 * all of them; one whose floating-point mode flushed a bias sum, that row. */
typedef unsigned gemm_ukernel_fn(int kc, const void *ap, const void *bp, float *c, long ldc, float alpha, float beta,
                                 int nr, const float *bias, int round);

struct gemm_kernel {
    const char *name;   /* "triad avx2 sgemm (6x16 micro-kernel)" */
    int mr, nr, mc;     /* register block MR x NR; rows of packed A per block (a multiple of MR) */
    int bf16;           /* 1: gemm_bf16's arithmetic, k padded to even within a block */
    int elem;           /* bytes of one packed value: 4 (float) or 2 (bf16) */
    /* Packed A: panels of MR rows, each of kp = kc (bf16: padded to even)
     * values of k.  fp32: panel p holds op(A)(p*MR + i, k) at
     * [p*MR*kp + k*MR + i], rows past m zero; a bf16 kernel's layout is
     * its own.  Packing rounds to bf16 in a bf16 kernel.  With sums
     * (transA only; NULL: none) each row of op(A) is also summed as it is
     * read: sums[i] += op(A)(i, k) for the block's k in order, in fp32 on
     * the values as stored (before any rounding), in the caller's
     * floating-point mode (outside the kernel's mode_enter). */
    void (*pack_a)(int transA, int m, int kc, const float *A, long lda, void *ap, float *sums);
    /* Packed B: panels of NR columns; fp32: panel q holds op(B)(k, q*NR + j)
     * at [q*NR*kp + k*NR + j], columns past n zero.  bp is 64-byte aligned. */
    void (*pack_b)(int transB, int kc, int n, const float *B, long ldb, void *bp);
    gemm_ukernel_fn *const *ukernel; /* [rows], rows = 1 .. mr */
    /* The floating-point mode a kernel needs, set on the calling thread
     * around a slice of C and restored after (the x86 bf16 kernels:
     * MXCSR.FTZ), or NULL. */
    unsigned (*mode_enter)(void);
    void (*mode_leave)(unsigned saved);
};

/* gemm_kernel_avx2*, gemm_kernel_avx512* exist in x86-64 builds only. */
extern const struct gemm_kernel gemm_kernel_generic, gemm_kernel_avx2, gemm_kernel_avx512;
extern const struct gemm_kernel gemm_kernel_generic_bf16, gemm_kernel_avx2_bf16, gemm_kernel_avx512_bf16,
    gemm_kernel_avx512bf16;

/* The largest NR and MC of the kernels: the packing buffers' sizes. */
#define GEMM_NR_MAX 32
#define GEMM_MC_MAX 224

/* ------------------------------------------------ gemm_bf16's arithmetic */

/* x as VCVTNE2PS2BF16 rounds it to bf16: to nearest even (a finite value
 * past bf16's largest becomes an infinity); zero and subnormals to a zero
 * of their sign; a NaN stays a NaN, made quiet.  Selects, no branches, so
 * that compilers vectorise the packing loops that call it. */
static inline float gemm_bf16_round(float x)
{
    uint32_t u, r;
    memcpy(&u, &x, sizeof u);
    r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;                        /* to nearest even */
    r = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & 0xffff0000u : r; /* NaN: made quiet */
    r = (u & 0x7f800000u) == 0 ? u & 0x80000000u : r;                          /* zero, subnormal */
    memcpy(&x, &r, sizeof x);
    return x;
}

/* r, the correctly rounded (gradual underflow) x*y + z, flushed as fma_ftz
 * flushes.  A subnormal r means the exact value was below FLT_MIN - 2^-150,
 * tiny at 24 bits too.  r = +-FLT_MIN may have been rounded up from a value
 * that is tiny at 24 bits (up to 2^-150 below FLT_MIN): the same sum scaled
 * by 2^64 is normal, so rounded as with an unbounded exponent, and decides.
 * (The scaled terms cannot overflow: a term past 2^64 cannot cancel down
 * to FLT_MIN in fp32's grid.) */
static inline float gemm_ftz(float r, float x, float y, float z)
{
    if (!(fabsf(r) <= FLT_MIN) || r == 0.0f) return r; /* normal, infinite, NaN or zero */
    if (fabsf(r) < FLT_MIN) return copysignf(0.0f, r);
    float lo = fabsf(x) < fabsf(y) ? x : y, hi = fabsf(x) < fabsf(y) ? y : x;
    float s = fmaf(lo * 0x1p64f, hi, z * 0x1p64f);
    return fabsf(s) < 0x1p-62f ? copysignf(0.0f, r) : r;
}

/* fma_ftz: x*y + z rounded once to nearest even, a tiny result flushed. */
static inline float gemm_fma_ftz(float x, float y, float z) { return gemm_ftz(fmaf(x, y, z), x, y, z); }

/* x*y rounded to nearest even, a tiny result flushed. */
static inline float gemm_mul_ftz(float x, float y) { return gemm_ftz(x * y, x, y, 0.0f); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <xmmintrin.h>
/* The x86 bf16 kernels' mode (mode_enter / mode_leave): MXCSR with
 * flush-to-zero (fma_ftz's flushing, on every SSE/AVX operation), no
 * denormals-are-zero, round to nearest even, every exception masked. */
static inline unsigned gemm_mxcsr_ftz_enter(void)
{
    unsigned saved = _mm_getcsr();
    _mm_setcsr(0x9f80u);
    return saved;
}

static inline void gemm_mxcsr_leave(unsigned saved) { _mm_setcsr(saved); }
#endif

#endif
