/* gemm_bench.c -- GFLOP/s of every candidate matmul path on the program's
 * own shapes, side by side, in one run (docs/performance.md, "Matmul path").
 *
 * Candidates: triad's gemm_f32 on each SIMD path this processor runs
 * ("avx512", "avx2": src/base/cpu.h), the BLAS the build links ("blas":
 * cblas_sgemm; OpenBLAS by default), and with -DHAVE_BLIS "blis" =
 * bli_sgemm with the kernels of BLIS_ARCH (default zen3, the AVX2 kernels
 * of Zen 3; skx for AVX-512), selected from inside the program (setenv
 * before bli_init).  Beside them a bf16 run's products (its linear layers
 * and its attention's), gemm_bf16: "bf16" on VDPBF16PS (path avx512bf16),
 * "bf16-avx512" and "bf16-avx2" its emulation on the avx512 and avx2 paths.
 *
 * Build and run:  make bench/gemm_bench && OMP_NUM_THREADS=2 bench/gemm_bench [calls per round, default 20]
 * (CANDIDATES="avx512 bf16-avx512" runs only those named).
 * (configure finds Debian's BLIS, libblis-openmp-dev, and adds it; about a minute).
 *
 * Whole products run outside a parallel region with every thread of each
 * library, with the program's beta (0 for outputs, 1 for dW += ...).
 * Attention runs one (b,h) per OpenMP thread, causal row blocks of 64
 * against all the keys they see (the products of an earlier attention
 * kernel; the fused kernel's 64 x 64 blocks are timed in the model, by
 * diag.profile_ops), each library held to one thread; its GFLOP/s counts
 * the flops done.
 *
 * Measuring on a shared machine (the reference VM shares its 2 cores and its
 * memory bandwidth with other work): every call is timed on its own and the
 * fastest call of 3 rounds x `calls` counts -- the path's speed when nothing
 * else runs; medians there moved by 2x with the neighbours' load.
 * Candidates take turns; between turns the bench sleeps 0.15 s so the
 * previous library's idle threads stop spinning (OpenBLAS's pthreads
 * busy-wait after a call and would steal the cores from the next one). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "build_config.h"
#ifdef HAVE_CBLAS_H
#include <cblas.h>
#else
#include <mkl_cblas.h>
#endif

#include "cpu.h"
#include "gemm.h"

#ifdef HAVE_BLIS
#include <blis.h>
#endif

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
void openblas_set_num_threads(int num_threads);
#endif

enum cand { CAND_AVX512, CAND_AVX2, CAND_BLAS, CAND_BLIS, CAND_BF16, CAND_BF16_AVX512, CAND_BF16_AVX2, NCAND };
static const char *cand_name[NCAND] = {"avx512", "avx2", "blas", "blis", "bf16", "bf16-avx512", "bf16-avx2"};

/* The triad path of a candidate, ISA_COUNT for another library's. */
static enum isa cand_isa(enum cand c)
{
    switch (c) {
    case CAND_AVX512: case CAND_BF16_AVX512: return ISA_AVX512;
    case CAND_AVX2: case CAND_BF16_AVX2: return ISA_AVX2;
    case CAND_BF16: return ISA_AVX512BF16;
    default: return ISA_COUNT;
    }
}

enum kind { WHOLE, ATT_FWD, ATT_BWD };

struct shape {
    char what[40];
    enum kind kind;
    int tA, tB, M, N, K;        /* WHOLE; attention: T = M, HS = K, heads = N */
    float beta;                 /* WHOLE: 0 for outputs, 1 for accumulated gradients */
};

static void call(enum cand c, int tA, int tB, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    switch (c) {
    case CAND_AVX512:
    case CAND_AVX2:
        gemm_f32(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        break;
    case CAND_BF16:
    case CAND_BF16_AVX512:
    case CAND_BF16_AVX2:
        gemm_bf16(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        break;
    case CAND_BLAS:
        cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans,
                    M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        break;
    case CAND_BLIS:
#ifdef HAVE_BLIS
        bli_sgemm(tA ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tB ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                  M, N, K, &alpha, (float *)A, lda, 1, (float *)B, ldb, 1, &beta, C, ldc, 1);
#endif
        break;
    default: break;
    }
}

/* 1 if name is a word of the space-separated list (NULL: every name). */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        p += strspn(p, " ");
        size_t w = strcspn(p, " ");
        if (w == n && !strncmp(p, name, n)) return 1;
        p += w;
    }
    return !list;
}

