/* test_gemm.c -- gemm_f32 / gemm_f64 against a naive double-accumulating
 * reference: every transpose combination, alpha/beta cases (beta = 0 over NaN
 * garbage, beta = 1 accumulation), sizes on both sides of every block edge of
 * the packed kernel (MR 14, NR 32, MC 224, KC 256, NC 1024 in gemm.c),
 * sub-matrices (lda/ldb/ldc wider than the operand), calls from inside an
 * OpenMP parallel region, and bitwise determinism.  Then every SIMD path this
 * processor runs against the arithmetic gemm_kernels.h defines, bitwise, in
 * fp32 (gemm_f32) and in bf16 (gemm_bf16: odd K, blocks padded to even,
 * operands rounded at packing, and tiny sums that the arithmetic flushes),
 * and gemm_bf16 against the double-accumulated product of the rounded
 * operands; a weight's gradient with its bias's (the wgrad products'
 * column sums) against the product and the plain loop; the products of
 * operands packed once (gemm_packed) against both. */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm.h"
#include "gemm_kernels.h"
#include "precision.h"
#include "tap.h"
#include "slow_thread.h"

/* Deterministic fill in [-1, 1). */
static float frand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

struct mats {
    int tA, tB, M, N, K, lda, ldb, ldc;
    float *A, *B, *C, *C0;       /* C0: C before the call */
};

/* Operands with leading dimensions `pad` wider than needed; C filled with
 * NaN when beta == 0 (it must never be read), random otherwise. */
static struct mats mats_new(int tA, int tB, int M, int N, int K, int pad, float beta, uint64_t seed)
{
    struct mats m = {tA, tB, M, N, K, 0, 0, 0, NULL, NULL, NULL, NULL};
    int rowsA = tA ? K : M, colsA = tA ? M : K;
    int rowsB = tB ? N : K, colsB = tB ? K : N;
    m.lda = colsA + pad;
    m.ldb = colsB + pad;
    m.ldc = N + pad;
    size_t na = (size_t)(rowsA > 0 ? rowsA : 1) * m.lda, nb = (size_t)(rowsB > 0 ? rowsB : 1) * m.ldb;
    size_t nc = (size_t)(M > 0 ? M : 1) * m.ldc;
    m.A = malloc(na * sizeof(float));
    m.B = malloc(nb * sizeof(float));
    m.C = malloc(nc * sizeof(float));
    m.C0 = malloc(nc * sizeof(float));
    if (!m.A || !m.B || !m.C || !m.C0) { fprintf(stderr, "test_gemm: out of memory\n"); exit(1); }
    for (size_t i = 0; i < na; i++) m.A[i] = frand(&seed);
    for (size_t i = 0; i < nb; i++) m.B[i] = frand(&seed);
    for (size_t i = 0; i < nc; i++) m.C[i] = beta == 0.0f ? NAN : frand(&seed);
    memcpy(m.C0, m.C, nc * sizeof(float));
    return m;
}

static void mats_free(struct mats *m)
{
    free(m->A); free(m->B); free(m->C); free(m->C0);
}

/* Worst |C - ref| / scale over C, where scale = |alpha| sum_k |a b| + |beta c0|
 * (the size of what was summed), plus: padding columns of C untouched. */
static double check_f32(const struct mats *m, float alpha, float beta)
{
    double worst = 0.0;
    for (int i = 0; i < m->M; i++) {
        for (int j = 0; j < m->N; j++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < m->K; k++) {
                double a = m->tA ? m->A[(size_t)k * m->lda + i] : m->A[(size_t)i * m->lda + k];
                double b = m->tB ? m->B[(size_t)j * m->ldb + k] : m->B[(size_t)k * m->ldb + j];
                s += a * b;
                mag += fabs(a * b);
            }
            double c0 = m->C0[(size_t)i * m->ldc + j];
            double ref = alpha * s, scale = fabs(alpha) * mag;
            if (beta != 0.0f) { ref += beta * c0; scale += fabs(beta * c0); }
            double e = fabs(m->C[(size_t)i * m->ldc + j] - ref) / (scale > 1e-30 ? scale : 1e-30);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;   /* NaN: a failure that sticks */
        }
        for (int j = m->N; j < m->ldc; j++) {               /* outside the sub-matrix */
            float got = m->C[(size_t)i * m->ldc + j], was = m->C0[(size_t)i * m->ldc + j];
            if (memcmp(&got, &was, sizeof got) != 0) return INFINITY;
        }
    }
    return worst;
}

static const double TOL = 1e-5;

/* One case: call gemm_f32, compare with the reference.  Returns the error. */
static double run_case(int tA, int tB, int M, int N, int K, int pad, float alpha, float beta,
                       uint64_t seed)
{
    struct mats m = mats_new(tA, tB, M, N, K, pad, beta, seed);
    gemm_f32(tA, tB, M, N, K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
    double e = check_f32(&m, alpha, beta);
    mats_free(&m);
    return e;
}

static void test_shapes(void)
{
    /* Each size sits on one side of an edge: MR = 14, NR = 32, MC = 224,
     * KC = 256, NC = 1024, the 16-wide transposes in packing, and plain odd sizes. */
    static const int sizes[][3] = {
        {1, 1, 1},     {7, 13, 17},    {13, 7, 33},    {14, 32, 16},   {15, 33, 15},
        {17, 31, 129}, {33, 129, 7},   {129, 17, 13},  {223, 65, 255}, {224, 96, 256},
        {225, 100, 257}, {449, 33, 300}, {30, 1023, 20}, {29, 1025, 31}, {64, 2049, 9},
        {3, 5, 513},   {2, 1, 1000},   {1, 300, 64},   {300, 1, 64},   {100, 100, 1},
    };
    int ncase = (int)(sizeof sizes / sizeof sizes[0]);
    for (int t = 0; t < 4; t++) {
        int tA = t >> 1, tB = t & 1;
        double worst = 0.0;
        int bad = -1;
        for (int c = 0; c < ncase; c++) {
            double e = run_case(tA, tB, sizes[c][0], sizes[c][1], sizes[c][2], c % 3 == 0 ? 0 : 5,
                                1.0f, 0.0f, 1000u + (uint64_t)c);
            if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
            if (!(e <= TOL) && bad < 0) bad = c;
        }
        if (!tap_ok(bad < 0, "gemm_f32 op(A)=%c op(B)=%c, %d sizes across block edges (worst rel. err %.2e)",
                    tA ? 'T' : 'N', tB ? 'T' : 'N', ncase, worst))
            tap_diag("first failing size M=%d N=%d K=%d", sizes[bad][0], sizes[bad][1], sizes[bad][2]);
    }
}

static void test_alpha_beta(void)
{
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, 0.25f}, {-2.0f, 1.0f}, {0.75f, -1.5f}};
    for (int t = 0; t < 4; t++) {
        int tA = t >> 1, tB = t & 1;
        for (int i = 0; i < 5; i++) {
            /* K = 300 > KC, so beta is applied on the first K block only. */
            double e = run_case(tA, tB, 37, 45, 300, 3, ab[i][0], ab[i][1], 77u + (uint64_t)i);
            tap_ok(e <= TOL, "gemm_f32 %c%c alpha=%g beta=%g%s (rel. err %.2e)", tA ? 'T' : 'N',
                   tB ? 'T' : 'N', ab[i][0], ab[i][1], ab[i][1] == 0.0f ? " over NaN garbage" : "", e);
        }
    }
}

