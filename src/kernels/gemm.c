/* gemm.c -- the matmul path: row-major C (M,N) = alpha op(A) op(B) + beta C.
 *
 * fp32 is the program's hot path.  It runs triad's own packed sgemm: the
 * Goto/BLIS loop nest below over the micro-kernel of the SIMD path in use
 * (cpu.h: avx512 14x32, avx2 6x16, generic 4x16 in C), because on the
 * machines measured it beat the BLAS libraries on the program's shapes
 * (docs/performance.md, "Matmul path").  TRIAD_GEMM=blas calls
 * cblas_sgemm instead.  fp64 is always cblas_dgemm (the double-precision
 * tests).  gemm_bf16 (a bf16 run's linear layers) runs the same loop nest
 * over the path's bf16 kernel: VDPBF16PS on avx512bf16, its arithmetic in
 * fp32 FMAs elsewhere (gemm_kernels.h); no BLAS has that arithmetic.
 *
 * Threads: the caller's OpenMP owns the cores.  Outside a parallel region a
 * product is shared by the OpenMP threads as a team: C cut by rows or by
 * columns into blocks, each thread owns a range of them and takes over
 * those a slower thread has not started (gemm_team_rows, gemm_team_cols;
 * a product of many rows cut by columns: one slice of C per thread).
 * Inside any parallel region, even one of one thread (team.h's
 * team_threads; attention runs one (b,h) per thread), it runs on the
 * calling thread alone.  BLAS is held to one thread on both paths,
 * so its own threads never wake up to compete with OpenMP's.
 *
 * Determinism: every kernel sums each element of C in the arithmetic of
 * gemm_kernels.h, so a product is bitwise the same on every SIMD path,
 * every call and every thread count (threads split only M or N).  On the
 * BLAS path, across calls at a fixed thread count. */
#include "gemm.h"

#include "build_config.h"
#ifdef HAVE_CBLAS_H
#include <cblas.h>
#else
#include <mkl_cblas.h>
#endif
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "gemm_kernels.h"
#include "precision.h"
#include "team.h"

/* Below this many multiply-adds a product is not worth a parallel region. */
#define GEMM_PAR_MIN (64L * 64 * 64)

/* ------------------------------------------------------------ the BLAS */
/* Hold the library to the calling thread (each has its own call, if any). */
#if defined(HAVE_OPENBLAS_SET_NUM_THREADS)
void openblas_set_num_threads(int num_threads);
#define BLAS_ONE_THREAD() openblas_set_num_threads(1)
#elif defined(HAVE_BLI_THREAD_SET_NUM_THREADS)
void bli_thread_set_num_threads(long n_threads);
#define BLAS_ONE_THREAD() bli_thread_set_num_threads(1)
#elif defined(HAVE_MKL_SET_NUM_THREADS)
void MKL_Set_Num_Threads(int nth);
#define BLAS_ONE_THREAD() MKL_Set_Num_Threads(1)
#else
#define BLAS_ONE_THREAD() ((void)0)
#endif

/* ------------------------------------------------------------ the path */
/* The kernels in use per arithmetic (fp32: NULL for cblas_sgemm); chosen
 * once, on first use (possibly inside a parallel region, hence the atomics
 * and the critical section), and again by gemm_reset_path. */
static const struct gemm_kernel *_Atomic path_kernel[2];
static _Atomic int path_set;

static const struct gemm_kernel *kernel_of(enum isa i, enum gemm_arith a)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (i == ISA_AVX512BF16) return a == GEMM_BF16 ? &gemm_kernel_avx512bf16 : &gemm_kernel_avx512;
    if (i == ISA_AVX512) return a == GEMM_BF16 ? &gemm_kernel_avx512_bf16 : &gemm_kernel_avx512;
    if (i == ISA_AVX2) return a == GEMM_BF16 ? &gemm_kernel_avx2_bf16 : &gemm_kernel_avx2;
#endif
    (void)i;
    return a == GEMM_BF16 ? &gemm_kernel_generic_bf16 : &gemm_kernel_generic;
}