/* Sets each library's thread count for whole products (nt) or per-head ones (1). */
static void set_threads(enum cand c, int nt)
{
    if (cand_isa(c) != ISA_COUNT) { /* triad's path */
        isa_force(cand_isa(c));
        gemm_reset_path();
    }
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    if (c == CAND_BLAS) openblas_set_num_threads(nt);
#endif
#ifdef HAVE_BLIS
    if (c == CAND_BLIS) bli_thread_set_num_threads(nt);
#endif
}

/* The attention products of one (b,h), as in kernels_cpu.c: q, k, v rows
 * strided by 3C, att/d (T,T), out/dout rows strided by C.  Returns flops. */
static double attention_head(enum cand c, int bwd, int T, int HS, int C, const float *q,
                             float *att, float *d, float *out, float *dq)
{
    const int BLK = 64, C3 = 3 * C;
    const float *k = q + C, *v = q + 2 * C;
    double flops = 0;
    for (int i0 = 0; i0 < T; i0 += BLK) {
        int nr = T - i0 < BLK ? T - i0 : BLK, nc = i0 + nr;
        if (!bwd) {
            call(c, 0, 1, nr, nc, HS, 0.125f, q + (size_t)i0 * C3, C3, k, C3, 0.0f, att + (size_t)i0 * T, T);
            call(c, 0, 0, nr, HS, nc, 1.0f, att + (size_t)i0 * T, T, v, C3, 0.0f, out + (size_t)i0 * C, C);
        } else {
            call(c, 0, 1, nr, nc, HS, 1.0f, out + (size_t)i0 * C, C, v, C3, 0.0f, d + (size_t)i0 * T, T);
            call(c, 0, 0, nr, HS, nc, 1.0f, d + (size_t)i0 * T, T, k, C3, 0.0f, dq + (size_t)i0 * C3, C3);
        }
        flops += 4.0 * nr * nc * HS;
    }
    if (bwd)
        for (int j0 = 0; j0 < T; j0 += BLK) {
            int nr = T - j0 < BLK ? T - j0 : BLK, kk = T - j0;
            size_t diag = (size_t)j0 * T + j0;
            call(c, 1, 0, nr, HS, kk, 1.0f, d + diag, T, q + (size_t)j0 * C3, C3, 0.0f,
                 dq + C + (size_t)j0 * C3, C3);
            call(c, 1, 0, nr, HS, kk, 1.0f, att + diag, T, out + (size_t)j0 * C, C, 0.0f,
                 dq + 2 * C + (size_t)j0 * C3, C3);
            flops += 4.0 * nr * kk * HS;
        }
    return flops;
}

struct bufs { float *A, *B, *C, *D; };

/* Runs one candidate on one shape `reps` times, with the program's beta;
 * returns flops done, seconds in *dt. */
