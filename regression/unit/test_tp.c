/* test_tp.c -- every tensor-parallel layer against its serial twin.
 *
 * Run on 4 ranks.  For tp = 2 and 4, with and without sequence parallelism,
 * the sharded model and a serial copy (tp = 1, on every rank) start from the
 * same weights and see the same micro-batch; the loss, each layer's output
 * and every gradient, mapped back to its logical position, must agree. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "dp.h"
#include "model.h"
#include "mpi_test.h"
#include "optim.h"
#include "rng.h"
#include "tap.h"
#include "whole_model.h"
#include "topo.h"

enum { B = 2, T = 8, L = 2, C = 16, NH = 4, V = 50 };
static const double TOL = 1e-5;

/* Weights of order 0.3 from the logical position, so every shard of every
 * decomposition holds the serial model's values. */
static void set_params(struct model *m)
{
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t rows, cols;
        param_local_shape(&m->d, (enum param_id)i, &rows, &cols);
        int layers = param_table[i].per_layer ? m->d.Lp : 1;
        for (int l = 0; l < layers; l++)
            for (size_t r = 0; r < rows; r++)
                for (size_t c = 0; c < cols; c++) {
                    size_t lr, lc;
                    param_logical_index(&m->d, (enum param_id)i, r, c, &lr, &lc);
                    double v = lr < (i == P_WTE ? (size_t)V : (size_t)-1)
                                   ? 0.3 * rng_normal(17, (uint64_t)(i * 100 + l), lr * 4096 + lc) : 0;
                    if (i == P_LN1W || i == P_LN2W || i == P_LNFW) v += 1;
                    m->param[i][(size_t)l * rows * cols + r * cols + c] = (float)v;
                }
    }
}

static void dims(struct model_dims *d, int tp, int tp_rank, int sp)
{
    *d = (struct model_dims){.L = L, .C = C, .NH = NH, .HS = C / NH, .T = T, .Tl = T, .cp = 1, .V = V, .Vp = 128 * tp,
                             .tp = tp, .tp_rank = tp_rank, .sp = sp, .pp = 1, .pp_rank = 0, .dpcp = 1, .v = 1, .Lc = L, .Lp = L,
                             .NKV = NH, .F = 4 * C, .tied = 1, .eps = 1e-5f};
}

/* max |tp - serial| / max |serial| over tensor id, layer l (max over ranks). */
static double grad_dev(const struct model *mt, const struct model *ms, int id, int l, MPI_Comm world)
{
    size_t rows, cols, srows, scols;
    param_local_shape(&mt->d, (enum param_id)id, &rows, &cols);
    param_shape(&ms->d, (enum param_id)id, &srows, &scols);
    const float *gt = mt->grad[id] + (size_t)l * rows * cols, *gs = ms->grad[id] + (size_t)l * srows * scols;
    double scale = 1e-30, err = 0;
    for (size_t k = 0; k < srows * scols; k++) scale = fmax(scale, fabs(gs[k]));
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t lr, lc;
            param_logical_index(&mt->d, (enum param_id)id, r, c, &lr, &lc);
            double want = lr < srows ? gs[lr * scols + lc] : 0; /* padding rows: no gradient */
            err = fmax(err, fabs(gt[r * cols + c] - want));
        }
    double dev = err / scale, all;
    MPI_Allreduce(&dev, &all, 1, MPI_DOUBLE, MPI_MAX, world);
    return all;
}

static void check(int tp, int sp, const int32_t *in, const int32_t *tg, int rank)
{
    struct grid g;
    grid_init(&g, tp, 1, 4 / tp, 1, 1);
    struct comm cm;
    comm_init(&cm, &g);
    struct model_dims dt, ds;
    dims(&dt, tp, g.tp_rank, sp);
    dims(&ds, 1, 0, 0);
    struct model mt, ms;
    model_init(&mt, &dt, &cpu_device, B, (struct model_buffers){.slots = 1}, 1);
    model_init(&ms, &ds, &cpu_device, B, (struct model_buffers){.slots = 1}, 1);
    set_params(&mt);
    set_params(&ms);
    const char *what = sp ? "tp+sp" : "tp";

    double lt = whole_forward(&mt, &cm, in, tg), ls = whole_forward(&ms, NULL, in, tg);
    double dl = fabs(lt - ls) / fabs(ls), dlmax;
    MPI_Allreduce(&dl, &dlmax, 1, MPI_DOUBLE, MPI_MAX, g.world_comm);
    /* each layer's output: this rank's rows of the residual stream */
    double fdev = 0;
    size_t row0 = sp ? (size_t)g.tp_rank * mt.Ns : 0, SC = (size_t)mt.Ns * C, NC = (size_t)ms.N * C;
    for (int l = 0; l < L; l++) {
        const float *ot = mt.slot[0].residual3 + l * SC, *os = ms.slot[0].residual3 + l * NC + row0 * C;
        for (size_t k = 0; k < SC; k++) fdev = fmax(fdev, fabs(ot[k] - os[k]) / (1 + fabs(os[k])));
    }
    double fmaxdev;
    MPI_Allreduce(&fdev, &fmaxdev, 1, MPI_DOUBLE, MPI_MAX, g.world_comm);
    if (rank == 0) {
        tap_ok(dlmax < TOL, "%s = %d: loss %.8f vs serial %.8f (rel %.1e)", what, tp, lt, ls, dlmax);
        tap_ok(fmaxdev < TOL, "%s = %d: forward output of every layer within %.0e (worst %.1e)", what, tp, TOL,
               fmaxdev);
    }

    model_zero_grad(&mt);
    model_zero_grad(&ms);
    whole_backward(&mt, &cm, 1.0f / (B * T));
    whole_backward(&ms, NULL, 1.0f / (B * T));
    model_merge_embedding_grad(&mt);
    model_merge_embedding_grad(&ms);
    dp_reduce_tp_partial(&mt, &cm);
    for (int l = 0; l < L; l++) {
        double worst = 0;
        int worst_id = 0;
        for (int id = 0; id < NUM_PARAMS; id++) {
            if (!param_table[id].per_layer) continue;
            double dev = grad_dev(&mt, &ms, id, l, g.world_comm);
            if (dev > worst) { worst = dev; worst_id = id; }
        }
        if (rank == 0)
            tap_ok(worst < TOL, "%s = %d: layer %d, all 12 gradients within %.0e (worst %.1e in %s)", what, tp, l,
                   TOL, worst, param_table[worst_id].name);
    }
    double worst = 0;
    int worst_id = 0;
    for (int id = 0; id < NUM_PARAMS; id++) {
        if (param_table[id].per_layer) continue;
        double dev = grad_dev(&mt, &ms, id, 0, g.world_comm);
        if (dev > worst) { worst = dev; worst_id = id; }
    }
    if (rank == 0)
        tap_ok(worst < TOL, "%s = %d: embedding (vocabulary-parallel), positions, final LayerNorm gradients "
               "within %.0e (worst %.1e in %s)", what, tp, TOL, worst, param_table[worst_id].name);
    model_free(&mt);
    model_free(&ms);
    grid_free(&g);
}

int main(int argc, char **argv)
{
    int rank = mpi_test_begin(&argc, &argv, 4);
    if (rank < 0) return 0;
    int32_t in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_uniform(3, 1, (uint64_t)i) * V);
        tg[i] = (int32_t)(rng_uniform(3, 2, (uint64_t)i) * V);
    }
    for (int tp = 2; tp <= 4; tp *= 2)
        for (int sp = 0; sp <= 1; sp++) check(tp, sp, in, tg, rank);
    return mpi_test_end(rank);
}
