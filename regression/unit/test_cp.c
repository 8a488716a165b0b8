/* test_cp.c -- ring attention (cp.c) over real MPI ranks against attention
 * over the whole sequence.
 *
 * Run on 4 ranks.  For cp = 2 and 4 (dp = 4 / cp groups side by side), gpt2
 * heads and grouped-query ones: every rank draws the same whole batch,
 * keeps its rows (chunks r and 2cp-1-r) and runs the ring; its out, lse and
 * dqkv must be the whole sequence's at its positions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "comm.h"
#include "cp.h"
#include "device.h"
#include "mpi_test.h"
#include "rng.h"
#include "tap.h"
#include "topo.h"

enum { B = 2, T = 24, HS = 8 };
static const double TOL = 1e-5;

static double maxdev(const float *a, const float *b, size_t n, double scale)
{
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]) / scale);
    return e;
}

static void check(int cp, int NH, int NKV)
{
    struct grid g;
    grid_init(&g, 1, cp, 4 / cp, 1, 1);
    struct comm cm;
    comm_init(&cm, &g);
    struct cp_dims d = {.rank = g.cp_rank, .size = cp, .B = B, .Tl = T / cp, .NH = NH, .NKV = NKV, .HS = HS,
                        .prec = PREC_FP32};
    struct cp_time tm = {0};
    int W = (NH + 2 * NKV) * HS, C = NH * HS, Tl = T / cp;
    size_t BT = (size_t)B * T, BTl = (size_t)B * Tl;
    float *qkv = malloc(BT * W * sizeof(float)), *dout = malloc(BT * C * sizeof(float));
    for (size_t i = 0; i < BT * W; i++) qkv[i] = (float)rng_normal(5, 1, i);
    for (size_t i = 0; i < BT * C; i++) dout[i] = (float)rng_normal(5, 2, i);
    float *o = malloc(BT * C * sizeof(float)), *l = malloc((size_t)B * NH * T * sizeof(float));
    float *dq = malloc(BT * W * sizeof(float));
    attention_forward(o, l, qkv, qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    attention_backward(dq, dq + NH * HS, dout, o, qkv, qkv + NH * HS, W, l, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);

    /* this rank's rows */
    float *lq = malloc(BTl * W * sizeof(float)), *ldo = malloc(BTl * C * sizeof(float));
    float *lo = malloc(BTl * C * sizeof(float)), *ll = malloc((size_t)B * NH * Tl * sizeof(float));
    float *ldq = malloc(BTl * W * sizeof(float)), *buf = malloc(cp_scratch_floats(&d) * sizeof(float));
    float *wo = malloc(BTl * C * sizeof(float)), *wl = malloc((size_t)B * NH * Tl * sizeof(float));
    float *wdq = malloc(BTl * W * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int r = 0; r < Tl; r++) {
            size_t src = (size_t)b * T + cp_position(cp, g.cp_rank, Tl, r), dst = (size_t)b * Tl + r;
            memcpy(lq + dst * W, qkv + src * W, W * sizeof(float));
            memcpy(ldo + dst * C, dout + src * C, C * sizeof(float));
            memcpy(wo + dst * C, o + src * C, C * sizeof(float));
            memcpy(wdq + dst * W, dq + src * W, W * sizeof(float));
            for (int h = 0; h < NH; h++)
                wl[((size_t)b * NH + h) * Tl + r] = l[((size_t)b * NH + h) * T + cp_position(cp, g.cp_rank, Tl, r)];
        }
    cp_attention_forward(&d, &cpu_device, &cm, &tm, buf, lo, ll, lq);
    cp_attention_backward(&d, &cpu_device, &cm, &tm, buf, ldq, ldo, lo, lq, ll);
    double e[3] = {maxdev(lo, wo, BTl * C, 1), maxdev(ll, wl, (size_t)B * NH * Tl, 1),
                   maxdev(ldq, wdq, BTl * W, 1)}, all[3];
    MPI_Allreduce(e, all, 3, MPI_DOUBLE, MPI_MAX, g.world_comm);
    if (g.rank == 0)
        tap_ok(all[0] < TOL && all[1] < TOL && all[2] < TOL,
               "cp = %d, NH %d NKV %d: ring attention = the whole sequence's at each rank's positions "
               "(out %.1e, lse %.1e, dqkv %.1e)", cp, NH, NKV, all[0], all[1], all[2]);
    free(qkv), free(dout), free(o), free(l), free(dq), free(lq), free(ldo), free(lo), free(ll), free(ldq);
    free(buf), free(wo), free(wl), free(wdq);
    comm_free(&cm);
    grid_free(&g);
}

int main(int argc, char **argv)
{
    if (mpi_test_begin(&argc, &argv, 4) < 0) return 0;
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check(2, 4, 4);
    check(4, 4, 4);
    check(2, 4, 2);
    check(4, 6, 1);
    return mpi_test_end(rank);
}