/* alpha = 0 and K = 0: C = beta C, A and B never read (NULL here); M or N = 0: a no-op. */
static void test_degenerate(void)
{
    float C[6] = {1, 2, 3, 4, 5, NAN};
    gemm_f32(0, 0, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 2.0f, C, 3);
    tap_ok(C[0] == 2 && C[1] == 4 && C[3] == 8 && C[4] == 10 && C[2] == 3,
           "gemm_f32 K=0: C = beta C, padding untouched");
    gemm_f32(1, 1, 2, 2, 5, 0.0f, NULL, 2, NULL, 5, 0.0f, C, 3);
    tap_ok(C[0] == 0 && C[1] == 0 && C[3] == 0 && C[4] == 0 && C[2] == 3,
           "gemm_f32 alpha=0 beta=0: C = 0 without reading A, B");
    float D[2] = {7, 8};
    gemm_f32(0, 0, 0, 2, 3, 1.0f, NULL, 3, NULL, 2, 0.0f, D, 2);
    gemm_f32(0, 0, 1, 0, 3, 1.0f, NULL, 3, NULL, 1, 0.0f, D, 1);
    tap_ok(D[0] == 7 && D[1] == 8, "gemm_f32 M=0 or N=0: nothing written");
}

/* Attention calls gemm from inside a parallel region: each thread its own
 * case, run single-threaded, all correct. */
static void test_in_parallel(void)
{
    enum { NCASE = 8 };
    double err[NCASE];
    int inpar[NCASE];
#pragma omp parallel for schedule(static, 1)
    for (int c = 0; c < NCASE; c++) {
        inpar[c] = omp_in_parallel() || omp_get_num_threads() == 1;
        err[c] = run_case(c & 1, (c >> 1) & 1, 256 - c, 64 + c, 256 + 3 * c, c % 2 ? 0 : 7, 1.0f,
                          c % 3 == 0 ? 0.0f : 1.0f, 5000u + (uint64_t)c);
    }
    double worst = 0.0;
    int ok = 1;
    for (int c = 0; c < NCASE; c++) {
        if (!(err[c] <= worst)) worst = isnan(err[c]) ? INFINITY : err[c];
        ok = ok && inpar[c] && err[c] <= TOL;
    }
    tap_ok(ok, "gemm_f32 inside an omp parallel region, %d threads, %d cases (worst rel. err %.2e)",
           omp_get_max_threads(), NCASE, worst);
}

/* Same inputs -> bitwise the same C: on every call, and (by construction:
 * fixed K blocking, threads split only M or N) whatever the thread count. */
static void test_determinism(void)
{
    int M = 500, N = 300, K = 700;
    struct mats m = mats_new(0, 1, M, N, K, 0, 0.0f, 99u);
    size_t nc = (size_t)M * m.ldc;
    float *first = malloc(nc * sizeof(float));
    if (!first) exit(1);
    int nt = omp_get_max_threads(), same_call = 1, same_threads = 1;
    gemm_f32(0, 1, M, N, K, 1.0f, m.A, m.lda, m.B, m.ldb, 0.0f, m.C, m.ldc);
    memcpy(first, m.C, nc * sizeof(float));
    for (int r = 0; r < 3; r++) {
        gemm_f32(0, 1, M, N, K, 1.0f, m.A, m.lda, m.B, m.ldb, 0.0f, m.C, m.ldc);
        same_call = same_call && memcmp(first, m.C, nc * sizeof(float)) == 0;
    }
    omp_set_num_threads(1);
    gemm_f32(0, 1, M, N, K, 1.0f, m.A, m.lda, m.B, m.ldb, 0.0f, m.C, m.ldc);
    same_threads = memcmp(first, m.C, nc * sizeof(float)) == 0;
    omp_set_num_threads(nt);
    tap_ok(same_call, "gemm_f32 bitwise identical on repeated calls (%d threads)", nt);
    tap_ok(same_threads, "gemm_f32 bitwise identical with 1 and %d threads", nt);
    free(first);
    mats_free(&m);
}

static void test_f64(void)
{
    for (int t = 0; t < 4; t++) {
        int tA = t >> 1, tB = t & 1, M = 19, N = 23, K = 41, pad = 2;
        int lda = (tA ? M : K) + pad, ldb = (tB ? K : N) + pad, ldc = N + pad;
        double A[64 * 64], B[64 * 64], C[64 * 64], C0[64 * 64];
        uint64_t s = 31u + (uint64_t)t;
        for (int i = 0; i < 64 * 64; i++) {
            A[i] = frand(&s);
            B[i] = frand(&s);
            C0[i] = C[i] = frand(&s);
        }
        double alpha = 0.5, beta = -1.25, worst = 0.0;
        gemm_f64(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0.0;
                for (int k = 0; k < K; k++)
                    ref += (tA ? A[k * lda + i] : A[i * lda + k]) * (tB ? B[j * ldb + k] : B[k * ldb + j]);
                ref = alpha * ref + beta * C0[i * ldc + j];
                double e = fabs(C[i * ldc + j] - ref) / (fabs(ref) > 1.0 ? fabs(ref) : 1.0);
                if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
            }
        tap_ok(worst <= 1e-13, "gemm_f64 %c%c alpha=0.5 beta=-1.25, sub-matrices (rel. err %.2e)",
               tA ? 'T' : 'N', tB ? 'T' : 'N', worst);
    }
}