static void check_fits(const struct gemm_kernel *g)
{
    if (g && (g->mc > GEMM_MC_MAX || g->nr > GEMM_NR_MAX || g->mc % g->mr || GEMM_NC % g->nr)) {
        fprintf(stderr, "gemm: kernel '%s' does not fit the packing buffers (gemm_kernels.h)\n", g->name);
        abort();
    }
}

static const struct gemm_kernel *gemm_path(enum gemm_arith a)
{
    if (atomic_load_explicit(&path_set, memory_order_acquire)) return atomic_load(&path_kernel[a]);
    enum isa isa = isa_active(); /* (outside the critical section: it has its own) */
#pragma omp critical(triad_gemm_init)
    if (!atomic_load_explicit(&path_set, memory_order_relaxed)) {
        const char *force = getenv("TRIAD_GEMM");
        const struct gemm_kernel *g = force && !strcmp(force, "blas") ? NULL : kernel_of(isa, GEMM_FP32);
        const struct gemm_kernel *h = kernel_of(isa, GEMM_BF16);
        check_fits(g);
        check_fits(h);
        atomic_store(&path_kernel[GEMM_FP32], g);
        atomic_store(&path_kernel[GEMM_BF16], h);
        BLAS_ONE_THREAD();
        atomic_store_explicit(&path_set, 1, memory_order_release);
    }
    return atomic_load(&path_kernel[a]);
}

void gemm_reset_path(void) { atomic_store(&path_set, 0); }

/* ------------------------------------------------------------ driver */
/* Per-thread packing buffers, for the largest kernel, kept for the thread's life. */
static _Thread_local float *tl_apack, *tl_bpack;

#define APACK_FLOATS ((size_t)GEMM_MC_MAX * GEMM_KC)
#define BPACK_FLOATS ((size_t)GEMM_KC * (GEMM_NC + GEMM_NR_MAX))
/* A team cutting C by columns packs all of A's rows for each K block: up
 * to TEAM_A_BLOCKS blocks of MC rows (more rows: a static split).  The
 * planner counts its room for every thread (gemm_pack_bytes), whether or
 * not a run's products take it. */
#define TEAM_A_BLOCKS 4
static _Thread_local float *tl_apack_all;

size_t gemm_pack_bytes(void) { return ((1 + TEAM_A_BLOCKS) * APACK_FLOATS + BPACK_FLOATS) * sizeof(float); }

static float *buf_get(float **buf, size_t nfloat)
{
    if (!*buf) {
        *buf = aligned_alloc(64, (nfloat * sizeof(float) + 63) / 64 * 64);
        if (!*buf) {
            fprintf(stderr, "gemm: out of memory for packing buffers (%zu bytes)\n", nfloat * sizeof(float));
            abort();
        }
    }
    return *buf;
}

/* The bias of C (m, n), one row at a time; bias: of C's first column. */
static void epilogue_bias(const float *bias, float *C, long ldc, int m, int n)
{
    for (int i = 0; i < m; i++) {
        float *c = C + (long)i * ldc;
#pragma omp simd
        for (int j = 0; j < n; j++) c[j] += bias[j];
    }
}

/* The epilogue on C (m, n) in the caller's floating-point mode: the bias,
 * then the rounding. */
static void epilogue_plain(const struct gemm_epilogue *ep, const float *bias, float *C, long ldc, int m, int n)
{
    if (bias) epilogue_bias(bias, C, ldc, m, n);
    if (ep->round_bf16) bf16_round_rows(C, (size_t)ldc, (size_t)m, (size_t)n);
}

/* The same on a tile of C inside kernel g's mode (*mode: the caller's, as
 * g->mode_enter saved it): a bias leaves the mode for its addition (an fp32
 * addition without the bf16 kernels' flushing); the rounding alone (integer
 * operations) runs in any mode. */
static void epilogue(const struct gemm_kernel *g, unsigned *mode, const struct gemm_epilogue *ep, const float *bias,
                     float *C, long ldc, int m, int n)
{
    if (bias && g->mode_leave) g->mode_leave(*mode);
    epilogue_plain(ep, bias, C, ldc, m, n);
    if (bias && g->mode_enter) *mode = g->mode_enter();
}

