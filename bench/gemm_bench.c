/* gemm_bench.c -- GFLOP/s of every candidate matmul path on the program's
 * own shapes, side by side, in one run (docs/performance.md, "Matmul path").
 *
 * Candidates: "triad" = gemm_f32 (whatever gemm.c chose), "openblas" =
 * cblas_sgemm, and with -DHAVE_BLIS "blis" = bli_sgemm with the skx (AVX-512)
 * kernels selected from inside the program (setenv before BLIS initialises).
 *
 * Build (from the repository root; BLIS is optional):
 *   mpicc -std=c11 -O2 -march=native -fopenmp -D_POSIX_C_SOURCE=200809L -Isrc \
 *     -I/usr/include/x86_64-linux-gnu/openblas-pthread bench/gemm_bench.c src/gemm.c \
 *     -lopenblas -lm -o gemm_bench
 *   add  -DHAVE_BLIS -isystem /usr/include/x86_64-linux-gnu/blis-openmp  and
 *   /usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4  after -lopenblas.
 * Run:  OMP_NUM_THREADS=2 ./gemm_bench [seconds per shape, default 1]  (about a minute)
 *
 * Whole products (outside a parallel region) use every thread of each
 * library; attention products run one (b,h) per OpenMP thread with each
 * library held to one thread, as the program calls them.  The figure is the
 * median over interleaved rounds of each case (see run_shape). */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "gemm.h"

#ifdef HAVE_BLIS
#include <blis.h>
#endif

void openblas_set_num_threads(int num_threads);

enum cand { CAND_TRIAD, CAND_OPENBLAS, CAND_BLIS, NCAND };
static const char *cand_name[NCAND] = {"triad", "openblas", "blis"};

struct shape {
    const char *what;
    int tA, tB, M, N, K;
    int heads;                  /* > 0: `heads` independent products, one per OpenMP thread */
    int lda, ldb, ldc;          /* 0: tight */
};

