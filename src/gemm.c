/* gemm.c -- the matmul path: row-major C (M,N) = alpha op(A) op(B) + beta C.
 *
 * fp32 is the program's hot path.  On x86-64 with AVX-512 it runs our own
 * packed sgemm (Goto/BLIS loop nest, 14x32 register-blocked micro-kernel),
 * because on the reference machine it beat every BLAS available from Debian
 * on every one of the program's shapes (numbers and reasoning:
 * docs/performance.md, "Matmul path").  Without AVX-512, or with
 * TRIAD_GEMM=blas in the environment, it calls cblas_sgemm instead.
 * fp64 is always cblas_dgemm (the double-precision tests).
 *
 * Threads: the caller's OpenMP owns the cores.  Outside a parallel region a
 * product is cut into one slice of C per OpenMP thread; inside one (attention
 * runs one (b,h) per thread) it runs on the calling thread alone.  BLAS is
 * held to one thread (openblas_set_num_threads(1)) on both paths, so its
 * pthreads never wake up to compete with OpenMP's.
 *
 * Determinism: on the AVX-512 path every element of C is summed in the same
 * order (k in blocks of KC, in sequence) whatever the thread count or the
 * slice it falls in, so a result is bitwise reproducible across calls and
 * across thread counts.  On the BLAS path, across calls at a fixed thread
 * count (the slices are fixed; OpenBLAS on one thread is deterministic). */
#include "gemm.h"

#include <cblas.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GEMM_HAVE_AVX512 1
#include <immintrin.h>
#else
#define GEMM_HAVE_AVX512 0
#endif

/* OpenBLAS-specific; declared here because cblas.h of other BLASes lacks it. */
void openblas_set_num_threads(int num_threads);

/* ------------------------------------------------------------ blocking */
/* Register block MR x NR (NR = NV vectors of 16 floats); cache blocks:
 * a packed B micro-panel (KC x NR, 32 KiB) stays in L1 while the packed A
 * block (MC x KC, 224 KiB) streams from L2; the packed B block (KC x NC)
 * is reused across all of this thread's rows. */
#ifndef GEMM_MR
#define GEMM_MR 14
#endif
#ifndef GEMM_NV
#define GEMM_NV 2
#endif
#define GEMM_NR (GEMM_NV * 16)
#ifndef GEMM_KC
#define GEMM_KC 256
#endif
#ifndef GEMM_MC
#define GEMM_MC (GEMM_MR * 16)
#endif
#ifndef GEMM_NC
#define GEMM_NC 1024
#endif
/* Below this many multiply-adds a product is not worth a parallel region. */
#define GEMM_PAR_MIN (64L * 64 * 64)

enum gemm_path { PATH_UNSET, PATH_AVX512, PATH_BLAS };
static _Atomic int gemm_path_in_use = PATH_UNSET;

/* ------------------------------------------------------------ micro-kernel */
#if GEMM_HAVE_AVX512
#define AVX512_TARGET __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma")))

/* C (rows, nr; row stride ldc) = alpha * Ap Bp + beta * C over kc steps, for
 * a packed A panel (MR floats per k, the first `rows` used) and a packed B
 * panel (NR floats per k, the first nr used).  Edges are handled here, with
 * exact row counts and masked columns, so no tile is computed twice.
 * beta == 0 never reads C (it may hold NaN garbage). */