/* The epilogue on the rows of a tile (m, n) a kernel left (bit i: row i):
 * all of them at once, or one at a time. */
static void epilogue_rows(const struct gemm_kernel *g, unsigned *mode, const struct gemm_epilogue *ep,
                          const float *bias, float *C, long ldc, unsigned left, int m, int n)
{
    if (left == (1u << m) - 1) {
        epilogue(g, mode, ep, bias, C, ldc, m, n);
        return;
    }
    for (int i = 0; i < m; i++)
        if (left >> i & 1u) epilogue(g, mode, ep, bias, C + (long)i * ldc, ldc, 1, n);
}

/* The values of k a packed block of kc holds: a bf16 kernel pads to even. */
static int kp_of(const struct gemm_kernel *g, int kc) { return g->bf16 ? (kc + 1) & ~1 : kc; }

/* C (m, n) = alpha Ap Bp + beta C over one packed K block of kc values: A's
 * panels of MR rows, B's of NR columns, the register tiles in the order jr
 * -> ir (a B micro-panel stays in L1 while A's panels stream past it).  With
 * ep (the product's last K block) each tile's epilogue as its last sums are
 * stored: in the kernel's registers (the AVX-512 and AVX2 kernels), else
 * here on the rows it left, while they are in L1; bias: C's first column's.
 * cut (gemm.h's gemm_packed_causal, on a whole product of one K block):
 * COLS starts each column's tiles at the one whose rows reach it; K_FROM
 * starts each tile's sums at its first row's k (a bf16 kernel's at the pair
 * it is in: every kernel's MR is even, so the row itself; rows past the
 * last k sum nothing, the kernel's C update on an empty sum being that on
 * zeros). */
static void block_product(const struct gemm_kernel *g, unsigned *mode, enum gemm_causal cut, int m, int n, int kc,
                          const char *ap, const char *bp, float alpha, float beta, float *C, long ldc,
                          const struct gemm_epilogue *ep, const float *bias)
{
    const int kp = kp_of(g, kc);
    const long panel = (long)kp * g->elem; /* bytes per row or column of a panel */
    for (int jr = 0; jr < n; jr += g->nr) {
        int nr = n - jr < g->nr ? n - jr : g->nr;
        const float *tb = ep && bias ? bias + jr : NULL;
        for (int ir = cut == GEMM_CAUSAL_COLS ? jr / g->mr * g->mr : 0; ir < m; ir += g->mr) {
            int mr = m - ir < g->mr ? m - ir : g->mr, k0 = 0;
            if (cut == GEMM_CAUSAL_K_FROM) {
                k0 = g->bf16 ? ir & ~1 : ir;
                if (k0 > kp) k0 = kp;
            }
            float *c = C + (long)ir * ldc + jr;
            unsigned left = g->ukernel[mr](kp - k0, ap + ir * panel + (long)k0 * g->mr * g->elem,
                                           bp + jr * panel + (long)k0 * g->nr * g->elem, c, ldc, alpha, beta, nr, tb,
                                           ep && ep->round_bf16);
            if (left) epilogue_rows(g, mode, ep, tb, c, ldc, left, mr, nr);
        }
    }
}

/* One block of C's rows [ic, ic + mc) against the packed B block of K
 * block pc (B's columns from jc): A's rows packed (summed into sums as
 * they are, on the first column block), then block_product.  Its kernel's
 * mode in *mode. */
static void row_block(const struct gemm_kernel *g, unsigned *mode, int transA, int ic, int mc, int jc, int nc,
                      int pc, int kc, int k, float alpha, const float *A, long lda, char *ap, const char *bp,
                      float beta, float *C, long ldc, const struct gemm_epilogue *ep, const float *bias, float *sums)
{
    float beta_p = pc == 0 ? beta : 1.0f; /* later K blocks accumulate */
    const struct gemm_epilogue *last = pc + kc >= k ? ep : NULL;
    float *s = sums && jc == 0 ? sums + ic : NULL;
    if (s && g->mode_leave) g->mode_leave(*mode);
    g->pack_a(transA, mc, kc, transA ? A + (long)pc * lda + ic : A + (long)ic * lda + pc, lda, ap, s);
    if (s && g->mode_enter) *mode = g->mode_enter();
    block_product(g, mode, GEMM_CAUSAL_NONE, mc, nc, kc, ap, bp, alpha, beta_p, C + (long)ic * ldc + jc, ldc, last,
                  bias ? bias + jc : NULL);
}