/* gemm_kernels.h's arithmetic, one element at a time: K blocks of GEMM_KC,
 * each summed from 0 by fmaf in order, then C = alpha*acc or
 * fma(beta or 1, C, alpha*acc). */
static void spec_gemm(const struct mats *m, float alpha, float beta, float *C)
{
    for (int i = 0; i < m->M; i++)
        for (int j = 0; j < m->N; j++) {
            float c = m->C0[(size_t)i * m->ldc + j];
            for (int k0 = 0; k0 < m->K; k0 += GEMM_KC) {
                float acc = 0.0f;
                for (int k = k0; k < m->K && k < k0 + GEMM_KC; k++) {
                    float a = m->tA ? m->A[(size_t)k * m->lda + i] : m->A[(size_t)i * m->lda + k];
                    float b = m->tB ? m->B[(size_t)j * m->ldb + k] : m->B[(size_t)k * m->ldb + j];
                    acc = fmaf(a, b, acc);
                }
                float b0 = k0 == 0 ? beta : 1.0f, r = alpha * acc;
                c = b0 != 0.0f ? fmaf(b0, c, r) : r;
            }
            C[(size_t)i * m->ldc + j] = c;
        }
}

/* Each path the processor runs gives exactly spec_gemm's C: every
 * transpose, edges of every kernel's blocks, alpha/beta, 1 and N threads.
 * So the same inputs give bitwise the same C on every path. */
static void test_paths_bitwise(void)
{
    static const int sizes[][3] = {
        {1, 1, 1}, {5, 7, 3}, {6, 16, 17}, {7, 17, 255}, {13, 31, 256}, {14, 32, 257},
        {29, 47, 600}, {145, 40, 70}, {225, 33, 9}, {64, 1030, 20}, {100, 64, 513},
    };
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.75f, -1.5f}};
    int ncase = (int)(sizeof sizes / sizeof sizes[0]), nt = omp_get_max_threads();
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!isa_supported((enum isa)p)) {
            char why[96];
            snprintf(why, sizeof why, "path %s: this processor cannot run it", isa_name((enum isa)p));
            tap_skip(why);
            continue;
        }
        isa_force((enum isa)p);
        gemm_reset_path();
        int bad = -1, checked = 0;
        for (int c = 0; c < ncase && bad < 0; c++)
            for (int t = 0; t < 4 && bad < 0; t++)
                for (int x = 0; x < 3 && bad < 0; x++)
                    for (int th = 1; th <= nt && bad < 0; th += nt > 1 ? nt - 1 : 1) {
                        float alpha = ab[x][0], beta = ab[x][1];
                        struct mats m = mats_new(t >> 1, t & 1, sizes[c][0], sizes[c][1], sizes[c][2], c % 2 * 3,
                                                 beta, 300u + (uint64_t)(c * 12 + t * 3 + x));
                        size_t nc = (size_t)m.M * m.ldc;
                        float *want = malloc(nc * sizeof(float));
                        if (!want) exit(1);
                        memcpy(want, m.C0, nc * sizeof(float));
                        spec_gemm(&m, alpha, beta, want);
                        omp_set_num_threads(th);
                        gemm_f32(m.tA, m.tB, m.M, m.N, m.K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
                        omp_set_num_threads(nt);
                        if (memcmp(want, m.C, nc * sizeof(float)) != 0) bad = c;
                        checked++;
                        free(want);
                        mats_free(&m);
                    }
        if (!tap_ok(bad < 0, "path %s: bitwise equal to the arithmetic of gemm_kernels.h (%d products: every "
                    "transpose, block edges, alpha/beta, 1 and %d threads)", isa_name((enum isa)p), checked, nt))
            tap_diag("first failing size M=%d N=%d K=%d", sizes[bad][0], sizes[bad][1], sizes[bad][2]);
    }
    gemm_reset_path();
}

/* ------------------------------------------------------------ gemm_bf16 */

static float op_a(const struct mats *m, int i, int k)
{
    return m->tA ? m->A[(size_t)k * m->lda + i] : m->A[(size_t)i * m->lda + k];
}

static float op_b(const struct mats *m, int k, int j)
{
    return m->tB ? m->B[(size_t)j * m->ldb + k] : m->B[(size_t)k * m->ldb + j];
}

/* gemm_kernels.h's bf16 arithmetic, one element at a time: K blocks of
 * GEMM_KC padded to even, pairs odd first, fma_ftz, the flushing close. */
static void spec_gemm_bf16(const struct mats *m, float alpha, float beta, float *C)
{
    for (int i = 0; i < m->M; i++)
        for (int j = 0; j < m->N; j++) {
            float c = m->C0[(size_t)i * m->ldc + j];
            for (int k0 = 0; k0 < m->K; k0 += GEMM_KC) {
                int k1 = k0 + GEMM_KC < m->K ? k0 + GEMM_KC : m->K;
                float acc = 0.0f;
                for (int k = k0; k < k1; k += 2) {
                    float a1 = k + 1 < k1 ? gemm_bf16_round(op_a(m, i, k + 1)) : 0.0f;
                    float b1 = k + 1 < k1 ? gemm_bf16_round(op_b(m, k + 1, j)) : 0.0f;
                    acc = gemm_fma_ftz(a1, b1, acc);
                    acc = gemm_fma_ftz(gemm_bf16_round(op_a(m, i, k)), gemm_bf16_round(op_b(m, k, j)), acc);
                }
                float b0 = k0 == 0 ? beta : 1.0f, r = gemm_mul_ftz(alpha, acc);
                c = b0 != 0.0f ? gemm_fma_ftz(b0, c, r) : r;
            }
            C[(size_t)i * m->ldc + j] = c;
        }
}

/* Tiny operands where (i + j) % 5 == 0 scale them: row i of op(A) by
 * 2^-60 and column j of op(B) by 2^-66 when i % 5 == 0 (j % 5 == 0), so
 * those products (about 2^-126) and their sums cross FLT_MIN and the
 * flushing decides; every 7th value of A is a bf16 subnormal (a zero once
 * packed). */
