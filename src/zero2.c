/* zero2.c -- per-layer gradient reduce-scatter into the optimizer's slice. */
#include "zero2.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

size_t zero2_buffer_floats(const struct model_dims *d)
{
    return ZERO2_BUFFERS * ((model_layer_floats(d) + 15) / 16 * 16);
}

/* Wait for buffer b's reduction and add this rank's part to gshard. */
static void retire(struct zero2 *z, int b)
{
    if (z->layer[b] < 0) return;
    z->wait_s += comm_wait(z->c, CG_DP, CO_REDUCE_SCATTER, 1, &z->req[b]);
    optim_add_to_shard(z->o, z->ranges + (size_t)z->layer[b] * z->nranges, z->nranges, z->work[b]);
    z->layer[b] = -1;
}

static float *hand_out(void *ctx, int j)
{
    struct zero2 *z = ctx;
    int b = z->next;
    retire(z, b); /* the oldest: its reduction has had a layer's backward to progress */
    z->layer[b] = j;
    z->next = (b + 1) % ZERO2_BUFFERS;
    z->m->k->zero(z->work[b], z->layer_floats * sizeof(float));
    return z->work[b];
}

static void layer_done(void *ctx, int j)
{
    struct zero2 *z = ctx;
    int b = (z->next + ZERO2_BUFFERS - 1) % ZERO2_BUFFERS; /* the one just handed out */
    struct model *m = z->m;
    if (m->d.sp) { /* the LayerNorm gradients are partial sums over tp: complete them first */
        float *p = z->work[b];
        for (int id = 0; id < NUM_PARAMS; id++) {
            if (!param_table[id].per_layer) continue;
            size_t per = m->size[id] / (size_t)m->d.Lp;
            if (param_sp_partial(&m->d, (enum param_id)id)) comm_allreduce_sum_f32(z->c, CG_TP, p, per);
            p += per;
        }
    }
    /* in place: this rank's sum lands at the start of the buffer */
    comm_ireduce_scatter_f32(z->c, CG_DP, NULL, z->work[b], z->counts + (size_t)j * z->c->grid->dp, &z->req[b]);
    int other = (b + 1) % ZERO2_BUFFERS, done;
    if (z->layer[other] >= 0 && !z->c->staged) /* progress (a staged one completes in comm_wait only) */
        MPI_CHECK(MPI_Test(&z->req[other], &done, MPI_STATUS_IGNORE));
}

void zero2_init(struct zero2 *z, struct model *m, struct optim *o, struct comm *c)
{
    memset(z, 0, sizeof *z);
    z->enabled = o->zero2 && m->d.Lp > 0;
    if (!z->enabled) return;
    z->m = m;
    z->o = o;
    z->c = c;
    z->layer_floats = model_layer_floats(&m->d);
    int Lp = m->d.Lp, dp = c->grid->dp;
    for (int id = 0; id < NUM_PARAMS; id++) z->nranges += param_table[id].per_layer;
    z->ranges = xcalloc((size_t)Lp * z->nranges, sizeof *z->ranges);
    z->counts = xcalloc((size_t)Lp * dp, sizeof *z->counts);
    for (int j = 0; j < Lp; j++) {
        struct flat_range *r = z->ranges + (size_t)j * z->nranges;
        for (int id = 0; id < NUM_PARAMS; id++) {
            if (!param_table[id].per_layer) continue;
            size_t per = m->size[id] / (size_t)Lp;
            r->at = (size_t)(m->param[id] - m->params_mem) + (size_t)j * per;
            r->n = per;
            r++;
        }
        optim_slice_counts(o, z->ranges + (size_t)j * z->nranges, z->nranges, dp, z->counts + (size_t)j * dp);
    }
    size_t n = (z->layer_floats + 15) / 16 * 16;
    float *mem = m->k->alloc(ZERO2_BUFFERS * n * sizeof(float)); /* where the model's gradients live */
    for (int b = 0; b < ZERO2_BUFFERS; b++) {
        z->work[b] = mem + (size_t)b * n;
        z->layer[b] = -1;
    }
    m->layer_grads = hand_out;
    m->layer_grads_ctx = z;
    m->layer_done = layer_done;
    m->layer_done_ctx = z;
}

void zero2_free(struct zero2 *z)
{
    if (z->enabled) z->m->k->release(z->work[0]);
    free(z->ranges);
    free(z->counts);
    memset(z, 0, sizeof *z);
}

void zero2_begin(struct zero2 *z)
{
    if (z->enabled) z->o->k->zero(z->o->gshard, z->o->shard * sizeof(float));
}

void zero2_finish(struct zero2 *z)
{
    if (!z->enabled) return;
    for (int i = 0; i < ZERO2_BUFFERS; i++) retire(z, (z->next + i) % ZERO2_BUFFERS); /* oldest first */
}