/* One thread's share: C(m,n) = alpha op(A) op(B) + beta C, A/B/C already
 * offset to the slice.  Loop nest jc -> pc -> ic, then block_product: the
 * packed A block (MC x KC) streams from L2; the packed B block (KC x NC)
 * serves all of the rows.  A bf16 kernel's blocks hold kp (kc padded to
 * even) values of k, of g->elem bytes each.  sums (transA; NULL: none):
 * op(A)'s rows summed into it as the first column block packs them, k in
 * order (pc, then the block's k), outside the kernel's mode. */
static void gemm_serial_packed(const struct gemm_kernel *g, int transA, int transB, int m, int n, int k,
                               float alpha, const float *A, long lda, const float *B, long ldb, float beta,
                               float *C, long ldc, const struct gemm_epilogue *ep, const float *bias, float *sums)
{
    char *ap = (char *)buf_get(&tl_apack, APACK_FLOATS);
    char *bp = (char *)buf_get(&tl_bpack, BPACK_FLOATS);
    unsigned mode = g->mode_enter ? g->mode_enter() : 0;

    for (int jc = 0; jc < n; jc += GEMM_NC) {
        int nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
        for (int pc = 0; pc < k; pc += GEMM_KC) {
            int kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
            g->pack_b(transB, kc, nc, transB ? B + (long)jc * ldb + pc : B + (long)pc * ldb + jc, ldb, bp);
            for (int ic = 0; ic < m; ic += g->mc)
                row_block(g, &mode, transA, ic, m - ic < g->mc ? m - ic : g->mc, jc, nc, pc, kc, k, alpha, A, lda,
                          ap, bp, beta, C, ldc, ep, bias, sums);
        }
    }
    if (g->mode_leave) g->mode_leave(mode);
}

/* The same product by a team (team.h; the enclosing parallel region's
 * threads), C cut by rows into blocks of whole MR panels (team_blocks'
 * count), each thread owning a range of them as a static split by rows
 * would give it.  A step is one K block of one column block (jc, pc, in
 * the serial order): every thread packs its B block for itself (as in that
 * split), then runs the step on the blocks team_take gives it.  Each
 * element is summed as above, k in order, by whichever thread: a block's
 * steps run in order, and its sums (the first column block's steps) too.
 * team: gemm_parallel's. */
static void gemm_team_rows(const struct gemm_kernel *g, const struct team *team, int transA, int transB, int m,
                           int n, int k, float alpha, const float *A, long lda, const float *B, long ldb, float beta,
                           float *C, long ldc, const struct gemm_epilogue *ep, const float *bias, float *sums)
{
    char *ap = (char *)buf_get(&tl_apack, APACK_FLOATS);
    char *bp = (char *)buf_get(&tl_bpack, BPACK_FLOATS);
    unsigned mode = g->mode_enter ? g->mode_enter() : 0;
    const int t = omp_get_thread_num(), nb = team->nb, panels = (m + g->mr - 1) / g->mr;
    int step = 0;

    for (int jc = 0; jc < n; jc += GEMM_NC) {
        int nc = n - jc < GEMM_NC ? n - jc : GEMM_NC;
        for (int pc = 0; pc < k; pc += GEMM_KC, step++) {
            int kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
            g->pack_b(transB, kc, nc, transB ? B + (long)jc * ldb + pc : B + (long)pc * ldb + jc, ldb, bp);
            for (int v = 0, b; (b = team_take(team, t, step, &v)) >= 0;) {
                int ic = (int)((long)panels * b / nb) * g->mr, ie = (int)((long)panels * (b + 1) / nb) * g->mr;
                row_block(g, &mode, transA, ic, (ie < m ? ie : m) - ic, jc, nc, pc, kc, k, alpha, A, lda, ap, bp,
                          beta, C, ldc, ep, bias, sums);
                team_done(team, b, step);
            }
        }
    }
    if (g->mode_leave) g->mode_leave(mode);
}

