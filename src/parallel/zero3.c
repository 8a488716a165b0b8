/* zero3.c -- ZeRO-3's layer gathers (zero3.h). */
#include "zero3.h"

#include <string.h>

#include "pipeline.h"

size_t zero3_buffer_floats(const struct model_dims *d)
{
    return ZERO3_BUFFERS * ((model_layer_floats(d) + 15) / 16 * 16);
}

static void settle(struct zero3 *z, int b)
{
    if (!z->busy[b]) return;
    for (int k = 0; k < z->zl->nparts; k++) comm_wait(z->c, z->zl->part[k]->group, CO_ALLGATHER, 1, &z->req[b][k]);
    z->busy[b] = 0;
}

/* Start gathering local layer j into buffer b: for each part, this rank's
 * elements of the part's ranges copied from its shares to their place in
 * the packed layer and rounded to the compute precision, then an in-place
 * all-gather over the part's replicas. */
static void start(struct zero3 *z, int b, int j)
{
    settle(z, b); /* (a gather into b still in flight: a prefetch the caller did not ask for after all) */
    const struct zero_layers *zl = z->zl;
    for (int k = 0; k < zl->nparts; k++) {
        const struct flat_range *r = zero_layer_ranges(zl, j, k);
        const int *counts = zl->counts + zero_layer_run(zl, j, k), *displs = zl->displs + zero_layer_run(zl, j, k);
        int me = zl->part[k]->rank;
        float *mine = z->buf[b] + zero_layer_off(zl, j, k) + displs[me], *dst = mine;
        for (int i = 0; i < zl->first[k + 1] - zl->first[k]; i++) {
            size_t lo, hi, s;
            if (!optim_slice_part(z->o, r[i].at, r[i].n, &lo, &hi, &s)) continue;
            z->m->k->copy(dst, z->o->master_mem + s, (hi - lo) * sizeof(float));
            dst += hi - lo;
        }
        z->m->k->lp_round(z->m->d.prec, mine, (size_t)counts[me]);
        comm_iallgatherv_f32(z->c, zl->part[k]->group, z->buf[b] + zero_layer_off(zl, j, k), counts, displs, &z->req[b][k]);
    }
    z->busy[b] = 1;
}

/* The policy the run follows and the planner replays (zero3_gathers): a
 * request for layer j, then `next`.  held[b] is the layer buffer b holds
 * (-1: none, or stale), *current the buffer handed out last.  j is taken
 * from the buffer that holds it, else gathered into the other one than
 * *current (the caller is done with both, but j may be in *current); next,
 * if not held, into the buffer j is not in.  The buffers to fill are
 * listed in fill[] (held[] then names their new layers); their number is
 * returned and j's buffer left in *current. */
static int policy(int held[ZERO3_BUFFERS], int *current, int j, int next, int fill[ZERO3_BUFFERS])
{
    int n = 0, b = held[0] == j ? 0 : held[1] == j ? 1 : -1;
    if (b < 0) {
        b = (*current + 1) % ZERO3_BUFFERS;
        held[b] = j;
        fill[n++] = b;
    }
    *current = b;
    int other = (b + 1) % ZERO3_BUFFERS;
    if (next >= 0 && held[0] != next && held[1] != next) {
        held[other] = next;
        fill[n++] = other;
    }
    return n;
}

static const float *layer_params(void *ctx, int j, int next)
{
    struct zero3 *z = ctx;
    if (z->seen != z->m->param_version) { /* the parameters changed: every copy is stale */
        for (int b = 0; b < ZERO3_BUFFERS; b++) z->layer[b] = -1;
        z->seen = z->m->param_version;
    }
    int fill[ZERO3_BUFFERS], n = policy(z->layer, &z->current, j, next, fill);
    for (int i = 0; i < n; i++) start(z, fill[i], z->layer[fill[i]]);
    settle(z, z->current);
    return z->buf[z->current];
}

void zero3_gathers(const struct pp_action *a, int n, int Lc, long *count)
{
    int held[ZERO3_BUFFERS] = {-1, -1}, current = 0, fill[ZERO3_BUFFERS];
    for (int i = 0; i < n; i++) {
        if (a[i].kind != PP_FWD && a[i].kind != PP_BWD) continue;
        for (int k = 0; k < Lc; k++) { /* the layers of the chunk, in the pass's order (model.c) */
            int fwd = a[i].kind == PP_FWD, kk = fwd ? k : Lc - 1 - k, j = a[i].chunk * Lc + kk;
            int next = fwd ? (kk + 1 < Lc ? j + 1 : -1) : (kk > 0 ? j - 1 : -1);
            int f = policy(held, &current, j, next, fill);
            for (int q = 0; q < f; q++) count[held[fill[q]]]++;
        }
    }
}

void zero3_begin(struct zero3 *z)
{
    for (int b = 0; b < ZERO3_BUFFERS && z->m; b++) z->layer[b] = -1; /* each step starts cold: as planned */
}

void zero3_init(struct zero3 *z, struct model *m, struct optim *o, struct comm *c, const struct zero_layers *zl)
{
    memset(z, 0, sizeof *z);
    z->m = m;
    z->o = o;
    z->c = c;
    z->zl = zl;
    size_t n = (model_layer_floats(&m->d) + 15) / 16 * 16;
    float *mem = m->k->alloc(ZERO3_BUFFERS * n * sizeof(float));
    for (int b = 0; b < ZERO3_BUFFERS; b++) {
        z->buf[b] = mem + (size_t)b * n;
        z->layer[b] = -1;
    }
    m->layer_params = layer_params;
    m->layer_params_ctx = z;
}

void zero3_settle(struct zero3 *z)
{
    for (int b = 0; b < ZERO3_BUFFERS && z->m; b++) settle(z, b);
}

void zero3_free(struct zero3 *z)
{
    if (!z->m) return;
    zero3_settle(z);
    z->m->k->release(z->buf[0]);
    z->m->layer_params = NULL;
    z->m->layer_params_ctx = NULL;
    memset(z, 0, sizeof *z);
}