AVX512_TARGET
static inline __attribute__((always_inline)) void
ukernel_body(const int rows, int kc, const float *restrict ap, const float *restrict bp,
             float *restrict c, long ldc, float alpha, float beta, int nr)
{
    __m512 acc[GEMM_MR][GEMM_NV];
    __mmask16 mask[GEMM_NV];
#pragma GCC unroll 4
    for (int v = 0; v < GEMM_NV; v++) {
        int w = nr - 16 * v;
        mask[v] = w >= 16 ? (__mmask16)0xffff : w > 0 ? (__mmask16)((1u << w) - 1) : 0;
    }
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++) {         /* C arrives while we compute */
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + nr - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) acc[i][v] = _mm512_setzero_ps();

    for (int k = 0; k < kc; k++) {
        __m512 b[GEMM_NV];
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) b[v] = _mm512_load_ps(bp + v * 16);
#pragma GCC unroll 16
        for (int i = 0; i < rows; i++) {
            __m512 a = _mm512_set1_ps(ap[i]);
#pragma GCC unroll 4
            for (int v = 0; v < GEMM_NV; v++) acc[i][v] = _mm512_fmadd_ps(a, b[v], acc[i][v]);
        }
        ap += GEMM_MR;
        bp += GEMM_NR;
    }

    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int i = 0; i < rows; i++) {
        float *ci = c + i * ldc;
#pragma GCC unroll 4
        for (int v = 0; v < GEMM_NV; v++) {
            __m512 r = _mm512_mul_ps(va, acc[i][v]);
            if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask[v], ci + v * 16), r);
            _mm512_mask_storeu_ps(ci + v * 16, mask[v], r);
        }
    }
}

/* One micro-kernel per row count 1..MR, so an edge panel of 3 rows costs
 * 3 rows of work, not MR. */
typedef void ukernel_fn(int kc, const float *ap, const float *bp, float *c, long ldc,
                        float alpha, float beta, int nr);
#define UKERNEL(R)                                                                        \
    AVX512_TARGET static void ukernel_##R(int kc, const float *ap, const float *bp,       \
                                          float *c, long ldc, float alpha, float beta,    \
                                          int nr)                                         \
    {                                                                                     \
        ukernel_body(R, kc, ap, bp, c, ldc, alpha, beta, nr);                             \
    }
UKERNEL(1) UKERNEL(2) UKERNEL(3) UKERNEL(4) UKERNEL(5) UKERNEL(6) UKERNEL(7)
UKERNEL(8) UKERNEL(9) UKERNEL(10) UKERNEL(11) UKERNEL(12) UKERNEL(13) UKERNEL(14)
#if GEMM_MR != 14
#error "the ukernel table below lists row counts 1..14: extend it with GEMM_MR"
#endif
static ukernel_fn *const ukernel_rows[GEMM_MR + 1] = {
    NULL, ukernel_1, ukernel_2, ukernel_3, ukernel_4, ukernel_5, ukernel_6, ukernel_7,
    ukernel_8, ukernel_9, ukernel_10, ukernel_11, ukernel_12, ukernel_13, ukernel_14,
};

/* In-register transpose: r[i] lane j  ->  r[j] lane i (16 x 16 floats). */
AVX512_TARGET
static inline __attribute__((always_inline)) void transpose16(__m512 r[16])
{
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* Packed A: panels of MR rows; panel p holds op(A)(p*MR + i, k) at [k*MR + i].
 * Rows past m are zeroed; the edge kernels (ukernel_rows) never read them. */
AVX512_TARGET
static void pack_a(int transA, int m, int kc, const float *A, long lda, float *ap)
{
    const __mmask16 full = (__mmask16)((1u << GEMM_MR) - 1);
    if (transA) {             /* op(A)(i,k) = A[k*lda + i]: 16 rows of A at a time, across */
        for (int k0 = 0; k0 < kc; k0 += 16) {
            int k1 = k0 + 16 < kc ? k0 + 16 : kc;
            for (int p = 0; p < m; p += GEMM_MR) {
                int mr = m - p < GEMM_MR ? m - p : GEMM_MR;
                __mmask16 mk = (__mmask16)((1u << mr) - 1);
                for (int k = k0; k < k1; k++)
                    _mm512_mask_storeu_ps(ap + (long)p * kc + (long)k * GEMM_MR, full,
                                          _mm512_maskz_loadu_ps(mk, A + (long)k * lda + p));
            }
        }
        return;
    }
    for (int p = 0; p < m; p += GEMM_MR, ap += (long)GEMM_MR * kc) {
        int mr = m - p < GEMM_MR ? m - p : GEMM_MR;
        const float *a = A + (long)p * lda;   /* op(A)(i,k) = A[i*lda + k]: transpose 16 k at a time */
        int k = 0;
        for (; k + 16 <= kc; k += 16) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = i < mr ? _mm512_loadu_ps(a + (long)i * lda + k) : _mm512_setzero_ps();
            transpose16(r);
#pragma GCC unroll 16
            for (int j = 0; j < 16; j++)
                _mm512_mask_storeu_ps(ap + (long)(k + j) * GEMM_MR, full, r[j]);
        }
        for (; k < kc; k++)
#pragma GCC unroll 16
            for (int i = 0; i < GEMM_MR; i++)
                ap[(long)k * GEMM_MR + i] = i < mr ? a[(long)i * lda + k] : 0.0f;
    }
}