/* A product cut by columns, by a team: as gemm_team_rows with the roles
 * of the operands swapped, for m rows of at most TEAM_A_BLOCKS blocks of
 * MC (a product of few rows and many columns: GPT-2 124M's forward and
 * input-gradient ones).
 * A step is one K block: every thread packs all of A's rows for it (as
 * each thread of a static split by columns would; the first thread sums
 * them), then runs the step on blocks of C's columns (whole NR panels, at
 * most NC) as team_take gives them out, packing each block's B. */
static void gemm_team_cols(const struct gemm_kernel *g, const struct team *team, int transA, int transB, int m,
                           int n, int k, float alpha, const float *A, long lda, const float *B, long ldb, float beta,
                           float *C, long ldc, const struct gemm_epilogue *ep, const float *bias, float *sums)
{
    char *ap = (char *)buf_get(&tl_apack_all, TEAM_A_BLOCKS * APACK_FLOATS);
    char *bp = (char *)buf_get(&tl_bpack, BPACK_FLOATS);
    const size_t ablock = APACK_FLOATS * sizeof(float);
    unsigned mode = g->mode_enter ? g->mode_enter() : 0;
    const int t = omp_get_thread_num(), nb = team->nb, panels = (n + g->nr - 1) / g->nr;

    for (int pc = 0, step = 0; pc < k; pc += GEMM_KC, step++) {
        int kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
        float beta_p = pc == 0 ? beta : 1.0f; /* later K blocks accumulate */
        const struct gemm_epilogue *last = pc + kc >= k ? ep : NULL;
        for (int ic = 0; ic < m; ic += g->mc) {
            float *s = sums && t == 0 ? sums + ic : NULL;
            if (s && g->mode_leave) g->mode_leave(mode);
            g->pack_a(transA, m - ic < g->mc ? m - ic : g->mc, kc,
                      transA ? A + (long)pc * lda + ic : A + (long)ic * lda + pc, lda, ap + ic / g->mc * ablock, s);
            if (s && g->mode_enter) mode = g->mode_enter();
        }
        for (int v = 0, b; (b = team_take(team, t, step, &v)) >= 0;) {
            int jc = (int)((long)panels * b / nb) * g->nr, je = (int)((long)panels * (b + 1) / nb) * g->nr;
            int nc = (je < n ? je : n) - jc;
            g->pack_b(transB, kc, nc, transB ? B + (long)jc * ldb + pc : B + (long)pc * ldb + jc, ldb, bp);
            for (int ic = 0; ic < m; ic += g->mc)
                block_product(g, &mode, GEMM_CAUSAL_NONE, m - ic < g->mc ? m - ic : g->mc, nc, kc,
                              ap + ic / g->mc * ablock, bp, alpha, beta_p, C + (long)ic * ldc + jc, ldc, last,
                              bias ? bias + jc : NULL);
            team_done(team, b, step);
        }
    }
    if (g->mode_leave) g->mode_leave(mode);
}

/* The blocks a team of nt threads cuts `panels` register panels into: at
 * most `per` panels each, at least 4 a thread where there are panels
 * enough (a slowed thread's last ones are what the others take over),
 * their count a multiple of nt. */
static int team_blocks(int panels, int per, int nt)
{
    int nb = (panels + per - 1) / per;
    if (nb < 4 * nt) nb = 4 * nt;
    nb = (nb + nt - 1) / nt * nt;
    return nb < panels ? nb : panels;
}

static void gemm_serial_blas(int transA, int transB, int m, int n, int k, float alpha, const float *A, long lda,
                             const float *B, long ldb, float beta, float *C, long ldc)
{
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}

/* sums[i] += A[k*lda + i] (i < m), k = 0 .. K-1 in order: op(A) = A^T's
 * rows summed as gemm_serial_packed sums them, where nothing packs A. */
static void col_sums(int m, int K, const float *A, long lda, float *sums)
{
    for (int k = 0; k < K; k++) {
        const float *a = A + (long)k * lda;
#pragma omp simd
        for (int i = 0; i < m; i++) sums[i] += a[i];
    }
}

