/* kernels_cpu.c -- the CPU kernels behind backend.h (GPT-2 as PyTorch / llm.c).
 *
 * One source, two precisions: float, compiled once per SIMD path with the
 * names suffixed _generic, _avx2, _avx512 (kernels_isa.c gives the program
 * the plain names of the path in use); with -DKERNELS_F64 double with names
 * suffixed _f64 (the finite-difference reference of the unit tests,
 * libkernels64.a).
 *
 * Matmuls, including attention's per-(b,h) products, go through gemm.h.
 * Everything else is OpenMP over rows or elements.  exp in float is a
 * branch-free polynomial that GCC vectorises (libm's expf does not
 * vectorise without -ffast-math); double uses libm as the reference.
 *
 * Determinism: no atomics, no per-thread partial sums.  Reductions over rows
 * (parameter gradients) are split by channel (or, for dwte, by owned row),
 * so each output is summed in row order whatever the thread count; sumsq
 * uses a fixed chunking.  Every result is therefore bitwise independent of
 * OMP_NUM_THREADS (given gemm's own guarantee).
 *
 * Build note: GCC keeps sqrtf scalar unless -fno-math-errno (errno must be
 * set for negative arguments), which makes AdamW ~10x slower.
 */
#include "backend.h"
#include "gemm.h"
#include "team.h"

#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef KERNELS_F64
#define KREAL double
#define KNAME(n) n##_f64
#define GEMM gemm_f64
#define ATT_ARITH 0
#define KEXP(x) exp(x)
#define KSQRT(x) sqrt(x)
#define KLOG(x) log(x)
#else
/* -DKERNELS_SUFFIX=_avx2 etc.: one copy per SIMD path (kernels_isa.c). */
#ifndef KERNELS_SUFFIX
#define KERNELS_SUFFIX _generic
#endif
#define KPASTE2(a, b) a##b
#define KPASTE(a, b) KPASTE2(a, b)
#define KREAL float
#define KNAME(n) KPASTE(n, KERNELS_SUFFIX)
#define GEMM gemm_f32
#define ATT_ARITH GEMM_FP32
#define KEXP(x) fast_expf(x)
#define KSQRT(x) sqrtf(x)
#define KLOG(x) logf(x)
#endif

#ifndef KERNELS_F64
#define KERNELS_BF16 /* (and the bf16 matmuls) */
#include "backend_ops.h" /* this copy's names (backend.h declares the plain and _f64 ones) */
#undef KERNELS_BF16
#endif

#define K(x) ((KREAL)(x))

/* Below this many elements an elementwise kernel stays on one thread. */
#define PAR_MIN 16384

/* An element- or row-wise kernel's items [0, n) in pieces of whole grains
 * (TEAM_PER a thread), shared by a team of the threads (team.h: each thread
 * its static range first, then the back of a slower thread's) where the
 * work is worth a region of its own (WORK >= PAR_MIN elements) and the
 * call comes from outside every parallel region (team_threads() > 1: not
 * even inside a region of one thread, whose team's counters a team of ours
 * would overwrite), else (or without room for the counters) in order on
 * the calling thread, with no OpenMP construct: entering one costs a
 * microsecond even when its if clause is false, 2.6 us nested (libgomp
 * makes a team of one; Zen 5), and device_cpu.c's rounded_rows calls these
 * kernels a block at a time from inside its own region.  BODY runs on
 * items [lo, hi) of each piece.  Each item's arithmetic is the same
 * whichever thread runs it. */
enum { TEAM_PER = 4 };
#define TEAM_ITEMS(n, grain, work, lo, hi, ...)                                                   \
    do {                                                                                          \
        size_t n_ = (n), per_;                                                                    \
        struct team tm_;                                                                          \
        int nb_ = team_blocks_of(n_, (grain), TEAM_PER, &per_), nt_ = team_threads();             \
        if (nt_ > nb_) nt_ = nb_;                                                                 \
        if ((work) >= PAR_MIN && nt_ > 1 && team_init(&tm_, nb_, nt_, 1)) {                      \
            _Pragma("omp parallel num_threads(nt_)")                                              \
            for (int v_ = 0, t_ = omp_get_thread_num(), b_; (b_ = team_take(&tm_, t_, 0, &v_)) >= 0;) { \
                size_t lo = (size_t)b_ * per_, hi = lo + per_ < n_ ? lo + per_ : n_;              \
                __VA_ARGS__                                                                       \
            }                                                                                     \
        } else {                                                                                  \
            size_t lo = 0, hi = n_;                                                               \
            __VA_ARGS__                                                                           \
        }                                                                                         \
    } while (0)

/* ATT_BLK (ops.h): the row block of the causal attention products, only
 * blocks on or below the diagonal computed, which saves ~(1 - (n+1)/2n) of
 * the flops. */
/* Channel granule for the channel-split reductions (one cache line). */
#define CH_GRAIN 16

static inline int imin(int a, int b) { return a < b ? a : b; }

/* Deterministic sums: LANES interleaved partial sums (lane l adds the terms
 * j = l mod LANES, in order), then a fixed tree.  The compiler vectorises
 * the lanes at whatever width the target has, and the result is the same
 * for all of them (an `omp simd reduction` would let the width choose the
 * order: the SIMD paths would then differ).  TYPE total = sum of TERM(j)
 * over j in [lo, hi). */
#define LANES 16

/* The fixed trees that close LANE_SUM and LANE_MAX: a[l] op= a[l + w] for
 * w = 8, 4, 2, 1, l < w.  In float as whole vectors (GCC's vector
 * extensions: the halves of a register), which the compiler otherwise
 * assembled lane by lane from the stack; the same operations, the same bits. */
#define LANE_PASTE2(a, b) a##b
#define LANE_PASTE(a, b) LANE_PASTE2(a, b)
#define LANE_TREE_SUM(TYPE, a) LANE_PASTE(lane_tree_sum_, TYPE)(a)
#define LANE_TREE_MAX(TYPE, a) LANE_PASTE(lane_tree_max_, TYPE)(a)

static inline double lane_tree_sum_double(double *a)
{
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] += a[l + w];
    return a[0];
}

static inline double lane_tree_max_double(double *a)
{
    for (int w = LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) a[l] = a[l + w] > a[l] ? a[l + w] : a[l];
    return a[0];
}

typedef float lane_v8 __attribute__((vector_size(32)));
typedef float lane_v4 __attribute__((vector_size(16)));
typedef int lane_i8 __attribute__((vector_size(32)));
typedef int lane_i4 __attribute__((vector_size(16)));

static inline float lane_tree_sum_float(const float *a)
{
    lane_v8 lo8, hi8;
    lane_v4 lo4, hi4;
    memcpy(&lo8, a, sizeof lo8);
    memcpy(&hi8, a + 8, sizeof hi8);
    lo8 += hi8;
    memcpy(&lo4, &lo8, sizeof lo4);
    memcpy(&hi4, (const float *)&lo8 + 4, sizeof hi4);
    lo4 += hi4;
    float s0 = lo4[0] + lo4[2], s1 = lo4[1] + lo4[3];
    return s0 + s1;
}

/* hi > lo ? hi : lo, lane by lane (a NaN in hi never wins; of two equal
 * values lo), as bits: lo takes hi's where the comparison holds. */
#define LANE_VMAX(IT, lo, hi)                                                       \
    do {                                                                           \
        IT m_ = (hi) > (lo), l_, h_;                                               \
        memcpy(&l_, &(lo), sizeof l_);                                             \
        memcpy(&h_, &(hi), sizeof h_);                                             \
        l_ = (h_ & m_) | (l_ & ~m_);                                               \
        memcpy(&(lo), &l_, sizeof l_);                                             \
    } while (0)

static inline float lane_tree_max_float(const float *a)
{
    lane_v8 lo8, hi8;
    lane_v4 lo4, hi4;
    memcpy(&lo8, a, sizeof lo8);
    memcpy(&hi8, a + 8, sizeof hi8);
    LANE_VMAX(lane_i8, lo8, hi8);
    memcpy(&lo4, &lo8, sizeof lo4);
    memcpy(&hi4, (const float *)&lo8 + 4, sizeof hi4);
    LANE_VMAX(lane_i4, lo4, hi4);
    float m0 = lo4[2] > lo4[0] ? lo4[2] : lo4[0], m1 = lo4[3] > lo4[1] ? lo4[3] : lo4[1];
    return m1 > m0 ? m1 : m0;
}
/* LANE_SUM's lanes acc[LANES] add TERM(j) over j in [lo, hi), term j to
 * lane (j - lo) mod LANES: a sum cut into spans of whole numbers of lanes
 * (all but the last) and added span by span is LANE_SUM's over all of them. */
#define LANE_ADD(acc, lo, hi, j, TERM)                                              \
    do {                                                                           \
        long j0_ = (lo), hi_ = (hi);                                               \
        for (; j0_ + LANES <= hi_; j0_ += LANES) {                                 \
            _Pragma("omp simd") for (int l_ = 0; l_ < LANES; l_++) {               \
                long j = j0_ + l_;                                                 \
                (acc)[l_] += (TERM);                                               \
            }                                                                      \
        }                                                                          \
        for (int l_ = 0; j0_ + l_ < hi_; l_++) {                                   \
            long j = j0_ + l_;                                                     \
            (acc)[l_] += (TERM);                                                   \
        }                                                                          \
    } while (0)
#define LANE_SUM(TYPE, total, lo, hi, j, TERM)                                      \
    do {                                                                           \
        TYPE acc_[LANES] = {0};                                                    \
        LANE_ADD(acc_, lo, hi, j, TERM);                                           \
        (total) = LANE_TREE_SUM(TYPE, acc_);                                       \
    } while (0)

