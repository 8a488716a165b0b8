/* dp.c -- the data-parallel gradient reduction and its strategies. */
#include "dp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* ------------------------------------------------------------ ZeRO slices */

/* gshard += recv: this rank's elements of the ranges, in order. */
static void add_to_shard(struct optim *o, const struct flat_range *r, int k, const float *recv)
{
    for (int i = 0; i < k; i++) {
        size_t lo, hi, s;
        if (!optim_slice_part(o, r[i].at, r[i].n, &lo, &hi, &s)) continue;
        o->k->residual_forward(PREC_FP32, o->gshard + s, o->gshard + s, recv, hi - lo);
        recv += hi - lo;
    }
}

/* ------------------------------------------------------------ overlap */

/* Per-layer tensors whose gradient is final once the layer's last backward
 * ran: all but those partial under SP, which first need their sums over tp. */
static int overlappable(const struct model *m, int id)
{
    return param_table[id].per_layer && !param_sp_partial(&m->d, (enum param_id)id);
}

/* Start the all-reduces of local layer j's gradients. */
static void start_layer(struct dp *p, int j)
{
    struct model *m = p->m;
    if (p->nreq == 0) p->started_at = MPI_Wtime();
    for (int id = 0; id < NUM_PARAMS; id++) {
        if (!overlappable(m, id)) continue;
        size_t per = param_layer_floats(&m->d, (enum param_id)id, j);
        comm_iallreduce_sum_f32(p->c, param_group(&m->d, (enum param_id)id),
                                m->grad[id] + param_layer_offset(&m->d, (enum param_id)id, j), per,
                                &p->req[p->nreq++]);
    }
    p->layer_sent[j] = 1;
}

static void flush(struct dp *p)
{
    for (int i = 0; i < p->npending; i++) start_layer(p, p->pending[i]);
    p->npending = 0;
    p->pending_bytes = 0;
}

static void overlap_layer_done(void *ctx, int j)
{
    struct dp *p = ctx;
    struct model *m = p->m;
    size_t bytes = 0;
    for (int id = 0; id < NUM_PARAMS; id++)
        if (overlappable(m, id)) bytes += param_layer_floats(&m->d, (enum param_id)id, j) * sizeof(float);
    p->pending[p->npending++] = j;
    p->pending_bytes += bytes;
    if (p->pending_bytes >= p->bucket_bytes) flush(p);
    comm_progress(p->c, p->nreq, p->req); /* give MPI a chance to progress what is in flight */
}

/* Start what is left, wait for everything. */
static void overlap_finish(struct dp *p)
{
    flush(p);
    for (int j = 0; j < p->m->d.Lp; j++)
        if (!p->layer_sent[j]) start_layer(p, j);
    if (p->nreq) p->hidden_s += MPI_Wtime() - p->started_at;
    p->wait_s += comm_wait(p->c, CG_DP, CO_ALLREDUCE, p->nreq, p->req);
    p->nreq = 0;
    memset(p->layer_sent, 0, (size_t)p->m->d.Lp * sizeof *p->layer_sent);
}

static void overlap_init(struct dp *p, double bucket_mb)
{
    int Lp = p->m->d.Lp;
    p->bucket_bytes = (size_t)(bucket_mb * 1048576.0);
    p->layer_sent = xcalloc((size_t)Lp, sizeof *p->layer_sent);
    p->pending = xcalloc((size_t)Lp, sizeof *p->pending);
    p->cap = Lp * NUM_PARAMS;
    p->req = xcalloc((size_t)p->cap, sizeof *p->req);
}

/* ------------------------------------------------------------ layers scattered (ZeRO-2, 3) */

size_t dp_layer_buffer_floats(const struct model_dims *d)
{
    return DP_LAYER_BUFFERS * ((model_layer_floats(d) + 15) / 16 * 16);
}

/* Is the layer's part 1 the experts' (ZeRO's slices under expert parallelism, model_zero_slices)? */
static int expert_part(const struct model_dims *d) { return d->ep > 1 && d->E > 0; }

size_t dp_layer_ring_chunk(const struct model_dims *d, int part, size_t piece)
{
    size_t floats = 0; /* (the most of any layer) */
    for (int j = 0; j < d->Lp; j++) {
        size_t n = 0;
        for (int i = 0; i < NUM_PARAMS; i++)
            if ((param_table[i].expert && expert_part(d)) == part) n += param_layer_floats(d, (enum param_id)i, j);
        floats = n > floats ? n : floats;
    }
    /* a chunk: a layer's part's share of one rank, at most a piece; a run larger than that (the slices cut
     * the layers unevenly) goes in several */
    size_t ranks = (size_t)d->dpcp / (part ? (size_t)d->ep : 1), share = (floats + ranks - 1) / ranks;
    size_t chunk = (share + 15) / 16 * 16;
    if (chunk > piece) chunk = piece;
    return chunk < 16 ? 16 : chunk;
}