/* One slice of C on the calling thread, by kernel g (NULL: BLAS); sums:
 * gemm_serial_packed's. */
static void gemm_slice(const struct gemm_kernel *g, int transA, int transB, int m, int n, int k, float alpha,
                       const float *A, long lda, const float *B, long ldb, float beta, float *C, long ldc,
                       const struct gemm_epilogue *ep, const float *bias, float *sums)
{
    if (g)
        gemm_serial_packed(g, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, ep, bias, sums);
    else {
        gemm_serial_blas(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
        if (ep) epilogue_plain(ep, bias, C, ldc, m, n);
        if (sums) col_sums(m, k, A, lda, sums);
    }
}

/* C = beta C for K == 0 (or alpha == 0): no product to form. */
static void scale_c(int m, int n, float beta, float *C, long ldc)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            C[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(long)i * ldc + j];
}

/* Cut C among the threads along M or N in whole register tiles (gm rows,
 * gn columns), whichever leaves the busiest thread fewer tiles (near a
 * tie, the one that reads less): with the packed kernels a team
 * (gemm_team_rows; gemm_team_cols up to TEAM_A_BLOCKS blocks of rows);
 * else one slice per thread, each thread running the serial product on
 * its slice.  Which thread computes an element never
 * changes how it is summed.  sums: each row's as its block is packed, K
 * blocks in order (cut by rows by whichever thread runs the block; cut by
 * columns by the team's thread 0, or the first slice's). */
static void gemm_parallel(const struct gemm_kernel *g, int gm, int gn, int transA, int transB, int M, int N,
                          int K, float alpha, const float *A, long lda, const float *B, long ldb, float beta,
                          float *C, long ldc, const struct gemm_epilogue *ep, float *sums)
{
    int nt = omp_get_max_threads();
    const float *bias = ep ? ep->bias : NULL;
    long mt = (M + gm - 1) / gm, ntile = (N + gn - 1) / gn;
    long cost_m = (mt + nt - 1) / nt * ntile, cost_n = (ntile + nt - 1) / nt * mt;
    int split_m = cost_m <= cost_n;
    /* Near a tie, split the larger operand (A is M x K, B is K x N): the
     * other one is read whole by every thread. */
    if (cost_m * 10 <= cost_n * 11 && cost_n * 10 <= cost_m * 11) split_m = M >= N;
    int tiles = (int)(split_m ? mt : ntile);
    if (nt > tiles) nt = tiles;
    struct team team;
    long ksteps = (K + GEMM_KC - 1) / GEMM_KC;
    if (g && split_m &&
        team_init(&team, team_blocks((int)mt, g->mc / g->mr, nt), nt, (N + GEMM_NC - 1) / GEMM_NC * ksteps)) {
#pragma omp parallel num_threads(nt)
        gemm_team_rows(g, &team, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, bias, sums);
        return;
    }
    if (g && !split_m && M <= TEAM_A_BLOCKS * g->mc &&
        team_init(&team, team_blocks((int)ntile, GEMM_NC / g->nr, nt), nt, ksteps)) {
#pragma omp parallel num_threads(nt)
        gemm_team_cols(g, &team, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, bias, sums);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int t = omp_get_thread_num(), T = omp_get_num_threads();
        int t0 = (int)((long)tiles * t / T), t1 = (int)((long)tiles * (t + 1) / T);
        if (split_m) {
            int m0 = t0 * gm, m1 = t1 * gm < M ? t1 * gm : M;
            if (m1 > m0)
                gemm_slice(g, transA, transB, m1 - m0, N, K, alpha, transA ? A + m0 : A + (long)m0 * lda, lda,
                           B, ldb, beta, C + (long)m0 * ldc, ldc, ep, bias, sums ? sums + m0 : NULL);
        } else {
            int n0 = t0 * gn, n1 = t1 * gn < N ? t1 * gn : N;
            if (n1 > n0)
                gemm_slice(g, transA, transB, M, n1 - n0, K, alpha, A, lda, transB ? B + (long)n0 * ldb : B + n0,
                           ldb, beta, C + n0, ldc, ep, bias ? bias + n0 : NULL, n0 == 0 ? sums : NULL);
        }
    }
}