static double time_case(enum cand c, const struct shape *s, const struct bufs *b, int nthreads,
                        int reps, double *dt)
{
    double flops = 0;
    set_threads(c, s->kind == WHOLE ? nthreads : 1);
    double t0 = omp_get_wtime();
    for (int r = 0; r < reps; r++) {
        if (s->kind == WHOLE) {
            int lda = s->tA ? s->M : s->K, ldb = s->tB ? s->K : s->N;
            call(c, s->tA, s->tB, s->M, s->N, s->K, 1.0f, b->A, lda, b->B, ldb, s->beta, b->C, s->N);
            flops += 2.0 * s->M * s->N * s->K;
        } else {
            int T = s->M, heads = s->N, HS = s->K, NH = 4, C = NH * HS;
            double f = 0;
#pragma omp parallel for schedule(static) reduction(+ : f)
            for (int h = 0; h < heads; h++) {
                size_t bt = (size_t)(h / NH) * T, hh = (size_t)(h % NH) * HS;
                f += attention_head(c, s->kind == ATT_BWD, T, HS, C, b->A + bt * 3 * C + hh,
                                    b->B + (size_t)h * T * T, b->D + (size_t)h * T * T,
                                    b->C + bt * C + hh, b->C + (size_t)heads * T * C + bt * 3 * C + hh);
            }
            flops += f;
        }
    }
    *dt = omp_get_wtime() - t0;
    return flops;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Best GFLOP/s of each candidate: `rounds` turns each, a turn being `calls`
 * separately timed calls (one call = one product, or the 32 heads' attention
 * products); the fastest call counts.  See the header for why. */
static void run_shape(const struct shape *s, const int *have, const struct bufs *b, int rounds,
                      int calls, int nthreads, double *gflops)
{
    double dt;
    for (int c = 0; c < NCAND; c++) gflops[c] = 0.0;
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < NCAND; c++) {
            if (!have[c]) continue;
            time_case((enum cand)c, s, b, nthreads, 1, &dt);         /* warm up, wake threads */
            for (int i = 0; i < calls; i++) {
                double flops = time_case((enum cand)c, s, b, nthreads, 1, &dt);
                if (flops / dt / 1e9 > gflops[c]) gflops[c] = flops / dt / 1e9;
            }
            nap(0.15);   /* let this library's idle threads stop spinning */
        }
}

int main(int argc, char **argv)
{
    int calls = argc > 1 ? atoi(argv[1]) : 20, rounds = 3;
    int nthreads = omp_get_max_threads();
    enum { NT = 2048, T = 256, HS = 64, BH = 32, N2 = 256 };
    static const int small_c_oc[][2] = {{256, 768}, {256, 256}, {256, 1024}, {1024, 256}, {256, 4096}};
    static const int gpt2_c_oc[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50304}};
    struct shape shapes[40];
    int ns = 0;
    if (calls < 1) calls = 1;

    for (int g = 0; g < 2; g++) {
        const int(*c_oc)[2] = g == 0 ? small_c_oc : gpt2_c_oc;
        const char *cfg = g == 0 ? "small" : "124M";
        int rows = g == 0 ? NT : N2;
        for (int i = 0; i < 5; i++) {
            int C = c_oc[i][0], OC = c_oc[i][1];
            struct shape *s = &shapes[ns];
            snprintf(s[0].what, sizeof s[0].what, "%s fwd  C=%d OC=%d", cfg, C, OC);
            s[0].kind = WHOLE; s[0].tA = 0; s[0].tB = 1; s[0].M = rows; s[0].N = OC; s[0].K = C; s[0].beta = 0.0f;
            snprintf(s[1].what, sizeof s[1].what, "%s dinp C=%d OC=%d", cfg, C, OC);
            s[1].kind = WHOLE; s[1].tA = 0; s[1].tB = 0; s[1].M = rows; s[1].N = C; s[1].K = OC; s[1].beta = 0.0f;
            snprintf(s[2].what, sizeof s[2].what, "%s dW   C=%d OC=%d", cfg, C, OC);
            s[2].kind = WHOLE; s[2].tA = 1; s[2].tB = 0; s[2].M = OC; s[2].N = C; s[2].K = rows; s[2].beta = 1.0f;
            ns += 3;
        }
        if (g == 0) {   /* attention of the small config: B*NH = 32 heads of T=256, HS=64 */
            shapes[ns] = (struct shape){"small attention fwd, 32 heads", ATT_FWD, 0, 0, T, BH, HS, 0.0f};
            shapes[ns + 1] = (struct shape){"small attention bwd, 32 heads", ATT_BWD, 0, 0, T, BH, HS, 0.0f};
            ns += 2;
        }
    }

    /* Buffers big enough for every case, filled once. */
    size_t big = (size_t)50304 * 768 + (size_t)BH * T * T;
    struct bufs b = {aligned_alloc(64, big * sizeof(float)), aligned_alloc(64, big * sizeof(float)),
                     aligned_alloc(64, big * sizeof(float)), aligned_alloc(64, big * sizeof(float))};
    if (!b.A || !b.B || !b.C || !b.D) { fprintf(stderr, "gemm_bench: out of memory\n"); return 1; }
    for (size_t i = 0; i < big; i++) {
        b.A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        b.B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
        b.C[i] = b.D[i] = 0.0f;
    }

    int have[NCAND] = {isa_supported(ISA_AVX512), isa_supported(ISA_AVX2), 1, 0, isa_supported(ISA_AVX512BF16),
                       isa_supported(ISA_AVX512), isa_supported(ISA_AVX2)};