static void make_tiny(struct mats *m)
{
    for (int i = 0; i < m->M; i++)
        for (int k = 0; k < m->K; k++) {
            float *a = m->tA ? &m->A[(size_t)k * m->lda + i] : &m->A[(size_t)i * m->lda + k];
            if (i % 5 == 0) *a *= 0x1p-60f;
            if ((i * 31 + k) % 7 == 0) *a = 0x1p-130f * (k % 2 ? -1.0f : 1.0f);
        }
    for (int j = 0; j < m->N; j++)
        for (int k = 0; k < m->K; k++)
            if (j % 5 == 0) *(m->tB ? &m->B[(size_t)j * m->ldb + k] : &m->B[(size_t)k * m->ldb + j]) *= 0x1p-66f;
}

/* Every third value of A and B halfway between two bf16 values (the low
 * 16 bits 0x8000): the packing's rounding to nearest even decides, up or
 * down by the bit above. */
static void make_ties(struct mats *m)
{
    float *x[2] = {m->A, m->B};
    size_t n[2] = {(size_t)(m->tA ? m->K : m->M) * m->lda, (size_t)(m->tB ? m->N : m->K) * m->ldb};
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < n[t]; i += 3) {
            uint32_t u;
            memcpy(&u, &x[t][i], sizeof u);
            u = (u & 0xffff0000u) | 0x8000u;
            memcpy(&x[t][i], &u, sizeof u);
        }
}

/* Each path's gemm_bf16 gives exactly spec_gemm_bf16's C: every transpose,
 * odd and even K on both sides of GEMM_KC, kernels' edges, alpha/beta,
 * tiny sums, operands rounded at ties, 1 and N threads. */
static void test_paths_bitwise_bf16(void)
{
    static const int sizes[][3] = {
        {1, 1, 1}, {5, 7, 3}, {6, 16, 17}, {7, 17, 255}, {13, 31, 256}, {14, 32, 257},
        {29, 47, 601}, {145, 40, 70}, {225, 33, 9}, {64, 1030, 20}, {100, 64, 513},
    };
    static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.75f, -1.5f}};
    int ncase = (int)(sizeof sizes / sizeof sizes[0]), nt = omp_get_max_threads();
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!isa_supported((enum isa)p)) {
            char why[96];
            snprintf(why, sizeof why, "path %s (bf16): this processor cannot run it", isa_name((enum isa)p));
            tap_skip(why);
            continue;
        }
        isa_force((enum isa)p);
        gemm_reset_path();
        int bad = -1, checked = 0, flushed = 0;
        for (int c = 0; c < ncase && bad < 0; c++)
            for (int t = 0; t < 4 && bad < 0; t++)
                for (int x = 0; x < 3 && bad < 0; x++)
                    for (int th = 1; th <= nt && bad < 0; th += nt > 1 ? nt - 1 : 1) {
                        float alpha = ab[x][0], beta = ab[x][1];
                        struct mats m = mats_new(t >> 1, t & 1, sizes[c][0], sizes[c][1], sizes[c][2], c % 2 * 3,
                                                 beta, 700u + (uint64_t)(c * 12 + t * 3 + x));
                        if ((c + t) % 2) make_tiny(&m);
                        else make_ties(&m);
                        size_t nc = (size_t)m.M * m.ldc;
                        float *want = malloc(nc * sizeof(float));
                        if (!want) exit(1);
                        memcpy(want, m.C0, nc * sizeof(float));
                        spec_gemm_bf16(&m, alpha, beta, want);
                        for (size_t e = 0; e < nc; e++) flushed += want[e] == 0.0f && m.C0[e] != 0.0f && beta == 0;
                        omp_set_num_threads(th);
                        gemm_bf16(m.tA, m.tB, m.M, m.N, m.K, alpha, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
                        omp_set_num_threads(nt);
                        if (memcmp(want, m.C, nc * sizeof(float)) != 0) bad = c;
                        checked++;
                        free(want);
                        mats_free(&m);
                    }
        if (!tap_ok(bad < 0, "path %s: gemm_bf16 bitwise equal to the bf16 arithmetic of gemm_kernels.h (%d products: "
                    "every transpose, odd K, block edges, alpha/beta, tiny sums (%d flushed to 0), ties, 1 and %d "
                    "threads; %s)", isa_name((enum isa)p), checked, flushed, nt, gemm_backend_name(GEMM_BF16)))
            tap_diag("first failing size M=%d N=%d K=%d", sizes[bad][0], sizes[bad][1], sizes[bad][2]);
    }
    gemm_reset_path();
}

/* Path p (cpu.h's isa) forced for the products that follow, where this
 * processor runs it (0: it does not). */
static int path_on(int p)
{
    if (!isa_supported((enum isa)p)) return 0;
    isa_force((enum isa)p);
    gemm_reset_path();
    return 1;
}

/* The window where fma_ftz's rule matters, in a product: row 0 of A and
 * column 0 of B make the first pair's sum FLT_MIN + 2^-149 and the second
 * pair subtract (8 + r) 2^-152 with r = row index - 4 of C: r <= 2 rounds
 * back to FLT_MIN at 24 bits (kept), r >= 3 is tiny (a zero), though
 * gradual underflow rounds r = 3, 4 up to FLT_MIN.  Every path. */
static void test_bf16_flush_window(void)
{
    enum { M = 13, N = 3, K = 4 };
    float A[M * K], B[K * N], C[M * N];
    int ok = 1, paths = 0;
    for (int i = 0; i < M; i++) {
        /* pair (0,1): a1 b1 = 2^-126, a0 b0 = 2^-149;  pair (2,3): a3 b3 = -(8 + r) 2^-152, a2 b2 = 0 */
        A[i * K + 0] = 0x1p-75f, A[i * K + 1] = 0x1p-63f, A[i * K + 2] = 0.0f, A[i * K + 3] = (float)(i + 4) * 0x1p-80f;
    }
    for (int j = 0; j < N; j++)
        B[0 * N + j] = 0x1p-74f, B[1 * N + j] = 0x1p-63f, B[2 * N + j] = 1.0f, B[3 * N + j] = -0x1p-72f;
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!path_on(p)) continue;
        gemm_bf16(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) ok = ok && C[i * N + j] == (i - 4 <= 2 ? FLT_MIN : 0.0f);
        paths++;
    }
    gemm_reset_path();
    tap_ok(ok, "gemm_bf16 on %d path(s): FLT_MIN - r 2^-152 flushed for r >= 3, kept (rounded to FLT_MIN) for r <= 2",
           paths);
}