/* Packed B: panels of NR columns; panel q holds op(B)(k, q*NR + j) at [k*NR + j]. */
AVX512_TARGET
static void pack_b(int transB, int kc, int n, const float *B, long ldb, float *bp)
{
    if (!transB) {            /* op(B)(k,j) = B[k*ldb + j]: 16 rows of B at a time, across */
        for (int k0 = 0; k0 < kc; k0 += 16) {
            int k1 = k0 + 16 < kc ? k0 + 16 : kc;
            for (int q = 0; q < n; q += GEMM_NR)
#pragma GCC unroll 16
                for (int v = 0; v < GEMM_NV; v++) {
                    int w = n - q - 16 * v;
                    __mmask16 mk = w >= 16 ? (__mmask16)0xffff : w > 0 ? (__mmask16)((1u << w) - 1) : 0;
                    for (int k = k0; k < k1; k++)
                        _mm512_store_ps(bp + (long)q * kc + (long)k * GEMM_NR + 16 * v,
                                        _mm512_maskz_loadu_ps(mk, B + (long)k * ldb + q + 16 * v));
                }
        }
        return;
    }
    for (int q = 0; q < n; q += GEMM_NR, bp += (long)GEMM_NR * kc) {
        int nr = n - q < GEMM_NR ? n - q : GEMM_NR;
#pragma GCC unroll 16
        for (int v = 0; v < GEMM_NV; v++) {   /* op(B)(k,j) = B[j*ldb + k]: transpose 16 k at a time */
            const float *b = B + (long)(q + 16 * v) * ldb;
            int rows = nr - 16 * v;
            int k = 0;
            for (; k + 16 <= kc; k += 16) {
                __m512 r[16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++)
                    r[i] = i < rows ? _mm512_loadu_ps(b + (long)i * ldb + k) : _mm512_setzero_ps();
                transpose16(r);
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++)
                    _mm512_store_ps(bp + (long)(k + j) * GEMM_NR + 16 * v, r[j]);
            }
            for (; k < kc; k++)
#pragma GCC unroll 16
                for (int j = 0; j < 16; j++)
                    bp[(long)k * GEMM_NR + 16 * v + j] = j < rows ? b[(long)j * ldb + k] : 0.0f;
        }
    }
}
#endif

/* ------------------------------------------------------------ driver */
#if GEMM_HAVE_AVX512
/* Per-thread packing buffers, grown on demand and kept for the thread's life. */
static _Thread_local float *tl_apack, *tl_bpack;

static float *buf_get(float **buf, size_t nfloat)
{
    if (!*buf) {
        *buf = aligned_alloc(64, (nfloat * sizeof(float) + 63) / 64 * 64);
        if (!*buf) {
            fprintf(stderr, "gemm: out of memory for packing buffers (%zu bytes)\n",
                    nfloat * sizeof(float));
            abort();
        }
    }
    return *buf;
}