/* The product by kernel g (NULL: BLAS); sums (transA; NULL: none): op(A)'s
 * rows summed into it, k in order. */
static void gemm_by(const struct gemm_kernel *g, int transA, int transB, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                    const struct gemm_epilogue *ep, float *sums)
{
    if (M <= 0) return;
    if (N <= 0) {
        if (sums) col_sums(M, K, A, lda, sums);
        return;
    }
    if (ep && !ep->bias && !ep->round_bf16) ep = NULL;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        if (ep) epilogue_plain(ep, ep->bias, C, ldc, M, N);
        if (sums) col_sums(M, K, A, lda, sums);
        return;
    }
    if (team_threads() > 1 && (long)M * N * K >= GEMM_PAR_MIN)
        gemm_parallel(g, g ? g->mr : 16, g ? g->nr : 16, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta,
                      C, ldc, ep, sums);
    else
        gemm_slice(g, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, ep, ep ? ep->bias : NULL,
                   sums);
}

void gemm_f32(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc)
{
    gemm_by(gemm_path(GEMM_FP32), transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

void gemm_bf16(int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc)
{
    gemm_by(gemm_path(GEMM_BF16), transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL, NULL);
}

void gemm_f32_ep(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                 float *C, int ldc, const struct gemm_epilogue *ep)
{
    gemm_by(gemm_path(GEMM_FP32), transA, transB, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, ep, NULL);
}

void gemm_bf16_ep(int transA, int transB, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                  float *C, int ldc, const struct gemm_epilogue *ep)
{
    gemm_by(gemm_path(GEMM_BF16), transA, transB, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, ep, NULL);
}

void gemm_f32_wgrad(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                    float *sums)
{
    gemm_by(gemm_path(GEMM_FP32), 1, 0, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc, NULL, sums);
}

void gemm_bf16_wgrad(int M, int N, int K, const float *A, int lda, const float *B, int ldb, float *C, int ldc,
                     float *sums)
{
    gemm_by(gemm_path(GEMM_BF16), 1, 0, M, N, K, 1.0f, A, lda, B, ldb, 1.0f, C, ldc, NULL, sums);
}

void gemm_f64(int transA, int transB, int M, int N, int K, double alpha, const double *A, int lda,
              const double *B, int ldb, double beta, double *C, int ldc)
{
    cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, M, N, K,
                alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ------------------------------------------------------------ packed operands */
/* gemm.h: op(X) packed once, multiplied many times.  K blocks of GEMM_KC,
 * each packed as gemm_serial_packed packs its blocks (rows, or columns, in
 * panels of `reg`), one after the other. */
static size_t round64(size_t b) { return (b + 63) / 64 * 64; }

/* Bytes of one K block of kc values of k over `rows` rows (A) or columns (B). */
static size_t block_bytes(const struct gemm_kernel *g, int reg, int rows, int kc)
{
    return round64((size_t)((rows + reg - 1) / reg) * (size_t)reg * (size_t)kp_of(g, kc) * (size_t)g->elem);
}

static size_t packed_bytes(const struct gemm_kernel *g, int reg, int rows, int k)
{
    if (!g) return round64((size_t)rows * (size_t)k * sizeof(float));
    size_t b = 0;
    for (int pc = 0; pc < k; pc += GEMM_KC) b += block_bytes(g, reg, rows, k - pc < GEMM_KC ? k - pc : GEMM_KC);
    return b;
}

size_t gemm_pack_a_bytes(enum gemm_arith a, int m, int k)
{
    const struct gemm_kernel *g = gemm_path(a);
    return packed_bytes(g, g ? g->mr : 1, m, k);
}

size_t gemm_pack_b_bytes(enum gemm_arith a, int k, int n)
{
    const struct gemm_kernel *g = gemm_path(a);
    return packed_bytes(g, g ? g->nr : 1, n, k);
}

/* op(X) packed as A (side_a: m = rows, k) or as B (k, n = rows), its K
 * blocks one after the other; on the BLAS path op(X) copied row-major. */
static void pack_operand(enum gemm_arith a, int side_a, int trans, int rows, int k, const float *X, long ld,
                         char *dst)
{
    const struct gemm_kernel *g = gemm_path(a);
    int r = side_a ? rows : k, c = side_a ? k : rows; /* op(X) is r x c */
    if (!g) {
        float *d = (float *)dst;
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++) d[(long)i * c + j] = trans ? X[(long)j * ld + i] : X[(long)i * ld + j];
        return;
    }
    int k_down = side_a ? trans : !trans; /* the values of k run down X's rows */
    for (int pc = 0; pc < k; pc += GEMM_KC) {
        int kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
        const float *x = k_down ? X + (long)pc * ld : X + pc;
        if (side_a) g->pack_a(trans, rows, kc, x, ld, dst, NULL);
        else g->pack_b(trans, kc, rows, x, ld, dst);
        dst += block_bytes(g, side_a ? g->mr : g->nr, rows, kc);
    }
}

void gemm_pack_a(enum gemm_arith a, int transA, int m, int k, const float *A, int lda, void *ap)
{
    pack_operand(a, 1, transA, m, k, A, lda, ap);
}

void gemm_pack_b(enum gemm_arith a, int transB, int k, int n, const float *B, int ldb, void *bp)
{
    pack_operand(a, 0, transB, n, k, B, ldb, bp);
}

void gemm_packed_causal(enum gemm_arith a, enum gemm_causal cut, int m, int n, int k, float alpha, const void *ap,
                        const void *bp, float beta, float *C, int ldc)
{
    const struct gemm_kernel *g = gemm_path(a);
    if (m <= 0 || n <= 0) return;
    if (k <= 0 || alpha == 0.0f) {
        scale_c(m, n, beta, C, ldc);
        return;
    }
    if (!g) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, ap, k, bp, n, beta, C, ldc);
        return;
    }
    if (k > GEMM_KC) cut = GEMM_CAUSAL_NONE; /* (a cut on one K block only) */
    unsigned mode = g->mode_enter ? g->mode_enter() : 0;
    const char *apc = ap, *bpc = bp;
    for (int pc = 0; pc < k; pc += GEMM_KC) {   /* the K blocks in order, as gemm_serial_packed sums them */
        int kc = k - pc < GEMM_KC ? k - pc : GEMM_KC;
        block_product(g, &mode, cut, m, n, kc, apc, bpc, alpha, pc == 0 ? beta : 1.0f, C, ldc, NULL, NULL);
        apc += block_bytes(g, g->mr, m, kc);
        bpc += block_bytes(g, g->nr, n, kc);
    }
    if (g->mode_leave) g->mode_leave(mode);
}