/* gemm_bf16 is a product: within fp32 rounding of the double-accumulated
 * product of the operands rounded to bf16 (sizes across every block edge,
 * alpha/beta). */
static void test_bf16_accuracy(void)
{
    static const int sizes[][3] = {{7, 13, 17}, {15, 33, 15}, {223, 65, 255}, {225, 100, 257}, {29, 1025, 31}};
    double worst = 0.0;
    for (int c = 0; c < 5; c++)
        for (int t = 0; t < 4; t++) {
            float beta = c % 2 ? 0.5f : 0.0f;
            struct mats m = mats_new(t >> 1, t & 1, sizes[c][0], sizes[c][1], sizes[c][2], 2, beta, 900u + c * 4u + t);
            gemm_bf16(m.tA, m.tB, m.M, m.N, m.K, 1.5f, m.A, m.lda, m.B, m.ldb, beta, m.C, m.ldc);
            for (int i = 0; i < m.M; i++)
                for (int j = 0; j < m.N; j++) {
                    double s = 0.0, mag = 0.0;
                    for (int k = 0; k < m.K; k++) {
                        double x = (double)gemm_bf16_round(op_a(&m, i, k)) * gemm_bf16_round(op_b(&m, k, j));
                        s += x;
                        mag += fabs(x);
                    }
                    double c0 = beta != 0.0f ? m.C0[(size_t)i * m.ldc + j] : 0.0; /* (NaN when unread) */
                    double ref = 1.5 * s + beta * c0, scale = 1.5 * mag + fabs(beta * c0);
                    double e = fabs(m.C[(size_t)i * m.ldc + j] - ref) / (scale > 1e-30 ? scale : 1e-30);
                    if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
                }
            mats_free(&m);
        }
    tap_ok(worst <= TOL, "gemm_bf16 within %.0e of the double product of the bf16-rounded operands (worst %.2e; %s)",
           TOL, worst, gemm_backend_name(GEMM_BF16));
}

/* gemm_f32_ep and gemm_bf16_ep with a bias, and with a bias and bf16
 * rounding: bitwise the product followed by a pass adding the bias (and
 * lp_round), on every path and thread count, across block edges;
 * the sums tiny (operands near 2^-64) so that many sums plus a bias of the
 * opposite sign land below FLT_MIN: a subnormal kept, not flushed by the
 * bf16 kernels' FTZ mode. */
static void test_bias_epilogue(void)
{
    static const int sizes[][3] = {{7, 13, 17}, {223, 65, 255}, {225, 1100, 300}, {300, 33, 64}};
    int bad = 0, subnormal[2] = {0, 0}, runs = 0;
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!path_on(p)) continue;
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 4; c++)
                for (int t = 0; t < 4; t++) {
                    int rnd = t >= 2; /* then rounded to bf16 */
                    int tiny = t % 2;
                    struct mats m = mats_new(0, 1, sizes[c][0], sizes[c][1], sizes[c][2], 3, 0.0f, 77u + c * 2u + t);
                    size_t nc = (size_t)m.M * m.ldc;
                    float *bias = malloc((size_t)m.N * sizeof *bias), *want = malloc(nc * sizeof *want);
                    if (tiny) {
                        /* products near 2^-120 (normal: the bf16 kernels' FTZ keeps them), sums
                         * with the bias near 2^-130: subnormal, which FTZ would flush */
                        for (size_t i = 0; i < (size_t)m.M * m.lda; i++) m.A[i] *= 0x1p-60f;
                        for (size_t i = 0; i < (size_t)m.N * m.ldb; i++) m.B[i] *= 0x1p-60f;
                        /* and a last row of zero products, to which a subnormal bias adds itself */
                        for (int k = 0; k < m.K; k++) m.A[(size_t)(m.M - 1) * m.lda + k] = 0.0f;
                    }
                    (a ? gemm_bf16 : gemm_f32)(0, 1, m.M, m.N, m.K, 1.0f, m.A, m.lda, m.B, m.ldb, 0.0f, want, m.ldc);
                    for (int j = 0; j < m.N; j++) /* (tiny: minus a sum of column j's first row, nudged; */
                        bias[j] = tiny ? -want[j] * 0.9990234375f : (float)j * 0.01f - 0.3f; /* or subnormal) */
                    for (int j = 3; tiny && j < m.N; j += 4) bias[j] = j % 8 == 3 ? 0x1p-135f : -0x1p-131f;
                    for (int i = 0; i < m.M; i++) {
                        for (int j = 0; j < m.N; j++) {
                            want[(size_t)i * m.ldc + j] += bias[j];
                            subnormal[a] += fpclassify(want[(size_t)i * m.ldc + j]) == FP_SUBNORMAL;
                        }
                        if (rnd) lp_round(PREC_BF16, want + (size_t)i * m.ldc, (size_t)m.N);
                    }
                    struct gemm_epilogue ep = {bias, rnd};
                    (a ? gemm_bf16_ep : gemm_f32_ep)(0, 1, m.M, m.N, m.K, m.A, m.lda, m.B, m.ldb, m.C, m.ldc, &ep);
                    for (int i = 0; i < m.M; i++)
                        bad += memcmp(m.C + (size_t)i * m.ldc, want + (size_t)i * m.ldc,
                                      (size_t)m.N * sizeof(float)) != 0;
                    runs++;
                    free(bias), free(want);
                    mats_free(&m);
                }
    }
    gemm_reset_path();
    tap_ok(bad == 0 && subnormal[0] > 0 && subnormal[1] > 0,
           "gemm_f32_ep, gemm_bf16_ep: bitwise the product then the bias added (then lp_round), %d products on "
           "every path (subnormal results kept: %d fp32, %d bf16, which the bf16 kernels' FTZ must not flush; "
           "%d rows differ)",
           runs, subnormal[0], subnormal[1], bad);
}

/* Whether the calling thread's floating-point mode (MXCSR on x86) changed
 * since the last call. */
static int mode_changed(void)
{
#if defined(__x86_64__)
    static unsigned last;
    static int seen;
    unsigned now = __builtin_ia32_stmxcsr() & ~0x3fu; /* (less the sticky exception flags) */
    int changed = seen && now != last;
    last = now, seen = 1;
    return changed;
#else
    return 0;
#endif
}

