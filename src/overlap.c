/* overlap.c -- bucketed data-parallel gradient all-reduce during backward. */
#include "overlap.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

/* Per-layer tensors whose gradient is final once the layer's last backward
 * ran: all but the LayerNorms under sequence parallelism, which first need
 * their partial sums over tp (optim_reduce_tp_grads). */
static int overlappable(const struct model *m, int id)
{
    return param_table[id].per_layer && !param_sp_partial(&m->d, (enum param_id)id);
}

void overlap_init(struct overlap *ov, struct model *m, struct comm *c, int enabled, double bucket_mb)
{
    memset(ov, 0, sizeof *ov);
    ov->enabled = enabled && m->d.Lp > 0; /* (a stage may hold no layer) */
    ov->bucket_bytes = (size_t)(bucket_mb * 1048576.0);
    ov->m = m;
    ov->c = c;
    if (!ov->enabled) return;
    ov->layer_sent = xcalloc((size_t)m->d.Lp, sizeof *ov->layer_sent);
    ov->pending = xcalloc((size_t)m->d.Lp, sizeof *ov->pending);
    ov->cap = m->d.Lp * NUM_PARAMS;
    ov->req = xcalloc((size_t)ov->cap, sizeof *ov->req);
}

void overlap_free(struct overlap *ov)
{
    free(ov->layer_sent);
    free(ov->pending);
    free(ov->req);
    memset(ov, 0, sizeof *ov);
}

/* Start the all-reduces of local layer j's gradients. */
static void start_layer(struct overlap *ov, int j)
{
    struct model *m = ov->m;
    if (ov->nreq == 0) ov->started_at = MPI_Wtime();
    m->k->sync(); /* the backward's kernels have written the gradients MPI reads */
    for (int id = 0; id < NUM_PARAMS; id++) {
        if (!overlappable(m, id)) continue;
        size_t per = m->size[id] / (size_t)m->d.Lp;
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, m->grad[id] + (size_t)j * per, (int)per, MPI_FLOAT, MPI_SUM,
                                 ov->c->grid->dp_comm, &ov->req[ov->nreq++]));
        ov->c->step.bytes[CG_DP][CO_ALLREDUCE] += (double)(per * sizeof(float));
        ov->c->step.calls[CG_DP][CO_ALLREDUCE]++;
    }
    ov->layer_sent[j] = 1;
}

static void flush(struct overlap *ov)
{
    for (int i = 0; i < ov->npending; i++) start_layer(ov, ov->pending[i]);
    ov->npending = 0;
    ov->pending_bytes = 0;
}

static void layer_done(void *ctx, int j)
{
    struct overlap *ov = ctx;
    struct model *m = ov->m;
    size_t bytes = 0;
    for (int id = 0; id < NUM_PARAMS; id++)
        if (overlappable(m, id)) bytes += m->size[id] / (size_t)m->d.Lp * sizeof(float);
    ov->pending[ov->npending++] = j;
    ov->pending_bytes += bytes;
    if (ov->pending_bytes >= ov->bucket_bytes) flush(ov);
    if (ov->nreq) { /* give MPI a chance to progress what is in flight */
        int done;
        MPI_CHECK(MPI_Testall(ov->nreq, ov->req, &done, MPI_STATUSES_IGNORE));
    }
}

void overlap_arm(struct overlap *ov)
{
    if (!ov->enabled) return;
    ov->m->layer_done = layer_done;
    ov->m->layer_done_ctx = ov;
}

void overlap_disarm(struct overlap *ov)
{
    if (!ov->enabled) return;
    ov->m->layer_done = NULL;
    ov->m->layer_done_ctx = NULL;
}

int overlap_finish(struct overlap *ov)
{
    if (!ov->enabled) return 0;
    flush(ov);
    for (int j = 0; j < ov->m->d.Lp; j++)
        if (!ov->layer_sent[j]) start_layer(ov, j);
    double t0 = MPI_Wtime();
    if (ov->nreq) ov->hidden_s += t0 - ov->started_at;
    MPI_CHECK(MPI_Waitall(ov->nreq, ov->req, MPI_STATUSES_IGNORE));
    double dt = MPI_Wtime() - t0;
    ov->wait_s += dt;
    ov->c->step.seconds[CG_DP][CO_ALLREDUCE] += dt;
    ov->nreq = 0;
    memset(ov->layer_sent, 0, (size_t)ov->m->d.Lp * sizeof *ov->layer_sent);
    return 1;
}