/* One thread's share: C(m,n) = alpha op(A) op(B) + beta C, A/B/C already
 * offset to the slice.  Loop nest jc -> pc -> ic -> jr -> ir. */
AVX512_TARGET
static void gemm_serial_avx512(int transA, int transB, int m, int n, int k, float alpha,
                               const float *A, long lda, const float *B, long ldb,
                               float beta, float *C, long ldc)
{
    float *ap = buf_get(&tl_apack, (size_t)GEMM_MC * GEMM_KC);
    float *bp = buf_get(&tl_bpack, (size_t)GEMM_KC * (GEMM_NC + GEMM_NR));

    for (int jc = 0; jc < n; jc += GEMM_NC) {
        int nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
        for (int pc = 0; pc < k; pc += GEMM_KC) {
            int kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
            float beta_p = pc == 0 ? beta : 1.0f;  /* later K blocks accumulate */
            pack_b(transB, kc, nc, transB ? B + (long)jc * ldb + pc : B + (long)pc * ldb + jc,
                   ldb, bp);
            for (int ic = 0; ic < m; ic += GEMM_MC) {
                int mc = m - ic < GEMM_MC ? m - ic : GEMM_MC;
                pack_a(transA, mc, kc, transA ? A + (long)pc * lda + ic : A + (long)ic * lda + pc,
                       lda, ap);
                for (int jr = 0; jr < nc; jr += GEMM_NR) {
                    int nr = nc - jr < GEMM_NR ? nc - jr : GEMM_NR;
                    const float *bpj = bp + (long)jr * kc;
                    for (int ir = 0; ir < mc; ir += GEMM_MR) {
                        int mr = mc - ir < GEMM_MR ? mc - ir : GEMM_MR;
                        const float *api = ap + (long)ir * kc;
                        float *cij = C + (long)(ic + ir) * ldc + jc + jr;
                        ukernel_rows[mr](kc, api, bpj, cij, ldc, alpha, beta_p, nr);
                    }
                }
            }
        }
    }
}
#endif

/* C = beta C for K == 0 (or alpha == 0): no product to form. */
static void scale_c(int m, int n, float beta, float *C, long ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            C[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
}

/* The path is chosen once, on first use (possibly from inside a parallel
 * region, hence the atomic and the critical section). */
static enum gemm_path gemm_path(void)
{
    int p = atomic_load_explicit(&gemm_path_in_use, memory_order_acquire);
    if (p != PATH_UNSET) return (enum gemm_path)p;
#pragma omp critical(triad_gemm_init)
    {
        p = atomic_load_explicit(&gemm_path_in_use, memory_order_relaxed);
        if (p == PATH_UNSET) {
            const char *force = getenv("TRIAD_GEMM");
            p = PATH_BLAS;
#if GEMM_HAVE_AVX512
            __builtin_cpu_init();
            if (__builtin_cpu_supports("avx512f") && !(force && strcmp(force, "blas") == 0))
                p = PATH_AVX512;
#endif
            /* OpenMP owns the cores: BLAS only ever runs on the calling thread,
             * so its own pthreads never wake up to compete with OpenMP's. */
            openblas_set_num_threads(1);
            atomic_store_explicit(&gemm_path_in_use, p, memory_order_release);
        }
    }
    return (enum gemm_path)p;
}

/* One slice of C, on the calling thread. */
typedef void gemm_slice_fn(int transA, int transB, int m, int n, int k, float alpha,
                           const float *A, long lda, const float *B, long ldb, float beta,
                           float *C, long ldc);

static void gemm_serial_blas(int transA, int transB, int m, int n, int k, float alpha,
                             const float *A, long lda, const float *B, long ldb, float beta,
                             float *C, long ldc)
{
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, A, (int)lda, B, (int)ldb,
                beta, C, (int)ldc);
}