/* gemm_f32_wgrad and gemm_bf16_wgrad (a weight's gradient C += A^T B with
 * its bias's, the sums of A's columns, formed while A is packed): C bitwise
 * gemm_f32's / gemm_bf16's (transA, beta 1) and the sums bitwise the plain
 * loop over A's rows in order, from a nonzero start, on every path and on
 * 1, 2 and 3 threads (slices cut along M and along N: the first slice's
 * sums only), across the block edges (MR, MC, KC; odd K for bf16's pairs),
 * and with the sums subnormal (columns of values near 2^-130 that cancel
 * to a few 2^-149): kept, which the bf16 kernels' FTZ mode would flush.
 * On the BLAS path (TRIAD_GEMM=blas: ISA_COUNT below) the loop after the
 * product. */
static void test_wgrad_sums(void)
{
    /* M (columns of A, rows of C), N, K (rows of A) */
    static const int sizes[][3] = {{1, 5, 3}, {13, 40, 257}, {15, 300, 7}, {230, 33, 300}, {250, 70, 263}, {20, 1100, 259}};
    int bad_c = 0, bad_s = 0, bad_mode = 0, runs = 0, subnormal = 0, tiny_cols = 0, paths = 0;
    const char *forced = getenv("TRIAD_GEMM"); /* (the caller's choice, put back after) */
    (void)mode_changed();
    for (int p = 0; p <= ISA_COUNT; p++) {
        if (p < ISA_COUNT && !path_on(p)) continue;
        if (p == ISA_COUNT) {
            setenv("TRIAD_GEMM", "blas", 1);
            gemm_reset_path();
        }
        paths++;
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 6; c++)
                for (int th = 1; th <= 3; th++)
                    for (int tiny = 0; tiny < 2; tiny++) {
                        struct mats m = mats_new(1, 0, sizes[c][0], sizes[c][1], sizes[c][2], 3, 1.0f,
                                                 500u + (unsigned)(c * 8 + th * 2 + tiny));
                        size_t nc = (size_t)m.M * m.ldc;
                        float *want = malloc(nc * sizeof *want), *sums = malloc((size_t)(m.M + 16) * sizeof *sums),
                              *ref = malloc((size_t)m.M * sizeof *ref);
                        for (int i = m.M; i < m.M + 16; i++) sums[i] = -7.0f; /* (must stay) */
                        if (tiny) /* every third column: +-(2^-130 + 2^-149 n), summing to a few 2^-149 */
                            for (int k = 0; k < m.K; k++)
                                for (int i = 0; i < m.M; i += 3)
                                    m.A[(size_t)k * m.lda + i] = (k % 2 ? -0x1p-130f : 0x1p-130f) +
                                                                 (float)((k + i) % 3) * 0x1p-149f;
                        for (int i = 0; i < m.M; i++) sums[i] = ref[i] = tiny && i % 3 == 0 ? 0.0f : 0.25f * (float)i;
                        for (int k = 0; k < m.K; k++)
                            for (int i = 0; i < m.M; i++) ref[i] += m.A[(size_t)k * m.lda + i];
                        /* (each such sum subnormal, unless this thread's mode was left flushing) */
                        for (int i = 0; i < m.M; i++) subnormal += fpclassify(ref[i]) == FP_SUBNORMAL;
                        tiny_cols += tiny ? (m.M + 2) / 3 : 0;
                        memcpy(want, m.C0, nc * sizeof *want);
                        int was = omp_get_max_threads();
                        omp_set_num_threads(th);
                        (a ? gemm_bf16 : gemm_f32)(1, 0, m.M, m.N, m.K, 1.0f, m.A, m.lda, m.B, m.ldb, 1.0f, want,
                                                   m.ldc);
                        (a ? gemm_bf16_wgrad : gemm_f32_wgrad)(m.M, m.N, m.K, m.A, m.lda, m.B, m.ldb, m.C, m.ldc,
                                                               sums);
                        omp_set_num_threads(was);
                        bad_c += memcmp(m.C, want, nc * sizeof *want) != 0;
                        bad_s += memcmp(sums, ref, (size_t)m.M * sizeof *ref) != 0;
                        for (int i = m.M; i < m.M + 16; i++) bad_s += sums[i] != -7.0f;
                        bad_mode += mode_changed();
                        runs++;
                        free(want), free(sums), free(ref);
                        mats_free(&m);
                    }
    }
    if (forced) setenv("TRIAD_GEMM", "blas", 1);
    else unsetenv("TRIAD_GEMM");
    gemm_reset_path();
    /* degenerate shapes: no columns of C (the sums alone), no rows of A (sums unchanged), no columns of A */
    float a[6] = {1.0f, 2.0f, 3.0f, 0.5f, 0.25f, 0.125f}, b[1] = {0.0f}, c[3] = {9.0f, 9.0f, 9.0f};
    float sums[4] = {1.0f, 1.0f, 1.0f, -7.0f};
    gemm_f32_wgrad(3, 0, 2, a, 3, b, 1, c, 1, sums); /* sums += rows of A (2 x 3) */
    int degenerate = sums[0] == 2.5f && sums[1] == 3.25f && sums[2] == 4.125f && sums[3] == -7.0f;
    gemm_bf16_wgrad(3, 1, 0, a, 3, b, 1, c, 1, sums);
    gemm_f32_wgrad(0, 1, 2, a, 3, b, 1, c, 1, sums);
    degenerate = degenerate && sums[0] == 2.5f && sums[1] == 3.25f && sums[2] == 4.125f && c[0] == 9.0f;
    tap_ok(bad_c == 0 && bad_s == 0 && bad_mode == 0 && subnormal == tiny_cols && degenerate,
           "gemm_f32_wgrad, gemm_bf16_wgrad: C bitwise the transposed product, the column sums bitwise the loop "
           "over A's rows (nothing written past them, the caller's floating-point mode kept), %d products on %d "
           "paths with BLAS, 1-3 threads (%d of %d subnormal sums kept; %d C, %d sums and %d modes differ); "
           "N = 0, K = 0, M = 0 %s",
           runs, paths, subnormal, tiny_cols, bad_c, bad_s, bad_mode, degenerate ? "right" : "WRONG");
}