size_t dp_layer_ring_floats(const struct model_dims *d, size_t piece)
{
    size_t n = dp_layer_ring_chunk(d, 0, piece);
    if (expert_part(d)) n += dp_layer_ring_chunk(d, 1, piece);
    return DP_LAYER_BUFFERS * n;
}

/* Finish buffer b's rings and add this rank's runs to gshard. */
static void retire(struct dp *p, int b)
{
    if (p->layer[b] < 0) return;
    const struct zero_layers *zl = &p->zl;
    int j = p->layer[b];
    for (int k = 0; k < zl->nparts; k++) {
        comm_ring_progress(p->c, &p->ring[b][k], 1);
        add_to_shard(p->o, zero_layer_ranges(zl, j, k), zl->first[k + 1] - zl->first[k],
                     p->work[b] + zero_layer_off(zl, j, k) + zl->displs[zero_layer_run(zl, j, k) + zl->part[k]->rank]);
    }
    p->layer[b] = -1;
}

static float *scatter_hand_out(void *ctx, int j)
{
    struct dp *p = ctx;
    int b = p->next;
    retire(p, b); /* the oldest: its ring has had a layer's backward to progress */
    p->layer[b] = j;
    p->next = (b + 1) % DP_LAYER_BUFFERS;
    p->m->k->zero(p->work[b], p->layer_floats * sizeof(float));
    return p->work[b];
}

enum { RING_TAG = 700 }; /* + the buffer: the rings in flight on the dp communicator */

static void scatter_layer_done(void *ctx, int j)
{
    struct dp *p = ctx;
    int b = (p->next + DP_LAYER_BUFFERS - 1) % DP_LAYER_BUFFERS; /* the one just handed out */
    struct model *m = p->m;
    float *g = p->work[b];
    for (int id = 0; id < NUM_PARAMS; id++) { /* the partial sums over tp first */
        if (!param_table[id].per_layer) continue;
        size_t per = param_layer_floats(&m->d, (enum param_id)id, j);
        if (param_sp_partial(&m->d, (enum param_id)id)) comm_allreduce_sum_f32(p->c, CG_TP, g, per);
        g += per;
    }
    const struct zero_layers *zl = &p->zl;
    for (int k = 0; k < zl->nparts; k++) /* (each part's ring on its own communicator) */
        comm_ring_start(p->c, &p->ring[b][k], zl->part[k]->group, p->work[b] + zero_layer_off(zl, j, k),
                        zl->counts + zero_layer_run(zl, j, k), zl->displs + zero_layer_run(zl, j, k), p->recv[b][k],
                        p->ring_piece[k], RING_TAG + b);
    int other = (b + 1) % DP_LAYER_BUFFERS;
    for (int k = 0; k < zl->nparts && p->layer[other] >= 0; k++) comm_ring_progress(p->c, &p->ring[other][k], 0);
}

static void scatter_layers_init(struct dp *p)
{
    struct model *m = p->m;
    p->layer_floats = model_layer_floats(&m->d);
    optim_zero_layers(p->o, m, &p->zl);
    size_t n = (p->layer_floats + 15) / 16 * 16;
    float *mem = m->k->alloc(DP_LAYER_BUFFERS * n * sizeof(float)); /* where the model's gradients live */
    for (int b = 0; b < DP_LAYER_BUFFERS; b++) {
        p->work[b] = mem + (size_t)b * n;
        p->layer[b] = -1;
    }
    /* armed for good: every micro-batch's layers go through the buffers */
    m->layer_grads = scatter_hand_out;
    m->layer_grads_ctx = p;
    m->layer_done = scatter_layer_done;
    m->layer_done_ctx = p;
}

/* The tensors outside the layers, each reduce-scattered into the slice in
 * place by a ring, a bucket (dpcp pieces) at a time. */
static void scatter_rest(struct dp *p)
{
    struct model *m = p->m;
    struct comm *c = p->c;
    int dpcp = c->grid->dpcp;
    size_t bucket = p->o->piece * (size_t)dpcp;
    int *counts = xmalloc(2 * (size_t)dpcp * sizeof *counts), *displs = counts + dpcp;
    for (int i = 0; i < NUM_PARAMS; i++) {
        if (param_table[i].per_layer || m->size[i] == 0) continue;
        for (size_t t = 0; t < m->size[i]; t += bucket) {
            struct flat_range r = {m->at[i] + t, m->size[i] - t < bucket ? m->size[i] - t : bucket};
            const struct zero_part *part = optim_slice_counts(p->o, &r, 1, counts, displs);
            struct comm_ring ring;
            comm_ring_start(c, &ring, part->group, m->grad[i] + t, counts, displs, p->recv[0][0], p->ring_piece[0],
                            RING_TAG + DP_LAYER_BUFFERS);
            comm_ring_progress(c, &ring, 1);
            add_to_shard(p->o, &r, 1, m->grad[i] + t + displs[part->rank]);
        }
    }
    free(counts);
}

/* ------------------------------------------------------------ the interface */