void gemm_packed(enum gemm_arith a, int m, int n, int k, float alpha, const void *ap, const void *bp, float beta,
                 float *C, int ldc)
{
    gemm_packed_causal(a, GEMM_CAUSAL_NONE, m, n, k, alpha, ap, bp, beta, C, ldc);
}

const char *gemm_backend_name(enum gemm_arith a)
{
    static char name[160];
    const struct gemm_kernel *g = gemm_path(a);
    if (g) return g->name;
    snprintf(name, sizeof name, "cblas_sgemm of %s (TRIAD_GEMM=blas, one BLAS thread per OpenMP thread)", BLAS_NAME);
    return name;
}

enum { PROBE_N = 1024 }; /* gemm_peak_gflops: three PROBE_N^2 matrices */

size_t gemm_probe_bytes(void) { return 3 * (size_t)PROBE_N * PROBE_N * sizeof(float); }

double gemm_peak_gflops(enum gemm_arith a)
{
    enum { S = PROBE_N };
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
        (a == GEMM_BF16 ? gemm_bf16 : gemm_f32)(0, 1, S, S, S, 1.0f, A, S, B, S, 0.0f, C, S);
        double dt = omp_get_wtime() - t0;
        if (rep > 0 && dt > 0 && 2.0 * S * S * S / dt / 1e9 > best) best = 2.0 * S * S * S / dt / 1e9;
    }
    free(A); free(B); free(C);
    return best;
}
