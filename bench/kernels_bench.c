/* kernels_bench.c -- time every float kernel of backend.h at one model shape.
 *
 * Default: the "small config" B=8 T=256 C=256 NH=4 V=4096 on 2 threads
 * (OMP_NUM_THREADS overrides).  Prints the best of REPS runs in ms, and the
 * rate: GB/s of compulsory traffic for the memory-bound kernels, GFLOP/s of
 * useful (causal) work for matmuls and attention.
 *
 * Build: make bench/kernels_bench (after configure).
 * Usage: kernels_bench [B T C NH V]
 */
#include "backend.h"
#include "gemm.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20

static float *fbuf(size_t n, float scale)
{
    float *p = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
    if (!p) {
        fprintf(stderr, "kernels_bench: out of memory\n");
        exit(1);
    }
    uint32_t s = 12345u + (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = scale * ((float)(s >> 8) * (1.0f / 16777216.0f) * 2.0f - 1.0f);
    }
    return p;
}

/* Best time over REPS of a statement, in seconds. */
#define TIME(best, stmt)                                       \
    do {                                                       \
        stmt;                                                  \
        best = 1e30;                                           \
        for (int r_ = 0; r_ < REPS; r_++) {                    \
            double t0_ = omp_get_wtime();                      \
            stmt;                                              \
            double dt_ = omp_get_wtime() - t0_;                \
            if (dt_ < best) best = dt_;                        \
        }                                                      \
    } while (0)

static double total_ms = 0;

static void report(const char *name, double sec, double bytes, double flops)
{
    total_ms += sec * 1e3;
    if (flops > 0)
        printf("%-22s %9.3f ms %9.1f GFLOP/s\n", name, sec * 1e3, flops / sec * 1e-9);
    else
        printf("%-22s %9.3f ms %9.1f GB/s\n", name, sec * 1e3, bytes / sec * 1e-9);
}

int main(int argc, char **argv)
{
    int B = 8, T = 256, C = 256, NH = 4, V = 4096;
    if (argc == 6) B = atoi(argv[1]), T = atoi(argv[2]), C = atoi(argv[3]), NH = atoi(argv[4]), V = atoi(argv[5]);
    if (!getenv("OMP_NUM_THREADS")) omp_set_num_threads(2);
    int N = B * T, HS = C / NH;
    size_t NC = (size_t)N * C, NV = (size_t)N * V, ATT = (size_t)B * NH * T; /* attention's log-sum-exp */
    printf("kernels_bench: B=%d T=%d C=%d NH=%d V=%d, %d threads, gemm %s\n", B, T, C, NH, V,
           omp_get_max_threads(), gemm_backend_name(GEMM_FP32));

    int32_t *tok = malloc((size_t)N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tok[n] = (int32_t)((n * 7919u) % (unsigned)V);
    float *wte = fbuf((size_t)V * C, 0.02f), *wpe = fbuf((size_t)T * C, 0.02f);
    float *x = fbuf(NC, 1), *y = fbuf(NC, 1), *dx = fbuf(NC, 1), *dy = fbuf(NC, 1);
    float *mean = fbuf(N, 0), *rstd = fbuf(N, 0), *w = fbuf(4 * (size_t)C * C, 0.02f),
          *dw = fbuf(4 * (size_t)C * C, 0), *bias = fbuf(4 * C, 0.02f), *db = fbuf(4 * C, 0);
    float *qkv = fbuf(3 * NC, 1), *dqkv = fbuf(3 * NC, 0), *att = fbuf(ATT, 0);
    float *h = fbuf(4 * NC, 1), *gh = fbuf(4 * NC, 1), *dh = fbuf(4 * NC, 0);
    float *lg = fbuf(NV, 3), *dlg = fbuf(NV, 0), *mx = fbuf(N, 0), *sm = fbuf(N, 0),
          *tl = fbuf(N, 0), *loss = fbuf(N, 0);
    float *dwte = fbuf((size_t)V * C, 0), *dwpe = fbuf((size_t)T * C, 0);
    size_t P = (size_t)V * C + (size_t)T * C + 4 * (12 * (size_t)C * C); /* ~ a 4-layer model */
    float *p = fbuf(P, 0.02f), *g = fbuf(P, 0.01f), *m = fbuf(P, 0), *v = fbuf(P, 0);
    double s, f = 4.0;

    TIME(s, encoder_forward(x, tok, wte, wpe, B, T, C, 0, V));
    report("encoder_forward", s, 3 * NC * f, 0);
    TIME(s, encoder_backward(dwte, dwpe, dx, tok, B, T, C, 0, V));
    report("encoder_backward", s, 4 * NC * f, 0);
    TIME(s, layernorm_forward(y, mean, rstd, x, bias, bias, N, C));
    report("layernorm_forward", s, 2 * NC * f, 0);
    TIME(s, layernorm_backward(dx, dw, db, dy, x, bias, mean, rstd, N, C));
    report("layernorm_backward", s, 4 * NC * f, 0);
    TIME(s, matmul_forward(qkv, x, w, bias, N, C, 3 * C));
    report("matmul_forward qkv", s, 0, 2.0 * N * C * 3 * C);
    TIME(s, matmul_backward(dx, dw, db, qkv, x, w, N, C, 3 * C));
    report("matmul_backward qkv", s, 0, 4.0 * N * C * 3 * C);
    double attflops = 4.0 * B * NH * ((double)T * (T + 1) / 2) * HS;
    TIME(s, attention_forward(y, att, qkv, qkv + C, 3 * C, B, T, 0, 0, T, NH, NH, C / NH, ATT_CAUSAL));
    report("attention_forward", s, 0, attflops);
    TIME(s, attention_backward(dqkv, dqkv + C, dy, y, qkv, qkv + C, 3 * C, att, B, T, 0, 0, T, NH, NH, C / NH, ATT_CAUSAL));
    report("attention_backward", s, 0, 2 * attflops);
    TIME(s, gelu_forward(gh, h, 4 * NC));
    report("gelu_forward", s, 2 * 4 * NC * f, 0);
    TIME(s, gelu_backward(dh, h, gh, 4 * NC));
    report("gelu_backward", s, 3 * 4 * NC * f, 0);
    TIME(s, residual_forward(y, x, dx, NC));
    report("residual_forward", s, 3 * NC * f, 0);
    /* (sumexp leaves its exponentials over lg: each round runs on the last one's, finite values in (0, 1]) */
    TIME(s, (crossentropy_max(mx, lg, N, V, 0, V), crossentropy_sumexp(sm, tl, lg, mx, tok, N, V, 0, V),
             crossentropy_loss(loss, mx, sm, tl, N)));
    report("crossentropy fwd (3)", s, 2 * NV * f, 0);
    TIME(s, crossentropy_backward(dlg, lg, sm, tok, 1.0f / N, N, V, 0, V));
    report("crossentropy_backward", s, 2 * NV * f, 0);
    TIME(s, adamw_update(p, g, 1.0f, m, v, P, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0));
    report("adamw_update", s, 7 * P * f, 0);
    volatile double sink;
    TIME(s, sink = sumsq(g, P));
    (void)sink;
    report("sumsq", s, P * f, 0);
    TIME(s, scale_inplace(g, P, 1.0f));
    report("scale_inplace", s, 2 * P * f, 0);
    printf("%-22s %9.3f ms (sum of the rows above, not one step)\n", "total", total_ms);
    return 0;
}