/* gemm_pack_a / gemm_pack_b / gemm_packed (operands packed once, used
 * many times: attention's blocks) give gemm_f32's and gemm_bf16's C bit for
 * bit, on every path, in both arithmetics: every transpose, K across
 * GEMM_KC (blocks packed one after the other), odd K, the kernels' edges,
 * alpha/beta, tiny sums and ties; each packed operand used twice. */
static void test_packed_operands(void)
{
    static const int sizes[][3] = {{1, 1, 1}, {5, 7, 3}, {14, 32, 64}, {64, 64, 64}, {15, 33, 255},
                                   {29, 47, 257}, {64, 70, 601}, {230, 19, 66}};
    int ncase = (int)(sizeof sizes / sizeof sizes[0]), bad = 0, runs = 0, paths = 0;
    int blas = getenv("TRIAD_GEMM") != NULL; /* TRIAD_GEMM=blas: fp32 on the BLAS (not bitwise) */
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!path_on(p)) continue;
        paths++;
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < ncase; c++)
                for (int t = 0; t < 4; t++) {
                    float alpha = c % 3 == 2 ? 0.75f : 1.0f, beta = (float)(t % 2);
                    struct mats m = mats_new(t >> 1, t & 1, sizes[c][0], sizes[c][1], sizes[c][2], c % 2 * 5,
                                             1.0f, 900u + (uint64_t)(c * 8 + t * 2 + a));
                    if (a && c % 2) make_tiny(&m);
                    else if (a) make_ties(&m);
                    enum gemm_arith ar = a ? GEMM_BF16 : GEMM_FP32;
                    size_t nc = (size_t)m.M * m.ldc;
                    float *want = malloc(nc * sizeof(float));
                    void *ap = aligned_alloc(64, gemm_pack_a_bytes(ar, m.M, m.K));
                    void *bp = aligned_alloc(64, gemm_pack_b_bytes(ar, m.K, m.N));
                    if (!want || !ap || !bp) exit(1);
                    memcpy(want, m.C0, nc * sizeof(float));
                    gemm_pack_a(ar, m.tA, m.M, m.K, m.A, m.lda, ap);
                    gemm_pack_b(ar, m.tB, m.K, m.N, m.B, m.ldb, bp);
                    for (int use = 0; use < 2; use++) { /* the second use adds to the first's C */
                        (a ? gemm_bf16 : gemm_f32)(m.tA, m.tB, m.M, m.N, m.K, alpha, m.A, m.lda, m.B, m.ldb,
                                                   use ? 1.0f : beta, want, m.ldc);
                        gemm_packed(ar, m.M, m.N, m.K, alpha, ap, bp, use ? 1.0f : beta, m.C, m.ldc);
                    }
                    if (blas && !a) { /* cblas_sgemm on the copies: within rounding of the transposed call */
                        for (size_t e = 0; e < nc; e++)
                            bad += !(fabsf(want[e] - m.C[e]) <= 1e-5f * (1.0f + fabsf(want[e])));
                    } else {
                        bad += memcmp(want, m.C, nc * sizeof(float)) != 0;
                    }
                    runs++;
                    free(want), free(ap), free(bp);
                    mats_free(&m);
                }
    }
    gemm_reset_path();
    tap_ok(bad == 0 && runs > 0, "gemm_packed on operands packed once: %s gemm_f32's and gemm_bf16's C, %d products "
           "used twice each on %d paths (every transpose, K across GEMM_KC, edges, tiny sums, ties; %d differ)",
           blas ? "(fp32 on the BLAS: within 1e-5 of)" : "bitwise", runs, paths, bad);
}

/* gemm_packed_causal on a diagonal block's shapes gives gemm_packed's C
 * bitwise where the caller reads it (COLS: j <= i; K_FROM: all of C), A
 * with the leading zeros K_FROM promises (of either sign), on every path,
 * in both arithmetics: square blocks of attention's sizes, odd sizes (a
 * bf16 kernel's k padded to a whole pair), more rows than k, alpha < 0,
 * beta; in bf16 also tiny sums (some flushed to -0) and ties. */
static void test_packed_causal(void)
{
    static const int sizes[][2] = {{1, 8}, {9, 5}, {16, 8}, {37, 64}, {64, 64}, {64, 128}, {50, 33}, {23, 256}};
    int ncase = (int)(sizeof sizes / sizeof sizes[0]), bad = 0, runs = 0, paths = 0;
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!path_on(p)) continue;
        paths++;
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < ncase; c++)
                for (int sh = 0; sh < 2; sh++)
                    for (int t = 0; t < 2; t++) {
                        enum gemm_causal shape = sh ? GEMM_CAUSAL_K_FROM : GEMM_CAUSAL_COLS;
                        int S = sizes[c][0], H = sizes[c][1]; /* block of S positions, heads of H values */
                        /* (K_FROM with c == 1: K < M, rows past the last k all zeros) */
                        int M = S, N = shape == GEMM_CAUSAL_COLS ? S : H;
                        int K = shape == GEMM_CAUSAL_COLS ? H : c == 1 ? S - 4 : S;
                        float alpha = c % 3 == 2 ? 0.75f : c % 3 == 1 ? -1.25f : 1.0f, beta = (float)t;
                        struct mats m = mats_new(0, 0, M, N, K, c % 2 * 3, 1.0f,
                                                 1700u + (uint64_t)(c * 8 + sh * 2 + t));
                        if (a && c % 2) make_tiny(&m);
                        else if (a) make_ties(&m);
                        for (int i = 0; i < M && shape != GEMM_CAUSAL_COLS; i++)
                            for (int k = 0; k < K; k++)
                                if (k < i)
                                    m.A[(size_t)i * m.lda + k] = (i + k) % 2 ? -0.0f : 0.0f;
                        enum gemm_arith ar = a ? GEMM_BF16 : GEMM_FP32;
                        size_t nc = (size_t)M * m.ldc;
                        float *want = malloc(nc * sizeof(float));
                        void *ap = aligned_alloc(64, gemm_pack_a_bytes(ar, M, K));
                        void *bp = aligned_alloc(64, gemm_pack_b_bytes(ar, K, N));
                        if (!want || !ap || !bp) exit(1);
                        memcpy(want, m.C0, nc * sizeof(float));
                        gemm_pack_a(ar, 0, M, K, m.A, m.lda, ap);
                        gemm_pack_b(ar, 0, K, N, m.B, m.ldb, bp);
                        gemm_packed(ar, M, N, K, alpha, ap, bp, beta, want, m.ldc);
                        gemm_packed_causal(ar, shape, M, N, K, alpha, ap, bp, beta, m.C, m.ldc);
                        for (int i = 0; i < M; i++) {
                            int n = shape == GEMM_CAUSAL_COLS ? i + 1 : N;
                            bad += memcmp(want + (size_t)i * m.ldc, m.C + (size_t)i * m.ldc, n * sizeof(float)) != 0;
                        }
                        runs++;
                        free(want), free(ap), free(bp);
                        mats_free(&m);
                    }
    }
    gemm_reset_path();
    tap_ok(bad == 0 && runs > 0, "gemm_packed_causal: gemm_packed's C bitwise where it is read, %d products on %d "
           "paths (both shapes, both arithmetics, edges, more rows than k, alpha < 0, tiny sums, ties; %d rows "
           "differ)", runs, paths, bad);
}