static void call(enum cand c, int tA, int tB, int M, int N, int K, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc)
{
    switch (c) {
    case CAND_TRIAD:
        gemm_f32(tA, tB, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        break;
    case CAND_OPENBLAS:
        cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans,
                    M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        break;
    case CAND_BLIS:
#ifdef HAVE_BLIS
    {
        float one = 1.0f, b = beta;
        bli_sgemm(tA ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tB ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                  M, N, K, &one, (float *)A, lda, 1, (float *)B, ldb, 1, &b, C, ldc, 1);
    }
#endif
        break;
    default: break;
    }
}

/* Sets each library's thread count for whole products (nt) or per-head ones (1). */
static void set_threads(enum cand c, int nt)
{
    if (c == CAND_OPENBLAS) openblas_set_num_threads(nt);
#ifdef HAVE_BLIS
    if (c == CAND_BLIS) bli_thread_set_num_threads(nt);
#endif
}

/* Lets every library's idle threads fall asleep (see run_shape). */
static void quiesce(void)
{
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs one candidate on one shape `reps` times (beta = 1, as the gradient
 * accumulations do); returns the seconds taken. */
static double time_case(enum cand c, const struct shape *s, float *A, float *B, float *C,
                        int nthreads, int reps)
{
    int rowsA = s->tA ? s->K : s->M, colsA = s->tA ? s->M : s->K;
    int rowsB = s->tB ? s->N : s->K, colsB = s->tB ? s->K : s->N;
    int lda = s->lda ? s->lda : colsA, ldb = s->ldb ? s->ldb : colsB;
    int ldc = s->ldc ? s->ldc : s->N;
    long strideA = (long)rowsA * lda, strideB = (long)rowsB * ldb, strideC = (long)s->M * ldc;

    set_threads(c, s->heads > 0 ? 1 : nthreads);
    double t0 = omp_get_wtime();
    for (int r = 0; r < reps; r++) {
        if (s->heads > 0) {
#pragma omp parallel for schedule(static)
            for (int h = 0; h < s->heads; h++)
                call(c, s->tA, s->tB, s->M, s->N, s->K, A + h * strideA, lda, B + h * strideB, ldb,
                     1.0f, C + h * strideC, ldc);
        } else {
            call(c, s->tA, s->tB, s->M, s->N, s->K, A, lda, B, ldb, 1.0f, C, ldc);
        }
    }
    return omp_get_wtime() - t0;
}

/* Median GFLOP/s of each candidate on one shape.  The candidates take turns
 * (batches of ~50 ms), so a slow spell of the machine -- it is a shared
 * virtual machine -- hits all of them alike.  Between turns the bench sleeps
 * long enough for the previous library's threads to stop spinning (OpenBLAS's
 * pthreads busy-wait for up to ~2^28 cycles after a call): otherwise they
 * steal the cores from the next candidate and the figures mean nothing. */
static void run_shape(const struct shape *s, const int *have, float *A, float *B, float *C,
                      double seconds, int nthreads, double *gflops)
{
    enum { MAXROUND = 64 };
    double flops = 2.0 * s->M * s->N * s->K * (s->heads > 0 ? s->heads : 1);
    double rate[NCAND][MAXROUND];
    int reps[NCAND], nround = 0;
    double t_end;

    for (int c = 0; c < NCAND; c++) {                /* warm up; size the batches */
        if (!have[c]) continue;
        time_case((enum cand)c, s, A, B, C, nthreads, 1);
        double t = time_case((enum cand)c, s, A, B, C, nthreads, 1);
        reps[c] = t > 0.05 ? 1 : (int)(0.05 / (t > 1e-6 ? t : 1e-6)) + 1;
        quiesce();
    }
    t_end = omp_get_wtime() + seconds;
    while (nround < MAXROUND && (nround < 3 || omp_get_wtime() < t_end)) {
        for (int c = 0; c < NCAND; c++) {
            if (!have[c]) continue;
            time_case((enum cand)c, s, A, B, C, nthreads, 1);     /* wake its threads */
            rate[c][nround] = flops * reps[c] / time_case((enum cand)c, s, A, B, C, nthreads, reps[c]) / 1e9;
            quiesce();
        }
        nround++;
    }
    for (int c = 0; c < NCAND; c++) {
        if (!have[c]) continue;
        qsort(rate[c], nround, sizeof rate[c][0], cmp_double);
        gflops[c] = rate[c][nround / 2];
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int nthreads = omp_get_max_threads();
    enum { NT = 2048, T = 256, HS = 64, BH = 32, N2 = 256 };
    static const int small_c_oc[][2] = {{256, 768}, {256, 256}, {256, 1024}, {1024, 256}, {256, 4096}};
    static const int gpt2_c_oc[][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}, {768, 50304}};
    struct shape shapes[64];
    char names[64][48];
    int ns = 0;

    for (int g = 0; g < 2; g++) {
        const int(*c_oc)[2] = g == 0 ? small_c_oc : gpt2_c_oc;
        int rows = g == 0 ? NT : N2;
        for (int i = 0; i < 5; i++) {
            int C = c_oc[i][0], OC = c_oc[i][1];
            snprintf(names[ns], sizeof names[ns], "%s fwd  C=%d OC=%d", g ? "124M" : "small", C, OC);
            shapes[ns] = (struct shape){names[ns], 0, 1, rows, OC, C, 0, 0, 0, 0}; ns++;
            snprintf(names[ns], sizeof names[ns], "%s dinp C=%d OC=%d", g ? "124M" : "small", C, OC);
            shapes[ns] = (struct shape){names[ns], 0, 0, rows, C, OC, 0, 0, 0, 0}; ns++;
            snprintf(names[ns], sizeof names[ns], "%s dW   C=%d OC=%d", g ? "124M" : "small", C, OC);
            shapes[ns] = (struct shape){names[ns], 1, 0, OC, C, rows, 0, 0, 0, 0}; ns++;
        }
        if (g == 0) {   /* attention of the small config: B*NH = 32 heads, q/k/v rows strided by 3C */
            int ld3 = 3 * 256;
            shapes[ns++] = (struct shape){"small att QK^T  (x32 heads)", 0, 1, T, T, HS, BH, ld3, ld3, T};
            shapes[ns++] = (struct shape){"small att P V   (x32 heads)", 0, 0, T, HS, T, BH, T, ld3, 256};
            shapes[ns++] = (struct shape){"small att dP=dY V^T (x32)", 0, 1, T, T, HS, BH, 256, ld3, T};
            shapes[ns++] = (struct shape){"small att dV=P^T dY (x32)", 1, 0, T, HS, T, BH, T, 256, ld3};
            shapes[ns++] = (struct shape){"small att dQ=dS K (x32)", 0, 0, T, HS, T, BH, T, ld3, ld3};
            shapes[ns++] = (struct shape){"small att dK=dS^T Q (x32)", 1, 0, T, HS, T, BH, T, ld3, ld3};
        }
    }

    /* Buffers big enough for every case (heads included), filled once. */
    size_t big = (size_t)50304 * 768 + (size_t)BH * T * 3 * 256;
    float *A = aligned_alloc(64, big * sizeof(float));
    float *B = aligned_alloc(64, big * sizeof(float));
    float *Cb = aligned_alloc(64, big * sizeof(float));
    if (!A || !B || !Cb) { fprintf(stderr, "gemm_bench: out of memory\n"); return 1; }
    for (size_t i = 0; i < big; i++) {
        A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
        Cb[i] = 0.0f;
    }

    int have[NCAND] = {1, 1, 0};
#ifdef HAVE_BLIS
    /* BLIS 0.9 reads BLIS_ARCH_TYPE (a number: the arch_t id) once, in
     * bli_init(): setting it here, before the first BLIS call, selects the
     * AVX-512 kernels this BLIS does not pick for this processor by itself.
     * bli_arch_query_id() before bli_init() aborts, hence the explicit init. */
    {
        char id[16];
        snprintf(id, sizeof id, "%d", (int)BLIS_ARCH_SKX);
        setenv("BLIS_ARCH_TYPE", id, 0);
        bli_init();
    }
    have[CAND_BLIS] = 1;
    printf("# BLIS arch: %s\n", bli_arch_string(bli_arch_query_id()));
#endif
    printf("# triad path: %s; %d OpenMP threads; median of rounds over %.2f s per shape\n",
           gemm_backend_name(), nthreads, seconds);
    printf("%-34s %-3s %5s %5s %5s |", "shape (M N K)", "op", "M", "N", "K");
    for (int c = 0; c < NCAND; c++)
        if (have[c]) printf(" %9s", cand_name[c]);
    printf("   GFLOP/s\n");

    for (int i = 0; i < ns; i++) {
        const struct shape *s = &shapes[i];
        printf("%-34s %c%c  %5d %5d %5d |", s->what, s->tA ? 'T' : 'N', s->tB ? 'T' : 'N', s->M,
               s->N, s->K);
        double g[NCAND];
        run_shape(s, have, A, B, Cb, seconds, nthreads, g);
        for (int c = 0; c < NCAND; c++)
            if (have[c]) printf(" %9.1f", g[c]);
        printf("\n");
        fflush(stdout);
    }
    printf("# gemm_peak_gflops(): %.1f\n", gemm_peak_gflops());
    free(A); free(B); free(Cb);
    return 0;
}