/* The same lanes for a maximum: total = the largest of total and TERM(j)
 * over j in [lo, hi) as `x > total ? x : total` takes it (NaN terms never
 * win), lane by lane, then a fixed tree.  Only which of two equal zeros
 * wins can differ from a loop in order. */
#define LANE_MAX(TYPE, total, lo, hi, j, TERM)                                      \
    do {                                                                           \
        TYPE mx_[LANES];                                                           \
        long j0_ = (lo), hi_ = (hi);                                               \
        for (int l_ = 0; l_ < LANES; l_++) mx_[l_] = (total);                      \
        for (; j0_ + LANES <= hi_; j0_ += LANES) {                                 \
            _Pragma("omp simd") for (int l_ = 0; l_ < LANES; l_++) {               \
                long j = j0_ + l_;                                                 \
                TYPE x_ = (TERM);                                                  \
                mx_[l_] = x_ > mx_[l_] ? x_ : mx_[l_];                             \
            }                                                                      \
        }                                                                          \
        for (int l_ = 0; j0_ + l_ < hi_; l_++) {                                   \
            long j = j0_ + l_;                                                     \
            TYPE x_ = (TERM);                                                      \
            mx_[l_] = x_ > mx_[l_] ? x_ : mx_[l_];                                 \
        }                                                                          \
        (total) = LANE_TREE_MAX(TYPE, mx_);                                        \
    } while (0)

#ifndef KERNELS_F64
/* a*b + c, rounded twice on every target (no fmaf: the paths must agree). */
#define KFMAF(a, b, c) ((a) * (b) + (c))

/* exp(x) for float: Cephes expf (degree-6 polynomial on [-ln2/2, ln2/2],
 * about 1 ulp), written without branches or float->int conversions so that
 * it vectorises inside simd loops.  exp(-inf) = 0, exp(+inf) = inf, NaN in
 * gives NaN out.  Results below 2.6e-38 flush to 0.  In three parts, which
 * exp_block below runs as passes of their own. */
#define EXP_LO (-86.5f)
#define EXP_HI 88.7228f

/* x clamped, n = round(x / ln2) kept in the low mantissa bits of *t
 * (adding 1.5*2^23 rounds), and r = x - n ln2 in two steps. */
static inline float expf_reduce(float x, float *t)
{
    float xc = x < EXP_LO ? EXP_LO : x;
    xc = xc > EXP_HI ? EXP_HI : xc;
    *t = xc * 1.44269504088896341f + 12582912.0f;
    float n = *t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    return r - n * -2.12194440e-4f;
}

/* exp(r) on [-ln2/2, ln2/2]. */
static inline float expf_poly(float r)
{
    float p = 1.9875691500e-4f;
    p = KFMAF(p, r, 1.3981999507e-3f);
    p = KFMAF(p, r, 8.3334519073e-3f);
    p = KFMAF(p, r, 4.1665795894e-2f);
    p = KFMAF(p, r, 1.6666665459e-1f);
    p = KFMAF(p, r, 5.0000001201e-1f);
    return KFMAF(p, r * r, r) + 1.0f;
}

/* y = exp(r) times 2^n: 2^(n-1) from the bits of t (n in [-125, 128]),
 * times 2; then the ends of the range. */
static inline float expf_scale(float x, float y, float t)
{
    union { float f; uint32_t u; } tb = { .f = t }, sc;
    sc.u = (tb.u - 0x4B400000u + 126u) << 23;
    y = y * sc.f * 2.0f;
    y = x < EXP_LO ? 0.0f : y;
    y = x > EXP_HI ? INFINITY : y;
    return y;
}

static inline float fast_expf(float x)
{
    float t, r = expf_reduce(x, &t);
    return expf_scale(x, expf_poly(r), t);
}
#endif

/* y[i] = KEXP(x[i]) for i < n <= EXP_BLK (y may be x).  In float,
 * fast_expf's three parts each as a pass over the block: bitwise the same
 * numbers (the same operations on each element, in the same order), but
 * each element's chain of dependent operations in one pass is a third to a
 * half as long.  In one loop the chain (about 30 operations, a hundred cycles) fills
 * the processor's queues with a few vectors and the loop waits on it
 * (avx2: about 28 cycles per 8 floats); in three, more vectors are in
 * flight (kernels_bench's gelu_forward, 2M floats: avx2 1.00 -> 0.66 ms,
 * avx512 0.68 -> 0.56 ms; docs/performance.md). */
#define EXP_BLK 256
_Static_assert(EXP_BLK % LANES == 0, "a block of exponentials is a whole number of LANE_SUM's lanes");
static inline void exp_block(KREAL *y, const KREAL *x, int n)
{
#ifdef KERNELS_F64
    for (int i = 0; i < n; i++) y[i] = KEXP(x[i]);
#else
    float r[EXP_BLK], t[EXP_BLK];
#pragma omp simd
    for (int i = 0; i < n; i++) r[i] = expf_reduce(x[i], &t[i]);
#pragma omp simd
    for (int i = 0; i < n; i++) r[i] = expf_poly(r[i]);
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] = expf_scale(x[i], r[i], t[i]);
#endif
}

/* exp_block in place over x[i], i < n of any length. */
static inline void exp_inplace(KREAL *x, size_t n)
{
    for (size_t b = 0; b < n; b += EXP_BLK) exp_block(x + b, x + b, n - b < EXP_BLK ? (int)(n - b) : EXP_BLK);
}

/* This thread's share [c0, c1) of C channels, cut at CH_GRAIN boundaries.
 * Call inside a parallel region. */
static inline void channel_share(int C, int *c0, int *c1)
{
    int nt = omp_get_num_threads(), id = omp_get_thread_num();
    int nb = (C + CH_GRAIN - 1) / CH_GRAIN;
    int b0 = (int)((long)nb * id / nt), b1 = (int)((long)nb * (id + 1) / nt);
    *c0 = imin(C, b0 * CH_GRAIN);
    *c1 = imin(C, b1 * CH_GRAIN);
}

/* ------------------------------------------------------------ encoder */

void KNAME(encoder_forward)(KREAL *out, const int32_t *inp, const KREAL *wte,
                            const KREAL *wpe, int B, int T, int C, int v0, int Vs)
{
    long N = (long)B * T;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (long n = 0; n < N; n++) {
        KREAL *o = out + (size_t)n * C;                       // (C)
        long tok = (long)inp[n] - v0;
        const KREAL *w = (tok >= 0 && tok < Vs) ? wte + (size_t)tok * C : NULL;
        const KREAL *p = wpe ? wpe + (size_t)(n % T) * C : NULL;
        if (w && p) {
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = w[c] + p[c];
        } else if (w) {
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = w[c];
        } else if (p) {
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = p[c];
        } else {
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = 0;
        }
    }
}

void KNAME(encoder_backward)(KREAL *dwte, KREAL *dwpe, const KREAL *dout,
                             const int32_t *inp, int B, int T, int C, int v0, int Vs)
{
    long N = (long)B * T;
    /* dwte: each row belongs to one thread (row mod threads); every thread
     * scans all tokens in order and adds those of its rows, so a row that
     * several tokens hit is summed in token order on any thread count. */
#pragma omp parallel if (N * C >= PAR_MIN)
    {
        long nt = omp_get_num_threads(), id = omp_get_thread_num();
        for (long n = 0; n < N; n++) {
            long tok = (long)inp[n] - v0;
            if (tok < 0 || tok >= Vs || tok % nt != id) continue;
            KREAL *dw = dwte + (size_t)tok * C;
            const KREAL *d = dout + (size_t)n * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dw[c] += d[c];
        }
    }
    if (!dwpe) return;
    /* dwpe (T,C): position t sums its B rows in batch order. */
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (int t = 0; t < T; t++) {
        KREAL *dp = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const KREAL *d = dout + ((size_t)b * T + t) * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dp[c] += d[c];
        }
    }
}

/* ------------------------------------------------------------ layernorm, rmsnorm */

/* Ask for n floats from p on (rw 1: to be written), a cache line at a time:
 * the rows ahead of a row loop whose rows come from memory, where the
 * hardware prefetchers pick up its streams late. */
#define PREFETCH_SPAN(p, n, rw) \
    for (int q_ = 0; q_ < (n); q_ += 64 / (int)sizeof(KREAL)) __builtin_prefetch((p) + q_, (rw), 3)
/* The rows the norms' backward asks for ahead, in both its passes (a row of
 * 2048 x 256 from memory: 0.30-0.37 -> 0.20-0.23 ms; docs/performance.md). */
enum { NB_AHEAD = 4 };

/* Row n of the LayerNorm forward. */
static inline __attribute__((always_inline)) void layernorm_fwd_row(KREAL *out, KREAL *mean, KREAL *rstd,
                                                                    const KREAL *inp, const KREAL *weight,
                                                                    const KREAL *bias, int n, int C)
{
    const KREAL *x = inp + (size_t)n * C;
    KREAL *o = out + (size_t)n * C;
    KREAL s, v;
    LANE_SUM(KREAL, s, 0, C, c, x[c]);
    KREAL m = s / C;
    /* two passes: biased variance of the centred values */
    LANE_SUM(KREAL, v, 0, C, c, (x[c] - m) * (x[c] - m));
    v /= C;
    KREAL rs = K(1) / KSQRT(v + K(1e-5));
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = (x[c] - m) * rs * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = rs;
}