/* Cut C into one slice per thread, along M or N in whole register tiles
 * (gm rows, gn columns), whichever leaves the busiest thread fewer tiles;
 * each thread then runs the serial product on its slice.  Which thread
 * computes an element never changes how it is summed. */
static void gemm_parallel(gemm_slice_fn *slice, int gm, int gn, int transA, int transB, int M,
                          int N, int K, float alpha, const float *A, long lda, const float *B,
                          long ldb, float beta, float *C, long ldc)
{
    int nt = omp_get_max_threads();
    long mt = (M + gm - 1) / gm, ntile = (N + gn - 1) / gn;
    long cost_m = (mt + nt - 1) / nt * ntile, cost_n = (ntile + nt - 1) / nt * mt;
    int split_m = cost_m <= cost_n;
    int tiles = (int)(split_m ? mt : ntile);
    if (nt > tiles) nt = tiles;
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int t0 = (int)((long)tiles * t / T), t1 = (int)((long)tiles * (t + 1) / T);
        if (split_m) {
            int m0 = t0 * gm, m1 = t1 * gm < M ? t1 * gm : M;
            if (m1 > m0)
                slice(transA, transB, m1 - m0, N, K, alpha, transA ? A + m0 : A + (long)m0 * lda,
                      lda, B, ldb, beta, C + (long)m0 * ldc, ldc);
        } else {
            int n0 = t0 * gn, n1 = t1 * gn < N ? t1 * gn : N;
            if (n1 > n0)
                slice(transA, transB, M, n1 - n0, K, alpha, A, lda,
                      transB ? B + (long)n0 * ldb : B + n0, ldb, beta, C + n0, ldc);
        }
    }
}

void gemm_f32(int transA, int transB, int M, int N, int K, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta,
              float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    enum gemm_path path = gemm_path();
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return;
    }
    gemm_slice_fn *slice = gemm_serial_blas;
#if GEMM_HAVE_AVX512
    if (path == PATH_AVX512) slice = gemm_serial_avx512;
#else
    (void)path;
#endif
    if (!omp_in_parallel() && omp_get_max_threads() > 1 && (long)M * N * K >= GEMM_PAR_MIN)
        gemm_parallel(slice, GEMM_MR, GEMM_NR, transA, transB, M, N, K, alpha, A, lda, B, ldb,
                      beta, C, ldc);
    else
        slice(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_f64(int transA, int transB, int M, int N, int K, double alpha,
              const double *A, int lda, const double *B, int ldb, double beta,
              double *C, int ldc)
{
    cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb,
                beta, C, ldc);
}

const char *gemm_backend_name(void)
{
    return gemm_path() == PATH_AVX512 ? "triad AVX-512 sgemm (14x32 micro-kernel, OpenMP)"
                                      : "cblas_sgemm (one BLAS thread per OpenMP thread)";
}

double gemm_peak_gflops(void)
{
    enum { S = 1024 };
    float *A = aligned_alloc(64, (size_t)S * S * sizeof(float));
    float *B = aligned_alloc(64, (size_t)S * S * sizeof(float));
    float *C = aligned_alloc(64, (size_t)S * S * sizeof(float));
    double best = 0.0;
    if (!A || !B || !C) {
        free(A); free(B); free(C);
        return 0.0;
    }
    for (size_t i = 0; i < (size_t)S * S; i++) {
        A[i] = (float)(i % 7) * 0.25f;
        B[i] = (float)(i % 5) * 0.5f;
    }
    for (int rep = 0; rep < 6; rep++) {     /* the first one warms up caches and threads */
        double t0 = omp_get_wtime();
        gemm_f32(0, 1, S, S, S, 1.0f, A, S, B, S, 0.0f, C, S);
        double dt = omp_get_wtime() - t0;
        if (rep > 0 && dt > 0 && 2.0 * S * S * S / dt / 1e9 > best) best = 2.0 * S * S * S / dt / 1e9;
    }
    free(A); free(B); free(C);
    return best;
}