/* ------------------------------------------------------------ teams */
/* The products of test_team_takeover on `threads` threads into C (M x ldc) and sums. */
static void team_products(int kind, int threads, const struct mats *m, float *C, float *sums, const float *bias)
{
    int was = omp_get_max_threads();
    omp_set_num_threads(threads);
    memcpy(C, m->C0, (size_t)m->M * m->ldc * sizeof *C);
    for (int i = 0; i < m->M; i++) sums[i] = 0.5f * (float)i;
    struct gemm_epilogue ep = {bias, 1};
    switch (kind) {
    case 0: gemm_f32(0, 0, m->M, m->N, m->K, 0.75f, m->A, m->lda, m->B, m->ldb, 1.0f, C, m->ldc); break;
    case 1: gemm_bf16(0, 0, m->M, m->N, m->K, 0.75f, m->A, m->lda, m->B, m->ldb, 1.0f, C, m->ldc); break;
    case 2: gemm_f32_wgrad(m->M, m->N, m->K, m->A, m->lda, m->B, m->ldb, C, m->ldc, sums); break;
    case 3: gemm_bf16_wgrad(m->M, m->N, m->K, m->A, m->lda, m->B, m->ldb, C, m->ldc, sums); break;
    case 4: gemm_f32_ep(0, 0, m->M, m->N, m->K, m->A, m->lda, m->B, m->ldb, C, m->ldc, &ep); break;
    default: gemm_bf16_ep(0, 0, m->M, m->N, m->K, m->A, m->lda, m->B, m->ldb, C, m->ldc, &ep); break;
    }
    omp_set_num_threads(was);
}

/* A product shared by a team (gemm.c's gemm_team_rows, gemm_team_cols)
 * whose thread 1 is slow (slow_thread.h: each of its own blocks waits 2 ms
 * first), so thread 0 takes over the back of thread 1's range at each step
 * and, where thread 1 is a step behind, waits for the block it is still
 * on (a run without that wait gives other bits).  Every product
 * (NN, the weight gradient with its sums, the bias and rounding epilogue;
 * both arithmetics; cut by rows or by columns, over one or two column
 * blocks) is bitwise that of one thread, on every path. */
static void test_team_takeover(void)
{
    /* Cut by rows (at least 4 blocks a thread, of MC rows or fewer, on
     * every path): 3 K blocks of one column block, or one of each of two;
     * cut by columns (200 rows, 4 blocks a thread): 2 K blocks. */
    enum { KINDS = 6, SHAPES = 3 };
    static const int shape[SHAPES][3] = {{896, 40, 600}, {1100, 1030, 100}, {200, 1100, 260}}; /* M, N, K */
    static float bias[1100];
    for (int j = 0; j < 1100; j++) bias[j] = 0.125f * (float)(j % 41 - 20);
    slow_wait_s = 0.002;
    for (int p = 0; p < ISA_COUNT; p++) {
        if (!path_on(p)) continue;
        int bad = 0, shapes_taken = 0;
        for (int kind = 0; kind < KINDS * SHAPES; kind++) {
            if (kind % KINDS == 0) atomic_store(&slow_taken_over, 0);
            int tA = kind % KINDS == 2 || kind % KINDS == 3, M = shape[kind / KINDS][0], N = shape[kind / KINDS][1],
                K = shape[kind / KINDS][2];
            struct mats m = mats_new(tA, 0, M, N, K, 3, 1.0f, 900u + (unsigned)kind);
            size_t nc = (size_t)M * m.ldc;
            float *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got);
            float *ws = malloc(M * sizeof *ws), *gs = malloc(M * sizeof *gs);
            if (!want || !got || !ws || !gs) exit(1);
            team_products(kind % KINDS, 1, &m, want, ws, bias);
            team_hook = slow_thread_1;
            team_products(kind % KINDS, 2, &m, got, gs, bias);
            team_hook = NULL;
            bad += memcmp(want, got, nc * sizeof *got) != 0 || memcmp(ws, gs, M * sizeof *gs) != 0;
            free(want), free(got), free(ws), free(gs);
            mats_free(&m);
            if (kind % KINDS == KINDS - 1) shapes_taken += atomic_load(&slow_taken_over) > 0;
        }
        tap_ok(bad == 0 && shapes_taken == SHAPES,
               "path %s: a team whose thread 1 is slow gives one thread's bits (%d of %d products differ; blocks "
               "taken over from another thread's range in %d of %d shapes)", isa_name((enum isa)p), bad,
               KINDS * SHAPES, shapes_taken, SHAPES);
    }
    gemm_reset_path();
}

int main(void)
{
    tap_diag("path: %s, %d OpenMP threads", gemm_backend_name(GEMM_FP32), omp_get_max_threads());
    test_shapes();
    test_alpha_beta();
    test_degenerate();
    test_in_parallel();
    test_determinism();
    test_f64();
    if (getenv("TRIAD_GEMM") == NULL) test_paths_bitwise(); /* (the BLAS is not bitwise) */
    test_bf16_accuracy();
    test_paths_bitwise_bf16();
    test_bf16_flush_window();
    test_bias_epilogue();
    test_wgrad_sums();
    test_packed_operands();
    test_packed_causal();
    if (getenv("TRIAD_GEMM") == NULL) test_team_takeover(); /* (the BLAS path splits statically) */
    return tap_done();
}