void KNAME(layernorm_forward)(KREAL *out, KREAL *mean, KREAL *rstd, const KREAL *inp,
                              const KREAL *weight, const KREAL *bias, int N, int C)
{
    TEAM_ITEMS((size_t)N, 1, (size_t)N * C, lo, hi,
               for (int n = (int)lo; n < (int)hi; n++) layernorm_fwd_row(out, mean, rstd, inp, weight, bias, n, C););
}

/* The backward of both norms (mean NULL: RMSNorm, no centring, no bias):
 * dinp += (w*dout - mean(w*dout) - norm * mean(w*dout*norm)) * rstd with
 * norm = (x - mean) * rstd, by row (RMSNorm: the mean and its term are 0);
 * dweight += dout * norm and dbias += dout, split by channel, rows in order.
 * The two parts are independent: dinp NULL skips the first (a zero-bubble
 * B), dweight NULL the second (its W, run later with the same numbers). */
static inline __attribute__((always_inline)) void norm_bwd_row(KREAL *dinp, const KREAL *dout, const KREAL *inp,
                                                               const KREAL *weight, const KREAL *mean,
                                                               const KREAL *rstd, int n, int N, int C)
{
    const KREAL *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
    KREAL *di = dinp + (size_t)n * C;
    KREAL m = mean ? mean[n] : K(0), rs = rstd[n];
    KREAL a = 0, b;
    if (n + NB_AHEAD < N) {
        PREFETCH_SPAN(x + NB_AHEAD * (size_t)C, C, 0);
        PREFETCH_SPAN(d + NB_AHEAD * (size_t)C, C, 0);
        PREFETCH_SPAN(di + NB_AHEAD * (size_t)C, C, 1);
    }
    if (mean) {
        LANE_SUM(KREAL, a, 0, C, c, weight[c] * d[c]);
        a /= C;
    }
    LANE_SUM(KREAL, b, 0, C, c, (weight[c] * d[c]) * ((x[c] - m) * rs));
    b /= C;
#pragma omp simd
    for (int c = 0; c < C; c++) {
        KREAL norm = (x[c] - m) * rs;
        di[c] += (weight[c] * d[c] - a - norm * b) * rs;
    }
}

/* dweight and dbias over channels [c0, c1), every row in order. */
static inline __attribute__((always_inline)) void norm_bwd_channels(KREAL *dweight, KREAL *dbias,
                                                                    const KREAL *dout, const KREAL *inp,
                                                                    const KREAL *mean, const KREAL *rstd, int N,
                                                                    int C, int c0, int c1)
{
    for (int n = 0; n < N && c0 < c1; n++) {
        const KREAL *x = inp + (size_t)n * C, *d = dout + (size_t)n * C;
        KREAL m = mean ? mean[n] : K(0), rs = rstd[n];
        if (n + NB_AHEAD < N) {
            PREFETCH_SPAN(x + NB_AHEAD * (size_t)C + c0, c1 - c0, 0);
            PREFETCH_SPAN(d + NB_AHEAD * (size_t)C + c0, c1 - c0, 0);
        }
#pragma omp simd
        for (int c = c0; c < c1; c++) dweight[c] += d[c] * ((x[c] - m) * rs);
        if (dbias) {
#pragma omp simd
            for (int c = c0; c < c1; c++) dbias[c] += d[c];
        }
    }
}

static void norm_backward(KREAL *dinp, KREAL *dweight, KREAL *dbias, const KREAL *dout, const KREAL *inp,
                          const KREAL *weight, const KREAL *mean, const KREAL *rstd, int N, int C)
{
    const size_t work = (size_t)N * (size_t)C;
    if (dinp)
        TEAM_ITEMS((size_t)N, 1, work, lo, hi,
                   for (int n = (int)lo; n < (int)hi; n++) norm_bwd_row(dinp, dout, inp, weight, mean, rstd, n, N, C););
    if (dweight)
        TEAM_ITEMS((size_t)C, CH_GRAIN, work, c0, c1,
                   norm_bwd_channels(dweight, dbias, dout, inp, mean, rstd, N, C, (int)c0, (int)c1););
}

void KNAME(layernorm_backward)(KREAL *dinp, KREAL *dweight, KREAL *dbias,
                               const KREAL *dout, const KREAL *inp, const KREAL *weight,
                               const KREAL *mean, const KREAL *rstd, int N, int C)
{
    norm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
}

/* Row n of the RMSNorm forward. */
static inline __attribute__((always_inline)) void rmsnorm_fwd_row(KREAL *out, KREAL *rstd, const KREAL *inp,
                                                                  const KREAL *weight, int n, int C, KREAL eps)
{
    const KREAL *x = inp + (size_t)n * C;
    KREAL *o = out + (size_t)n * C;
    KREAL s;
    LANE_SUM(KREAL, s, 0, C, c, x[c] * x[c]);
    KREAL rs = K(1) / KSQRT(s / C + eps);
#pragma omp simd
    for (int c = 0; c < C; c++) o[c] = x[c] * rs * weight[c];
    rstd[n] = rs;
}

void KNAME(rmsnorm_forward)(KREAL *out, KREAL *rstd, const KREAL *inp, const KREAL *weight, int N, int C,
                            KREAL eps)
{
    TEAM_ITEMS((size_t)N, 1, (size_t)N * C, lo, hi,
               for (int n = (int)lo; n < (int)hi; n++) rmsnorm_fwd_row(out, rstd, inp, weight, n, C, eps););
}

void KNAME(rmsnorm_backward)(KREAL *dinp, KREAL *dweight, const KREAL *dout, const KREAL *inp,
                             const KREAL *weight, const KREAL *rstd, int N, int C)
{
    norm_backward(dinp, dweight, NULL, dout, inp, weight, NULL, rstd, N, C);
}

/* ------------------------------------------------------------ matmul */

/* The product of a matmul: GEMM, or gemm_bf16 (a bf16 run's). */
typedef void gemm_fn(int transA, int transB, int M, int N, int K, KREAL alpha, const KREAL *A, int lda,
                     const KREAL *B, int ldb, KREAL beta, KREAL *C, int ldc);