void dp_init(struct dp *p, struct model *m, struct optim *o, struct comm *c, const struct run_shape *s,
             double bucket_mb)
{
    memset(p, 0, sizeof *p);
    p->m = m;
    p->o = o;
    p->c = c;
    p->strategy = s->dpcp == 1            ? DP_NONE
                  : s->zero_stage >= 2    ? DP_SCATTER_LAYERS
                  : s->zero_stage == 1    ? DP_SCATTER_FLAT
                  : s->overlap && m->d.Lp ? DP_OVERLAP /* (a stage may hold no layer) */
                                          : DP_FLAT;
    if (p->strategy == DP_OVERLAP) overlap_init(p, bucket_mb);
    if (p->strategy == DP_SCATTER_LAYERS) { /* the rings' scratch: a chunk for each buffer and part (the rest
                                               uses the first) */
        float *at = m->k->alloc(dp_layer_ring_floats(&m->d, o->piece) * sizeof(float));
        for (int b = 0; b < DP_LAYER_BUFFERS; b++)
            for (int k = 0; k < 1 + expert_part(&m->d); k++) {
                p->ring_piece[k] = dp_layer_ring_chunk(&m->d, k, o->piece);
                p->recv[b][k] = at;
                at += p->ring_piece[k];
            }
    }
    if (p->strategy == DP_SCATTER_LAYERS && m->d.Lp > 0) scatter_layers_init(p);
    if (s->zero_stage == 3 && m->d.Lp > 0) zero3_init(&p->z3, m, o, c, &p->zl);
}

void dp_free(struct dp *p)
{
    if (p->work[0]) p->m->k->release(p->work[0]);
    if (p->recv[0][0]) p->m->k->release(p->recv[0][0]);
    zero3_free(&p->z3);
    free(p->layer_sent);
    free(p->pending);
    free(p->req);
    optim_zero_layers_free(&p->zl);
    memset(p, 0, sizeof *p);
}

void dp_begin(struct dp *p)
{
    zero3_begin(&p->z3);
    if (p->strategy == DP_SCATTER_LAYERS) p->o->k->zero(p->o->gshard, p->o->z.floats * sizeof(float));
}

void dp_arm(struct dp *p)
{
    if (p->strategy != DP_OVERLAP) return;
    p->m->layer_done = overlap_layer_done;
    p->m->layer_done_ctx = p;
}

void dp_disarm(struct dp *p)
{
    if (p->strategy != DP_OVERLAP) return;
    p->m->layer_done = NULL;
    p->m->layer_done_ctx = NULL;
}

void dp_reduce_tp_partial(struct model *m, struct comm *c)
{
    for (int i = 0; i < NUM_PARAMS; i++)
        if (param_sp_partial(&m->d, (enum param_id)i) && m->grad[i]) /* (scattered layers: done as they went) */
            comm_allreduce_sum_f32(c, CG_TP, m->grad[i], m->size[i]);
}

void dp_finish(struct dp *p)
{
    struct model *m = p->m;
    struct comm *c = p->c;
    if (p->strategy == DP_SCATTER_LAYERS && p->work[0])
        for (int i = 0; i < DP_LAYER_BUFFERS; i++) retire(p, (p->next + i) % DP_LAYER_BUFFERS); /* oldest first */
    zero3_settle(&p->z3); /* (no gather may be in flight while the slice is updated) */
    if (p->strategy == DP_OVERLAP) overlap_finish(p);
    /* the tied embedding: the first and the last stage hold wte; the sum of
     * their gradients (embedding + head) is the gradient of both copies */
    model_merge_embedding_grad(m);
    if (model_wte_on_two_ranks(&m->d) && m->size[P_WTE] > 0)
        comm_allreduce_sum_f32(c, CG_EMBED, m->grad[P_WTE], m->size[P_WTE]);
    dp_reduce_tp_partial(m, c);
    switch (p->strategy) {
    case DP_NONE: break;
    case DP_OVERLAP: /* what the buckets left */
        for (int i = 0; i < NUM_PARAMS; i++)
            if (!overlappable(m, i)) comm_allreduce_sum_f32(c, param_group(&m->d, (enum param_id)i), m->grad[i],
                                                            m->size[i]);
        break;
    case DP_SCATTER_LAYERS: scatter_rest(p); break;
    /* one call over the contiguous gradient memory (tensors are packed with
     * padding, which is zero and stays zero) */
    case DP_SCATTER_FLAT:
        for (int k = 0; k < p->o->z.n; k++) { /* (each part of the slices over its replicas) */
            const struct zero_part *z = &p->o->z.part[k];
            comm_reduce_scatter_sliced(c, z->group, p->o->gshard + z->state, m->grads_mem + z->at, z->shard,
                                       p->o->piece, p->o->pack);
        }
        break;
    case DP_FLAT: { /* (under expert parallelism the experts, last in the layout, over their own replicas) */
        size_t ex = model_experts_at(&m->d, m->at, m->flat);
        comm_allreduce_sum_f32(c, CG_DP, m->grads_mem, ex);
        if (ex < m->flat) comm_allreduce_sum_f32(c, CG_EDP, m->grads_mem + ex, m->flat - ex);
        break;
    }
    }
}