#ifdef HAVE_BLIS
    /* BLIS 0.9 reads BLIS_ARCH_TYPE (a number: the arch_t id) once, in
     * bli_init(): setting it here, before the first BLIS call, selects
     * kernels this BLIS does not pick for every processor by itself.
     * bli_arch_query_id() before bli_init() aborts, hence the explicit init. */
    {
        const char *want = getenv("BLIS_ARCH") ? getenv("BLIS_ARCH") : "zen3";
        arch_t arch = !strcmp(want, "skx") ? BLIS_ARCH_SKX : !strcmp(want, "haswell") ? BLIS_ARCH_HASWELL
                      : !strcmp(want, "zen2") ? BLIS_ARCH_ZEN2 : !strcmp(want, "zen") ? BLIS_ARCH_ZEN
                                                                                        : BLIS_ARCH_ZEN3;
        char id[16];
        snprintf(id, sizeof id, "%d", (int)arch);
        setenv("BLIS_ARCH_TYPE", id, 0);
        bli_init();
    }
    have[CAND_BLIS] = 1;
    printf("# blis: BLIS %s with its %s kernels\n", bli_info_get_version_str(), bli_arch_string(bli_arch_query_id()));
#endif
    for (int c = 0; c < NCAND; c++) have[c] = have[c] && listed(getenv("CANDIDATES"), cand_name[c]);
    printf("# avx512, avx2: triad's gemm_f32 on that SIMD path; blas: cblas_sgemm of %s; bf16, bf16-avx512, "
           "bf16-avx2: gemm_bf16 on avx512bf16 (VDPBF16PS), avx512 and avx2 (emulated)\n", BLAS_NAME);
    printf("# %d OpenMP threads; best of %d rounds x %d calls\n", nthreads, rounds, calls);
    printf("%-31s %-2s %5s %5s %5s |", "shape", "op", "M", "N", "K");
    for (int c = 0; c < NCAND; c++)
        if (have[c]) printf(" %11s", cand_name[c]);
    printf("   GFLOP/s\n");

    for (int i = 0; i < ns; i++) {
        const struct shape *s = &shapes[i];
        double g[NCAND];
        if (s->kind == WHOLE)
            printf("%-31s %c%c %5d %5d %5d |", s->what, s->tA ? 'T' : 'N', s->tB ? 'T' : 'N', s->M,
                   s->N, s->K);
        else
            printf("%-31s %-2s %5s %5s %5s |", s->what, "*", "T=256", "", "HS=64");
        run_shape(s, have, &b, rounds, calls, nthreads, g);
        for (int c = 0; c < NCAND; c++)
            if (have[c] && g[c] > 0) printf(" %11.1f", g[c]);
            else if (have[c]) printf(" %11s", "-");
        printf("\n");
        fflush(stdout);
    }
    for (int c = CAND_AVX512; c <= CAND_AVX2; c++)
        if (have[c]) {
            set_threads((enum cand)c, nthreads);
            printf("# gemm_peak_gflops() on %s: %.1f\n", cand_name[c], gemm_peak_gflops(GEMM_FP32));
        }
    for (int c = CAND_BF16; c <= CAND_BF16_AVX2; c++)
        if (have[c]) {
            set_threads((enum cand)c, nthreads);
            printf("# gemm_peak_gflops(GEMM_BF16) on %s: %.1f\n", cand_name[c], gemm_peak_gflops(GEMM_BF16));
        }
    free(b.A); free(b.B); free(b.C); free(b.D);
    return 0;
}