#ifdef KERNELS_F64
static void matmul_forward_by(gemm_fn *gemm, KREAL *out, const KREAL *inp, const KREAL *weight, const KREAL *bias,
                              int N, int C, int OC)
{
    gemm(0, 1, N, OC, C, K(1), inp, C, weight, C, K(0), out, OC);
    if (!bias) return;
#pragma omp parallel for schedule(static) if ((long)N * OC >= PAR_MIN)
    for (int n = 0; n < N; n++) {
        KREAL *o = out + (size_t)n * OC;
#pragma omp simd
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}
#else
/* out = inp weight^T, then + bias: added by the GEMM to each tile of out as
 * its sums complete (gemm.h), the bits of a pass afterwards. */
typedef void gemm_ep_fn(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B,
                        int ldb, float *C, int ldc, const struct gemm_epilogue *ep);

static void matmul_forward_by(gemm_ep_fn *gemm, float *out, const float *inp, const float *weight,
                              const float *bias, int N, int C, int OC)
{
    gemm(0, 1, N, OC, C, inp, C, weight, C, out, OC, &(struct gemm_epilogue){bias, 0});
}
#endif

/* dweight += dout^T inp with dbias += dout's rows in the same pass over
 * dout (gemm.h's wgrad; NULL in double precision, whose BLAS has none). */
typedef void gemm_wgrad_fn(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                           float *sums);

static void matmul_backward_by(gemm_fn *gemm, gemm_wgrad_fn *wgrad, KREAL *dinp, KREAL *dweight, KREAL *dbias,
                               const KREAL *dout, const KREAL *inp, const KREAL *weight, int N, int C, int OC)
{
    if (dinp) gemm(0, 0, N, C, OC, K(1), dout, OC, weight, C, K(0), dinp, C);
#ifndef KERNELS_F64
    if (dweight && wgrad) {
        wgrad(OC, C, N, dout, OC, inp, C, dweight, C, dbias);
        return;
    }
#else
    (void)wgrad;
#endif
    if (dweight) gemm(1, 0, OC, C, N, K(1), dout, OC, inp, C, K(1), dweight, C);
    if (!dbias) return;
#pragma omp parallel if ((long)N * OC >= PAR_MIN)
    {
        int j0, j1;
        channel_share(OC, &j0, &j1);
        for (int n = 0; n < N && j0 < j1; n++) {
            const KREAL *d = dout + (size_t)n * OC;
#pragma omp simd
            for (int j = j0; j < j1; j++) dbias[j] += d[j];
        }
    }
}

void KNAME(matmul_forward)(KREAL *out, const KREAL *inp, const KREAL *weight, const KREAL *bias, int N, int C, int OC)
{
#ifdef KERNELS_F64
    matmul_forward_by(GEMM, out, inp, weight, bias, N, C, OC);
#else
    matmul_forward_by(gemm_f32_ep, out, inp, weight, bias, N, C, OC);
#endif
}

void KNAME(matmul_backward)(KREAL *dinp, KREAL *dweight, KREAL *dbias, const KREAL *dout, const KREAL *inp,
                            const KREAL *weight, int N, int C, int OC)
{
#ifdef KERNELS_F64
    matmul_backward_by(GEMM, NULL, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
#else
    matmul_backward_by(GEMM, gemm_f32_wgrad, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
#endif
}

#ifndef KERNELS_F64
void KNAME(matmul_forward_bf16)(KREAL *out, const KREAL *inp, const KREAL *weight, const KREAL *bias, int N, int C,
                                int OC)
{
    matmul_forward_by(gemm_bf16_ep, out, inp, weight, bias, N, C, OC);
}

void KNAME(matmul_backward_bf16)(KREAL *dinp, KREAL *dweight, KREAL *dbias, const KREAL *dout, const KREAL *inp,
                                 const KREAL *weight, int N, int C, int OC)
{
    matmul_backward_by(gemm_bf16, gemm_bf16_wgrad, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
#endif

/* ------------------------------------------------------------ attention */

/* Fused causal attention (flash-attention's scheme): for each block of
 * ATT_BLK queries, the blocks of keys it may see one by one, the scores of
 * a block (ATT_BLK x ATT_BLK, on the thread's stack) turned into
 * unnormalised probabilities against a running row maximum (an online
 * softmax: the partial output and row sum rescaled when the maximum
 * grows), the output accumulated with the block's values; at the end the
 * output divided by the row sum, and lse = max + log(sum) kept per row for
 * the backward, which recomputes each block's probabilities from it.
 * Nothing of size T x T exists.  A query head reads its group's kv head in
 * place (GQA without copies).  Products go through GEMM (a bf16 run's
 * through gemm_bf16: attention_forward_bf16 below).
 *
 * One call takes n query rows against n key rows (backend_ops.h): the whole
 * sequence, or one pair of context-parallel chunks (cp.c), whose results
 * merge into the rows' running softmax (ATT_MERGE: the saved out and lse
 * are where the online softmax left off). */

/* The widths of a qkv row and an output row, the query heads per kv head, the scale. */
struct att_geom { int W, C, G; KREAL scale; };
static struct att_geom att_geom(int NH, int NKV, int HS)
{
    return (struct att_geom){(NH + 2 * NKV) * HS, NH * HS, NH / NKV, K(1) / KSQRT(K(HS))};
}

/* Keys of block j0 that row i may see: all nc of them without the causal
 * mask or below the diagonal block, i - j0 + 1 in it. */
static inline int att_visible(int causal, int i, int j0, int nc) { return causal ? imin(nc, i - j0 + 1) : nc; }

/* The exponentials of a block's nr x nc scores (rows ATT_BLK apart) in
 * place: the whole block in one go when its rows are whole (exp_block's
 * passes over more values at a time), else row by row. */
static void att_exp_block(KREAL *s, int nr, int nc)
{
    if (nc == ATT_BLK) exp_inplace(s, (size_t)nr * ATT_BLK);
    else
        for (int r = 0; r < nr; r++) exp_inplace(s + (size_t)r * ATT_BLK, (size_t)nc);
}

/* ------------------------------------------------ attention's packed blocks */
/* The products multiply blocks of ATT_BLK rows of q, k, v, out and dout
 * (HS columns each) with each other, each block with every block it meets.
 * Each is packed once for them (gemm.h's packed operands, in the run's
 * arithmetic), not once per product: the blocks of k and v for the whole
 * (sequence, kv head) up front, a query block's as the loop reaches it,
 * the probabilities' and dS's as they are formed.  The products are the
 * bits gemm_f32 / gemm_bf16 would give.  In double (the tests' reference)
 * "packing" copies op(X) row-major for gemm_f64. */
#ifdef KERNELS_F64
typedef int att_arith;
static size_t att_rm_bytes(int r, int c) { return ((size_t)r * (size_t)c * sizeof(double) + 63) / 64 * 64; }
static size_t att_a_bytes(att_arith a, int m, int k) { (void)a; return att_rm_bytes(m, k); }
static size_t att_b_bytes(att_arith a, int k, int n) { (void)a; return att_rm_bytes(k, n); }
static void att_copy(int trans, int r, int c, const double *X, int ld, void *dst)
{
    double *d = dst;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) d[(size_t)i * c + j] = trans ? X[(size_t)j * ld + i] : X[(size_t)i * ld + j];
}
static void att_pack_a(att_arith a, int trans, int m, int k, const double *X, int ld, void *dst)
{
    (void)a;
    att_copy(trans, m, k, X, ld, dst);
}
static void att_pack_b(att_arith a, int trans, int k, int n, const double *X, int ld, void *dst)
{
    (void)a;
    att_copy(trans, k, n, X, ld, dst);
}
static void att_mul(att_arith a, int m, int n, int k, double alpha, const void *ap, const void *bp, double beta,
                    double *C, int ldc)
{
    (void)a;
    gemm_f64(0, 0, m, n, k, alpha, ap, k, bp, n, beta, C, ldc);
}
/* (the whole product: the same sums where the caller reads them) */
static void att_mul_causal(att_arith a, enum gemm_causal shape, int m, int n, int k, double alpha, const void *ap,
                           const void *bp, double beta, double *C, int ldc)
{
    (void)shape;
    att_mul(a, m, n, k, alpha, ap, bp, beta, C, ldc);
}
#else
typedef enum gemm_arith att_arith;
#define att_a_bytes gemm_pack_a_bytes
#define att_b_bytes gemm_pack_b_bytes
#define att_pack_a gemm_pack_a
#define att_pack_b gemm_pack_b
#define att_mul gemm_packed
#define att_mul_causal gemm_packed_causal
#endif

/* A product of blocks i0 (rows) and j0: on causal attention's diagonal
 * (gemm.h's gemm_packed_causal) cut to the terms the mask keeps. */
static void att_mul_at(att_arith a, int diag, enum gemm_causal shape, int m, int n, int k, KREAL alpha,
                       const void *ap, const void *bp, KREAL beta, KREAL *C, int ldc)
{
    att_mul_causal(a, diag ? shape : GEMM_CAUSAL_NONE, m, n, k, alpha, ap, bp, beta, C, ldc);
}

/* The forms a block of r rows (HS columns) takes: A (r, HS), B (r, HS),
 * or its transpose as B (HS, r). */
enum att_form { ATT_AS_A, ATT_AS_B, ATT_AS_BT };

static size_t att_form_bytes(att_arith a, enum att_form f, int HS)
{
    return f == ATT_AS_A ? att_a_bytes(a, ATT_BLK, HS) : f == ATT_AS_B ? att_b_bytes(a, ATT_BLK, HS)
                                                                        : att_b_bytes(a, HS, ATT_BLK);
}

/* The blocks of one of a head's operands (n rows of HS values, ld apart)
 * in one form: all of them packed up front (keep), or one block's room,
 * packed again at each use. */
struct att_op {
    const KREAL *x;
    int ld, n, HS, keep;
    enum att_form f;
    att_arith a;
    size_t bytes; /* of one block */
    char *mem;
};

static void att_pack_block(const struct att_op *o, int i0, void *dst)
{
    int r = imin(ATT_BLK, o->n - i0);
    const KREAL *x = o->x + (size_t)i0 * o->ld;
    if (o->f == ATT_AS_A) att_pack_a(o->a, 0, r, o->HS, x, o->ld, dst);
    else if (o->f == ATT_AS_B) att_pack_b(o->a, 0, r, o->HS, x, o->ld, dst);
    else att_pack_b(o->a, 1, o->HS, r, x, o->ld, dst);
}

/* Lay o out at *room (advanced past it); with keep pack every block now. */
static void att_op_init(struct att_op *o, att_arith a, enum att_form f, const KREAL *x, int ld, int n, int HS,
                        int keep, char **room)
{
    *o = (struct att_op){x, ld, n, HS, keep, f, a, att_form_bytes(a, f, HS), *room};
    int nb = keep ? (n + ATT_BLK - 1) / ATT_BLK : 1;
    *room += (size_t)nb * o->bytes;
    for (int i0 = 0; keep && i0 < n; i0 += ATT_BLK) att_pack_block(o, i0, o->mem + (size_t)(i0 / ATT_BLK) * o->bytes);
}

/* Block i0 (a multiple of ATT_BLK) packed. */
static const void *att_block(const struct att_op *o, int i0)
{
    if (o->keep) return o->mem + (size_t)(i0 / ATT_BLK) * o->bytes;
    att_pack_block(o, i0, o->mem);
    return o->mem;
}

/* The calling thread's room for packed blocks, kept for its life (as
 * gemm.c keeps its packing buffers); at least `bytes`. */
static _Thread_local char *att_buf;
static _Thread_local size_t att_buf_bytes;
static char *att_room(size_t bytes)
{
    if (bytes > att_buf_bytes) {
        free(att_buf);
        att_buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!att_buf) {
            fprintf(stderr, "attention: out of memory for packed blocks (%zu bytes)\n", bytes);
            abort();
        }
        att_buf_bytes = bytes;
    }
    return att_buf;
}

/* The thread's room for a pass (ops.h's att_room_bytes); *keep: the key
 * and value blocks kept for the whole head. */
static size_t att_pass_room(att_arith a, int bwd, int n, int HS, int *keep)
{
    return att_room_bytes(bwd, n, att_form_bytes(a, ATT_AS_BT, HS), att_form_bytes(a, ATT_AS_B, HS),
                          att_form_bytes(a, ATT_AS_A, HS), att_a_bytes(a, ATT_BLK, ATT_BLK), keep);
}

/* Attention's units ((b, query head) pairs forward, (b, kv head) pairs
 * backward), shared by the threads as a team (team.h): each thread runs
 * its own range, then takes over the back of a slower thread's; each unit
 * computes the same whichever thread runs it.  Without room for the team's
 * counters, each thread its static range of the region's threads. */
struct att_team { struct team tm; int teamed, nt, units; };

static void att_team_init(struct att_team *u, int units)
{
    int nt = team_threads();
    u->nt = nt < units ? nt : (units > 0 ? units : 1);
    u->units = units;
    /* (a team of one is the static split; and its region is inactive, so a
     * product inside would take this thread's team room) */
    u->teamed = u->nt > 1 && team_init(&u->tm, units, u->nt, 1);
}

/* Thread t's next unit, -1 when none is left (*v: 0 at first, the
 * thread's cursor). */
static int att_team_next(struct att_team *u, int t, int *v)
{
    if (u->teamed) return team_take(&u->tm, t, 0, v);
    int T = omp_get_num_threads(), i = (int)((long)u->units * t / T) + *v;
    if (i >= (int)((long)u->units * (t + 1) / T)) return -1;
    ++*v;
    return i;
}

static void attention_forward_by(att_arith a, KREAL *out, KREAL *lse, const KREAL *qkv, const KREAL *kv, int ldkv,
                                 int B, int T, int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    struct att_geom g = att_geom(NH, NKV, HS);
    const int causal = flags & ATT_CAUSAL, merge = flags & ATT_MERGE;
    int keep;
    const size_t room = att_pass_room(a, 0, n, HS, &keep);
    struct att_team u;
    att_team_init(&u, B * NH);
#pragma omp parallel num_threads(u.nt)
    for (int unit, seen = 0, th = omp_get_thread_num(); (unit = att_team_next(&u, th, &seen)) >= 0;) {
        const int b = unit / NH, h = unit % NH;
        const KREAL *q = qkv + ((size_t)b * T + q0) * g.W + (size_t)h * HS;        // (n,HS) ld W
        const KREAL *k = kv + ((size_t)b * T + k0) * ldkv + (size_t)(h / g.G) * HS; // (n,HS) ld ldkv
        const KREAL *v = k + (size_t)NKV * HS;
        KREAL *o = out + ((size_t)b * T + q0) * g.C + (size_t)h * HS;              // (n,HS) ld C
        KREAL *l = lse + ((size_t)b * NH + h) * T + q0;
        KREAL s[ATT_BLK * ATT_BLK], mx[ATT_BLK], sum[ATT_BLK], add[ATT_BLK], corr[ATT_BLK];
        char *cur = att_room(room), *pp;
        struct att_op kt, vb, qa;                 /* k^T and v as B, q as A */
        att_op_init(&kt, a, ATT_AS_BT, k, ldkv, n, HS, keep, &cur);
        att_op_init(&vb, a, ATT_AS_B, v, ldkv, n, HS, keep, &cur);
        att_op_init(&qa, a, ATT_AS_A, q, g.W, n, HS, 0, &cur);
        pp = cur;                                 /* the probabilities as A */
        for (int i0 = 0; i0 < n; i0 += ATT_BLK) {
            int nr = imin(ATT_BLK, n - i0);
            const void *qi = att_block(&qa, i0);
            for (int r = 0; r < nr; r++) {
                /* merging: the saved row is the softmax so far, its sum 1 against max = lse */
                mx[r] = merge ? l[i0 + r] : -K(INFINITY);
                sum[r] = merge ? K(1) : K(0);
            }
            for (int j0 = 0; j0 < (causal ? i0 + 1 : n); j0 += ATT_BLK) {
                int nc = imin(ATT_BLK, n - j0);
                /* Without a merge every row sees block 0 first: its sums
                 * are stored (beta 0), not added to zeros rescaled by
                 * corr = 0 (the same bits, but that a sum underflowed
                 * to -0 stays -0). */
                const int first = j0 == 0 && !merge, diag = causal && j0 == i0;
                att_mul_at(a, diag, GEMM_CAUSAL_COLS, nr, nc, HS, g.scale, qi, att_block(&kt, j0), K(0), s,
                           ATT_BLK);
                /* Each row over the keys it may see (the others: 0; the
                 * lanes' results are those over the whole block with
                 * -inf to the maximum and 0 to the sum): its maximum,
                 * the scores less it (-inf past them, whose exponential
                 * is +0), the block's exponentials in one go (exp_block's
                 * passes), each row's sum. */
                for (int r = 0; r < nr; r++) {
                    KREAL *sr = s + (size_t)r * ATT_BLK, m = mx[r];
                    int nv = att_visible(causal, i0 + r, j0, nc);
                    LANE_MAX(KREAL, m, 0, nv, j, sr[j]);
#pragma omp simd
                    for (int j = 0; j < nv; j++) sr[j] = sr[j] - m;
#pragma omp simd
                    for (int j = nv; j < nc; j++) sr[j] = -K(INFINITY);
                    corr[r] = mx[r] - m;
                    mx[r] = m;
                }
                att_exp_block(s, nr, nc);
                for (int r = 0; r < nr; r++) {
                    const KREAL *sr = s + (size_t)r * ATT_BLK;
                    LANE_SUM(KREAL, add[r], 0, att_visible(causal, i0 + r, j0, nc), j, sr[j]);
                }
#pragma omp simd
                for (int r = 0; r < nr; r++) {
                    corr[r] = KEXP(corr[r]); /* (0 for the first block: mx was -inf) */
                    sum[r] = sum[r] * corr[r] + add[r];
                }
                for (int r = 0; r < nr && !first; r++) {
                    KREAL *orow = o + (size_t)(i0 + r) * g.C, cr = corr[r];
                    if (cr == K(1)) continue; /* (the maximum did not move) */
#pragma omp simd
                    for (int c = 0; c < HS; c++) orow[c] *= cr;
                }
                att_pack_a(a, 0, nr, nc, s, ATT_BLK, pp);
                att_mul(a, nr, HS, nc, K(1), pp, att_block(&vb, j0), first ? K(0) : K(1), o + (size_t)i0 * g.C,
                        g.C);
            }
            for (int r = 0; r < nr; r++) {
                KREAL inv = K(1) / sum[r], *orow = o + (size_t)(i0 + r) * g.C;
#pragma omp simd
                for (int c = 0; c < HS; c++) orow[c] *= inv;
                l[i0 + r] = mx[r] + KLOG(sum[r]);
            }
        }
    }
}

/* Attention over a cache (backend_ops.h): the rows' keys and values
 * stored, then one (row, head) per iteration, its keys in blocks of ATT_BLK
 * under an online softmax as above, each score a lane sum over HS. */
void KNAME(attention_cached)(KREAL *out, const KREAL *qkv, int ldq, KREAL *kc, KREAL *vc, const int32_t *seq,
                             const int32_t *pos, int R, int Tc, int NH, int NKV, int HS)
{
    size_t KV = (size_t)NKV * HS;
    for (int r = 0; r < R; r++) {
        const KREAL *k = qkv + (size_t)r * ldq + (size_t)NH * HS;
        size_t at = ((size_t)seq[r] * Tc + (size_t)pos[r]) * KV;
        for (size_t c = 0; c < KV; c++) kc[at + c] = k[c], vc[at + c] = k[KV + c];
    }
    const int G = NH / NKV;
    const KREAL scale = K(1) / KSQRT(K(HS));
#pragma omp parallel for collapse(2) schedule(static) if ((long)R * NH > 1)
    for (int r = 0; r < R; r++)
        for (int h = 0; h < NH; h++) {
            const KREAL *q = qkv + (size_t)r * ldq + (size_t)h * HS;
            size_t base = (size_t)seq[r] * Tc * KV + (size_t)(h / G) * HS;
            const KREAL *k = kc + base, *v = vc + base; // (pos[r]+1, HS) ld KV
            KREAL *o = out + (size_t)r * NH * HS + (size_t)h * HS, s[ATT_BLK], mx = -K(INFINITY), sum = 0;
            int n = pos[r] + 1;
            for (int c = 0; c < HS; c++) o[c] = 0;
            for (int j0 = 0; j0 < n; j0 += ATT_BLK) {
                int nc = imin(ATT_BLK, n - j0);
                KREAL m = mx, add;
                for (int j = 0; j < nc; j++) {
                    const KREAL *kj = k + (size_t)(j0 + j) * KV;
                    LANE_SUM(KREAL, s[j], 0, HS, c, q[c] * kj[c]);
                    s[j] *= scale;
                    m = s[j] > m ? s[j] : m;
                }
#pragma omp simd
                for (int j = 0; j < nc; j++) s[j] = KEXP(s[j] - m);
                LANE_SUM(KREAL, add, 0, nc, j, s[j]);
                KREAL corr = KEXP(mx - m); /* (0 for the first block: mx was -inf) */
                sum = sum * corr + add;
                mx = m;
                for (int j = 0; j < nc; j++) {
                    const KREAL *vj = v + (size_t)(j0 + j) * KV;
                    KREAL f = j ? K(1) : corr, p = s[j];
#pragma omp simd
                    for (int c = 0; c < HS; c++) o[c] = o[c] * f + p * vj[c];
                }
            }
            KREAL inv = K(1) / sum;
#pragma omp simd
            for (int c = 0; c < HS; c++) o[c] *= inv;
        }
}

/* D_i = dout_i . out_i (the softmax's backward term) of rows [i0, i0 + nr)
 * into D[0 .. nr): rows of ld floats, HS of them a head's. */
static void att_delta(KREAL *D, const KREAL *dout, const KREAL *out, int i0, int nr, int ld, int HS)
{
    for (int rr = 0; rr < nr; rr++) {
        const KREAL *dr = dout + (size_t)(i0 + rr) * ld, *orow = out + (size_t)(i0 + rr) * ld;
        LANE_SUM(KREAL, D[rr], 0, HS, c, dr[c] * orow[c]);
    }
}

/* Each gradient block gathers its terms in the order of the other index
 * (dq_i over the key blocks j ascending, dk_j and dv_j over the query
 * blocks i ascending, a kv head's query heads one after the other), which
 * the loop order below (query blocks outermost) keeps. */
static void attention_backward_by(att_arith a, KREAL *dqkv, KREAL *dkv, const KREAL *dout, const KREAL *out,
                                  const KREAL *qkv, const KREAL *kv, int ldkv, const KREAL *lse, int B, int T, int q0,
                                  int k0, int n, int NH, int NKV, int HS, int flags)
{
    struct att_geom g = att_geom(NH, NKV, HS);
    const int causal = flags & ATT_CAUSAL, accum = flags & ATT_ACCUM;
    const size_t bp = att_a_bytes(a, ATT_BLK, ATT_BLK);
    int keep;
    const size_t room = att_pass_room(a, 1, n, HS, &keep);
    /* One (b, kv head) per iteration: its query heads in order, each adding
     * its share to the kv head's gradients. */
    struct att_team u;
    att_team_init(&u, B * NKV);
#pragma omp parallel num_threads(u.nt)
    for (int unit, seen = 0, th = omp_get_thread_num(); (unit = att_team_next(&u, th, &seen)) >= 0;) {
        const int b = unit / NKV, kh = unit % NKV;
        size_t koff = ((size_t)b * T + k0) * ldkv + (size_t)kh * HS, voff = koff + (size_t)NKV * HS;
        const KREAL *k = kv + koff, *v = kv + voff;
        KREAL *dk = dkv + koff, *dv = dkv + voff; // ld ldkv
        KREAL p[ATT_BLK * ATT_BLK], ds[ATT_BLK * ATT_BLK], D[ATT_BLK];
        char *cur = att_room(room);
        struct att_op kt, kb, vt;                 /* k^T, k and v^T as B: the kv head's */
        att_op_init(&kt, a, ATT_AS_BT, k, ldkv, n, HS, keep, &cur);
        att_op_init(&kb, a, ATT_AS_B, k, ldkv, n, HS, keep, &cur);
        att_op_init(&vt, a, ATT_AS_BT, v, ldkv, n, HS, keep, &cur);
        char *head = cur;
        for (int r = 0; r < g.G; r++) {
            int h = kh * g.G + r;
            size_t qoff = ((size_t)b * T + q0) * g.W + (size_t)h * HS;
            const KREAL *q = qkv + qoff, *l = lse + ((size_t)b * NH + h) * T + q0;
            const KREAL *dout_h = dout + ((size_t)b * T + q0) * g.C + (size_t)h * HS; // ld C
            const KREAL *out_h = out + ((size_t)b * T + q0) * g.C + (size_t)h * HS;
            KREAL *dq = dqkv + qoff;
            struct att_op qa, qb, da, db;         /* q and dout as A and as B, a block at a time */
            cur = head;
            att_op_init(&qa, a, ATT_AS_A, q, g.W, n, HS, 0, &cur);
            att_op_init(&qb, a, ATT_AS_B, q, g.W, n, HS, 0, &cur);
            att_op_init(&da, a, ATT_AS_A, dout_h, g.C, n, HS, 0, &cur);
            att_op_init(&db, a, ATT_AS_B, dout_h, g.C, n, HS, 0, &cur);
            char *pt = cur, *dsa = pt + bp, *dst = dsa + bp; /* p^T, dS and dS^T as A */
            for (int i0 = 0; i0 < n; i0 += ATT_BLK) {
                int nr = imin(ATT_BLK, n - i0);
                const void *qi = att_block(&qa, i0), *qi_b = att_block(&qb, i0);
                const void *di = att_block(&da, i0), *di_b = att_block(&db, i0);
                att_delta(D, dout_h, out_h, i0, nr, g.C, HS);
                /* the key blocks block i0 sees: at or below the diagonal when causal */
                for (int j0 = 0; j0 < (causal ? i0 + 1 : n); j0 += ATT_BLK) {
                    int nc = imin(ATT_BLK, n - j0);
                    /* Without ATT_ACCUM a gradient block's first term is
                     * stored (beta 0), not added to zeros (as above):
                     * dq_i's at j0 = 0, dk_j's and dv_j's at the kv
                     * head's first query head and the first query block
                     * that sees key block j. */
                    const KREAL bq = !accum && j0 == 0 ? K(0) : K(1);
                    const KREAL bkv = !accum && r == 0 && i0 == (causal ? j0 : 0) ? K(0) : K(1);
                    const int diag = causal && j0 == i0;
                    att_mul_at(a, diag, GEMM_CAUSAL_COLS, nr, nc, HS, g.scale, qi, att_block(&kt, j0), K(0), p,
                               ATT_BLK);
                    for (int rr = 0; rr < nr; rr++) { /* (-inf past the visible keys: +0) */
                        KREAL *pr = p + (size_t)rr * ATT_BLK, li = l[i0 + rr];
                        int nv = att_visible(causal, i0 + rr, j0, nc);
#pragma omp simd
                        for (int j = 0; j < nv; j++) pr[j] = pr[j] - li;
#pragma omp simd
                        for (int j = nv; j < nc; j++) pr[j] = -K(INFINITY);
                    }
                    att_exp_block(p, nr, nc); /* (exp_block's passes) */
                    /* dv_j += p^T dout_i; dp = dout_i v_j^T; ds = p (dp - D) scale, +0 at the masked
                     * keys (the diagonal's dp is not formed there) */
                    att_pack_a(a, 1, nc, nr, p, ATT_BLK, pt);
                    att_mul_at(a, diag, GEMM_CAUSAL_K_FROM, nc, HS, nr, K(1), pt, di_b, bkv, dv + (size_t)j0 * ldkv,
                               ldkv);
                    att_mul_at(a, diag, GEMM_CAUSAL_COLS, nr, nc, HS, K(1), di, att_block(&vt, j0), K(0), ds,
                               ATT_BLK);
                    for (int rr = 0; rr < nr; rr++) {
                        KREAL *pr = p + (size_t)rr * ATT_BLK, *dr = ds + (size_t)rr * ATT_BLK, Di = D[rr];
                        int nv = att_visible(causal, i0 + rr, j0, nc);
#pragma omp simd
                        for (int j = 0; j < nv; j++) dr[j] = pr[j] * (dr[j] - Di) * g.scale;
#pragma omp simd
                        for (int j = nv; j < nc; j++) dr[j] = K(0);
                    }
                    /* dq_i += ds k_j; dk_j += ds^T q_i */
                    att_pack_a(a, 0, nr, nc, ds, ATT_BLK, dsa);
                    att_mul(a, nr, HS, nc, K(1), dsa, att_block(&kb, j0), bq, dq + (size_t)i0 * g.W, g.W);
                    att_pack_a(a, 1, nc, nr, ds, ATT_BLK, dst);
                    att_mul_at(a, diag, GEMM_CAUSAL_K_FROM, nc, HS, nr, K(1), dst, qi_b, bkv,
                               dk + (size_t)j0 * ldkv, ldkv);
                }
            }
        }
    }
}

void KNAME(attention_forward)(KREAL *out, KREAL *lse, const KREAL *qkv, const KREAL *kv, int ldkv, int B, int T,
                              int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    attention_forward_by(ATT_ARITH, out, lse, qkv, kv, ldkv, B, T, q0, k0, n, NH, NKV, HS, flags);
}

void KNAME(attention_backward)(KREAL *dqkv, KREAL *dkv, const KREAL *dout, const KREAL *out, const KREAL *qkv,
                               const KREAL *kv, int ldkv, const KREAL *lse, int B, int T, int q0, int k0, int n,
                               int NH, int NKV, int HS, int flags)
{
    attention_backward_by(ATT_ARITH, dqkv, dkv, dout, out, qkv, kv, ldkv, lse, B, T, q0, k0, n, NH, NKV, HS, flags);
}

#ifndef KERNELS_F64
/* A bf16 run's: the products in gemm_bf16's arithmetic, which rounds the
 * probabilities and dS to bf16 as it packs them (q, k, v, out and dout
 * hold bf16 values already); the softmax's statistics stay fp32. */
void KNAME(attention_forward_bf16)(KREAL *out, KREAL *lse, const KREAL *qkv, const KREAL *kv, int ldkv, int B, int T,
                                   int q0, int k0, int n, int NH, int NKV, int HS, int flags)
{
    attention_forward_by(GEMM_BF16, out, lse, qkv, kv, ldkv, B, T, q0, k0, n, NH, NKV, HS, flags);
}

void KNAME(attention_backward_bf16)(KREAL *dqkv, KREAL *dkv, const KREAL *dout, const KREAL *out, const KREAL *qkv,
                                    const KREAL *kv, int ldkv, const KREAL *lse, int B, int T, int q0, int k0, int n,
                                    int NH, int NKV, int HS, int flags)
{
    attention_backward_by(GEMM_BF16, dqkv, dkv, dout, out, qkv, kv, ldkv, lse, B, T, q0, k0, n, NH, NKV, HS, flags);
}
#endif

void KNAME(copy_cols)(KREAL *dst, int ldd, const KREAL *src, int lds, size_t rows, int cols, int add)
{
#pragma omp parallel for schedule(static) if ((long)rows * cols >= PAR_MIN)
    for (long r = 0; r < (long)rows; r++) {
        KREAL *d = dst + (size_t)r * ldd;
        const KREAL *s = src + (size_t)r * lds;
        if (add) {
#pragma omp simd
            for (int i = 0; i < cols; i++) d[i] += s[i];
        } else {
            for (int i = 0; i < cols; i++) d[i] = s[i];
        }
    }
}

/* ------------------------------------------------------ a mixture's rows */

void KNAME(rows_gather)(KREAL *dst, const KREAL *src, const int32_t *idx, const KREAL *w, int R, int C)
{
#pragma omp parallel for schedule(static) if ((long)R * C >= PAR_MIN)
    for (long r = 0; r < R; r++) {
        const KREAL *s = src + (size_t)(idx ? idx[r] : r) * C;
        KREAL *d = dst + (size_t)r * C, f = w ? w[r] : 1;
        for (int c = 0; c < C; c++) d[c] = f * s[c];
    }
}

void KNAME(rows_combine)(KREAL *out, const KREAL *src, const int32_t *idx, const KREAL *w, int N, int K, int C,
                         int add)
{
#pragma omp parallel for schedule(static) if ((long)N * K * C >= PAR_MIN)
    for (long t = 0; t < N; t++) {
        KREAL *o = out + (size_t)t * C;
        if (!add)
            for (int c = 0; c < C; c++) o[c] = 0;
        for (int k = 0; k < K; k++) {
            int32_t r = idx[t * K + k];
            if (r < 0) continue;
            const KREAL *s = src + (size_t)r * C, f = w ? w[t * K + k] : 1;
            for (int c = 0; c < C; c++) o[c] += f * s[c];
        }
    }
}

void KNAME(rows_dot)(KREAL *out, const KREAL *a, const KREAL *b, int R, int C)
{
#pragma omp parallel for schedule(static) if ((long)R * C >= PAR_MIN)
    for (long r = 0; r < R; r++) {
        const KREAL *x = a + (size_t)r * C, *y = b + (size_t)r * C;
        KREAL sum = 0;
        for (int c = 0; c < C; c++) sum += x[c] * y[c];
        out[r] = sum;
    }
}

/* ------------------------------------------------------------ rotary positions */

/* Turn the pairs (x[i], x[i + HS/2]) of every q and k head of each row by
 * the angle of its position; sign -1 turns back (the backward). */
static void rope_turn(KREAL *qkv, const KREAL *cos, const KREAL *sin, int B, int T, int NH, int NKV, int HS,
                      KREAL sign)
{
    int W = (NH + 2 * NKV) * HS, half = HS / 2, heads = NH + NKV;
#pragma omp parallel for schedule(static) if ((long)B * T * W >= PAR_MIN)
    for (long r = 0; r < (long)B * T; r++) {
        const KREAL *cr = cos + (size_t)(r % T) * half, *sr = sin + (size_t)(r % T) * half;
        KREAL *row = qkv + (size_t)r * W;
        for (int h = 0; h < heads; h++) {
            KREAL *x = row + (size_t)h * HS;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                KREAL x1 = x[i], x2 = x[i + half], s = sign * sr[i];
                x[i] = x1 * cr[i] - x2 * s;
                x[i + half] = x2 * cr[i] + x1 * s;
            }
        }
    }
}

void KNAME(rope_forward)(KREAL *qkv, const KREAL *cos, const KREAL *sin, int B, int T, int NH, int NKV, int HS)
{
    rope_turn(qkv, cos, sin, B, T, NH, NKV, HS, K(1));
}

void KNAME(rope_backward)(KREAL *dqkv, const KREAL *cos, const KREAL *sin, int B, int T, int NH, int NKV, int HS)
{
    rope_turn(dqkv, cos, sin, B, T, NH, NKV, HS, K(-1));
}

/* ------------------------------------------------------------ gelu */

#define GELU_S K(0.7978845608028654) /* sqrt(2/pi) */
#define GELU_A K(0.044715)

/* float: 0.5x(1 + tanh u) = x sigmoid(2u) = x / (1 + exp(-2u)), with no
 * cancellation for negative x; double keeps the textbook tanh form, so the
 * float-vs-double test checks the rewrite. */
#ifndef KERNELS_F64
/* GELU of x[b .. b + EXP_BLK) (cut at N): x sigmoid(2u), its exponentials by exp_block. */
static inline __attribute__((always_inline)) void gelu_fwd_block(float *out, const float *inp, size_t b, size_t N)
{
    int n = N - b < EXP_BLK ? (int)(N - b) : EXP_BLK;
    const float *x = inp + b;
    float *o = out + b, e[EXP_BLK];
#pragma omp simd
    for (int i = 0; i < n; i++) e[i] = -2.0f * (GELU_S * (x[i] + GELU_A * x[i] * x[i] * x[i]));
    exp_block(e, e, n);
#pragma omp simd
    for (int i = 0; i < n; i++) o[i] = x[i] / (1.0f + e[i]);
}

/* Its gradient on the same block: sig = sigmoid(2u), 1 - sig = e sig,
 * sech^2 u = 4 sig (1 - sig); the exponent is capped so that e sig stays
 * finite. */
static inline __attribute__((always_inline)) void gelu_bwd_block(float *dinp, const float *inp, const float *dout,
                                                                 size_t b, size_t N)
{
    int n = N - b < EXP_BLK ? (int)(N - b) : EXP_BLK;
    const float *x = inp + b, *d = dout + b;
    float *di = dinp + b, e[EXP_BLK];
#pragma omp simd
    for (int i = 0; i < n; i++) {
        float mu = -2.0f * (GELU_S * (x[i] + GELU_A * x[i] * x[i] * x[i]));
        e[i] = mu < 80.0f ? mu : 80.0f;
    }
    exp_block(e, e, n);
#pragma omp simd
    for (int i = 0; i < n; i++) {
        float du = GELU_S * (1.0f + 3.0f * GELU_A * x[i] * x[i]);
        float sig = 1.0f / (1.0f + e[i]);
        float g = sig + 2.0f * x[i] * sig * (e[i] * sig) * du;
        di[i] = g * d[i];
    }
}
#endif

void KNAME(gelu_forward)(KREAL *out, const KREAL *inp, size_t N)
{
#ifdef KERNELS_F64
#pragma omp parallel for simd schedule(static) if (parallel : N >= PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        KREAL x = inp[i];
        KREAL u = GELU_S * (x + GELU_A * x * x * x);
        out[i] = 0.5 * x * (1.0 + tanh(u));
    }
#else
    /* x sigmoid(2u), the exponentials a block at a time (exp_block) */
    TEAM_ITEMS(N, EXP_BLK, N, lo, hi, for (size_t b = lo; b < hi; b += EXP_BLK) gelu_fwd_block(out, inp, b, N););
#endif
}

void KNAME(gelu_backward)(KREAL *dinp, const KREAL *inp, const KREAL *dout, size_t N)
{
#ifdef KERNELS_F64
#pragma omp parallel for simd schedule(static) if (parallel : N >= PAR_MIN)
    for (size_t i = 0; i < N; i++) {
        KREAL x = inp[i];
        KREAL u = GELU_S * (x + GELU_A * x * x * x);
        KREAL du = GELU_S * (K(1) + K(3) * GELU_A * x * x);
        double th = tanh(u);
        double g = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
        dinp[i] = g * dout[i];
    }
#else
    TEAM_ITEMS(N, EXP_BLK, N, lo, hi,
               for (size_t b = lo; b < hi; b += EXP_BLK) gelu_bwd_block(dinp, inp, dout, b, N););
#endif
}

/* ------------------------------------------------------------ swiglu */

/* The rows swiglu's loops ask for ahead: a row of inp is its g and u (2F
 * floats), two streams a row apart that the hardware prefetchers pick up
 * late, so a swiglu whose operands come from memory (as in a step) ran at
 * half its speed in cache (2048 x 768 from memory, forward 0.91 -> 0.45 ms,
 * backward 1.1 -> 0.8 ms with the rows ROWS_AHEAD on asked for, a block at
 * a time; docs/performance.md). */
enum { ROWS_AHEAD = 2 };

/* Row n of N of swiglu: out = silu(g) u over the row's F columns, the
 * exponentials a block at a time (exp_block). */
static inline __attribute__((always_inline)) void swiglu_fwd_row(KREAL *out, const KREAL *inp, size_t n, size_t N,
                                                                 int F)
{
    const KREAL *g = inp + n * 2 * (size_t)F, *u = g + F;
    KREAL *o = out + n * (size_t)F;
    const size_t ahead = n + ROWS_AHEAD < N ? ROWS_AHEAD * 2 * (size_t)F : 0;
    for (int b = 0; b < F; b += EXP_BLK) {
        int nb = imin(EXP_BLK, F - b);
        KREAL e[EXP_BLK];
        if (ahead) {
            PREFETCH_SPAN(g + ahead + b, nb, 0);
            PREFETCH_SPAN(u + ahead + b, nb, 0);
        }
#pragma omp simd
        for (int i = 0; i < nb; i++) e[i] = -g[b + i];
        exp_block(e, e, nb);
#pragma omp simd
        for (int i = 0; i < nb; i++) o[b + i] = g[b + i] / (K(1) + e[i]) * u[b + i];
    }
}

/* Its gradient on row n: dg and du (the rows ahead of dg and du asked for
 * to be written too). */
static inline __attribute__((always_inline)) void swiglu_bwd_row(KREAL *dinp, const KREAL *inp, const KREAL *dout,
                                                                 size_t n, size_t N, int F)
{
    const KREAL *g = inp + n * 2 * (size_t)F, *u = g + F, *d = dout + n * (size_t)F;
    KREAL *dg = dinp + n * 2 * (size_t)F, *du = dg + F;
    const size_t ahead = n + ROWS_AHEAD < N ? ROWS_AHEAD * (size_t)F : 0; /* (floats of dout; inp's rows: 2F) */
    for (int b = 0; b < F; b += EXP_BLK) {
        int nb = imin(EXP_BLK, F - b);
        KREAL e[EXP_BLK];
        if (ahead) {
            PREFETCH_SPAN(g + 2 * ahead + b, nb, 0);
            PREFETCH_SPAN(u + 2 * ahead + b, nb, 0);
            PREFETCH_SPAN(d + ahead + b, nb, 0);
            PREFETCH_SPAN(dg + 2 * ahead + b, nb, 1);
            PREFETCH_SPAN(du + 2 * ahead + b, nb, 1);
        }
#pragma omp simd
        for (int i = 0; i < nb; i++) e[i] = -g[b + i];
        exp_block(e, e, nb);
#pragma omp simd
        for (int i = 0; i < nb; i++) {
            int c = b + i;
            KREAL sg = K(1) / (K(1) + e[i]), silu = g[c] * sg;
            dg[c] = d[c] * u[c] * (sg * (K(1) + g[c] * (K(1) - sg)));
            du[c] = d[c] * silu;
        }
    }
}

void KNAME(swiglu_forward)(KREAL *out, const KREAL *inp, size_t N, int F)
{
    TEAM_ITEMS(N, 1, N * (size_t)F, lo, hi, for (size_t n = lo; n < hi; n++) swiglu_fwd_row(out, inp, n, N, F););
}

void KNAME(swiglu_backward)(KREAL *dinp, const KREAL *inp, const KREAL *dout, size_t N, int F)
{
    TEAM_ITEMS(N, 1, N * (size_t)F, lo, hi,
               for (size_t n = lo; n < hi; n++) swiglu_bwd_row(dinp, inp, dout, n, N, F););
}

/* ------------------------------------------------------------ residual */

void KNAME(residual_forward)(KREAL *out, const KREAL *a, const KREAL *b, size_t N)
{
    TEAM_ITEMS(N, 16, N, lo, hi, _Pragma("omp simd") for (size_t i = lo; i < hi; i++) out[i] = a[i] + b[i];);
}

/* ------------------------------------------------------------ cross-entropy */

/* Number of real (< V) columns among this shard's [v0, v0+Vs). */
static inline int ce_real_cols(int Vs, int v0, int V)
{
    long r = (long)V - v0;
    return r < 0 ? 0 : (r > Vs ? Vs : (int)r);
}

/* Row n's largest logit among its nv real columns. */
static inline KREAL ce_max_row(const KREAL *logits, int n, int Vs, int nv)
{
    const KREAL *l = logits + (size_t)n * Vs;
    KREAL mx = -K(INFINITY);
#pragma omp simd reduction(max : mx)
    for (int j = 0; j < nv; j++) mx = l[j] > mx ? l[j] : mx;
    return mx;
}

void KNAME(crossentropy_max)(KREAL *maxes, const KREAL *logits, int N, int Vs, int v0, int V)
{
    int nv = ce_real_cols(Vs, v0, V);
    TEAM_ITEMS((size_t)N, 1, (size_t)N * (size_t)nv, lo, hi,
               for (int n = (int)lo; n < (int)hi; n++) maxes[n] = ce_max_row(logits, n, Vs, nv););
}

/* Row n's exponentials (in place) and their sum, and its target's logit. */
static inline void ce_sumexp_row(KREAL *sums, KREAL *tlogit, KREAL *logits, const KREAL *maxes,
                                 const int32_t *targets, int n, int Vs, int v0, int nv)
{
    KREAL *l = logits + (size_t)n * Vs;
    KREAL mx = maxes[n];
    long t = (long)targets[n] - v0;
    tlogit[n] = (t >= 0 && t < nv) ? l[t] : K(0);
    /* LANE_SUM over the row, a block of exp_block's at a time (each a
     * whole number of lanes, LANE_ADD): the same sums in the same order */
    KREAL acc[LANES] = {0};
    for (int b = 0; b < nv; b += EXP_BLK) {
        int nb = imin(EXP_BLK, nv - b);
        KREAL *x = l + b;
#pragma omp simd
        for (int j = 0; j < nb; j++) x[j] = x[j] - mx;
        exp_block(x, x, nb);
        LANE_ADD(acc, 0, nb, j, x[j]);
    }
    sums[n] = LANE_TREE_SUM(KREAL, acc);
}

void KNAME(crossentropy_sumexp)(KREAL *sums, KREAL *tlogit, KREAL *logits,
                                const KREAL *maxes, const int32_t *targets,
                                int N, int Vs, int v0, int V)
{
    int nv = ce_real_cols(Vs, v0, V);
    TEAM_ITEMS((size_t)N, 1, (size_t)N * (size_t)nv, lo, hi,
               for (int n = (int)lo; n < (int)hi; n++)
                   ce_sumexp_row(sums, tlogit, logits, maxes, targets, n, Vs, v0, nv););
}

void KNAME(crossentropy_loss)(KREAL *losses, const KREAL *maxes, const KREAL *sums,
                              const KREAL *tlogit, int N)
{
#pragma omp parallel for schedule(static) if (N >= PAR_MIN)
    for (int n = 0; n < N; n++) losses[n] = KLOG(sums[n]) + maxes[n] - tlogit[n];
}

/* Row n of the logits' gradient: softmax less the target's one, times
 * dloss; the nv real columns of Vs.  d may alias e: every element is read
 * before it is written. */
static inline __attribute__((always_inline)) void ce_bwd_row(KREAL *dlogits, const KREAL *exps, const KREAL *sums,
                                                             const int32_t *targets, KREAL dloss, int n, int Vs,
                                                             int v0, int nv)
{
    const KREAL *e = exps + (size_t)n * Vs;
    KREAL *d = dlogits + (size_t)n * Vs;
    KREAL inv = K(1) / sums[n];
    long t = (long)targets[n] - v0;
    KREAL pt = (t >= 0 && t < nv) ? e[t] * inv : K(0);
#pragma omp simd
    for (int j = 0; j < nv; j++) d[j] = e[j] * inv * dloss;
    for (int j = nv; j < Vs; j++) d[j] = 0;
    if (t >= 0 && t < nv) d[t] = (pt - K(1)) * dloss;
}

/* dlogits may alias exps. */
void KNAME(crossentropy_backward)(KREAL *dlogits, const KREAL *exps, const KREAL *sums,
                                  const int32_t *targets, KREAL dloss,
                                  int N, int Vs, int v0, int V)
{
    int nv = ce_real_cols(Vs, v0, V);
    TEAM_ITEMS((size_t)N, 1, (size_t)N * (size_t)Vs, lo, hi,
               for (int n = (int)lo; n < (int)hi; n++) ce_bwd_row(dlogits, exps, sums, targets, dloss, n, Vs, v0, nv););
}

/* ------------------------------------------------------------ AdamW */

/* As torch.optim.AdamW (foreach=False) on g = grad * gscale (the clipped
 * gradient, scaled in the same pass): p *= 1 - lr wd; m = lerp(m, g, 1-b1);
 * v = b2 v + (1-b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps). */
void KNAME(adamw_update)(KREAL *param, KREAL *grad, KREAL gscale, KREAL *m, KREAL *v, size_t n,
                         KREAL lr, KREAL beta1, KREAL beta2, KREAL eps, KREAL wd, int t, int clear)
{
    double bc1 = 1.0 - pow((double)beta1, t), bc2 = 1.0 - pow((double)beta2, t);
    KREAL step = (KREAL)((double)lr / bc1);
    KREAL bc2s = (KREAL)sqrt(bc2);
    KREAL decay = (KREAL)(1.0 - (double)lr * (double)wd);
    KREAL w1 = K(1) - beta1, w2 = K(1) - beta2;
#define ADAMW_ELEMENT(i)                                                                \
    do {                                                                               \
        KREAL g = grad[i] * gscale;                                                    \
        KREAL mi = m[i] + w1 * (g - m[i]);                                             \
        KREAL vi = v[i] * beta2 + w2 * (g * g);                                        \
        KREAL denom = KSQRT(vi) / bc2s + eps;                                          \
        param[i] = param[i] * decay - step * (mi / denom);                             \
        m[i] = mi;                                                                     \
        v[i] = vi;                                                                     \
        if (clear) grad[i] = K(0); /* (its line is in cache: cheaper than a pass of its own) */ \
    } while (0)
    /* (no construct at all inside another region: device_cpu.c's rounded
     * update calls this a block at a time from its own) */
    TEAM_ITEMS(n, 16, n, lo, hi, _Pragma("omp simd") for (size_t i = lo; i < hi; i++) ADAMW_ELEMENT(i););
#undef ADAMW_ELEMENT
}

/* ------------------------------------------------------------ norms */

/* Fixed chunking (not per thread), so the sum is the same on any number of
 * threads. */
#define SUMSQ_CHUNKS 256

double KNAME(sumsq)(const KREAL *x, size_t n)
{
    double part[SUMSQ_CHUNKS];
    size_t len = (n + SUMSQ_CHUNKS - 1) / SUMSQ_CHUNKS;
    TEAM_ITEMS(SUMSQ_CHUNKS, 1, n / 4, c0, c1, for (size_t c = c0; c < c1; c++) {
        size_t lo = c * len, hi = lo + len < n ? lo + len : n;
        double s;
        LANE_SUM(double, s, (long)lo, (long)(lo < hi ? hi : lo), i, (double)x[i] * (double)x[i]);
        part[c] = s;
    });
    double total = 0;
    for (int c = 0; c < SUMSQ_CHUNKS; c++) total += part[c];
    return total;
}

void KNAME(scale_inplace)(KREAL *x, size_t n, KREAL s)
{
#pragma omp parallel for simd schedule(static) if (parallel : n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}
