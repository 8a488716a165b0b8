/* optim.c -- DP gradient reduction, global-norm clipping, AdamW, lr schedule. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "log.h"

static const double PI = 3.14159265358979323846;

void optim_init(struct optim *o, const struct model *m, const struct config *cfg)
{
    memset(o, 0, sizeof *o);
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMS; i++) total += (m->size[i] + 15) / 16 * 16;
    o->m_mem = xalloc_aligned(total * sizeof(float));
    o->v_mem = xalloc_aligned(total * sizeof(float));
    size_t off = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        o->m[i] = o->m_mem + off;
        o->v[i] = o->v_mem + off;
        off += (m->size[i] + 15) / 16 * 16;
    }
    o->beta1 = cfg->train.beta1;
    o->beta2 = cfg->train.beta2;
    o->eps = cfg->train.eps;
    o->weight_decay = cfg->train.weight_decay;
    o->grad_clip = cfg->train.grad_clip;
}

void optim_free(struct optim *o)
{
    free(o->m_mem);
    free(o->v_mem);
    memset(o, 0, sizeof *o);
}

double lr_at(const struct config *cfg, int64_t step)
{
    double lr = cfg->train.lr, min_lr = cfg->train.min_lr;
    int64_t warm = cfg->train.warmup_steps, total = cfg->train.steps;
    if (step < warm) return lr * (double)(step + 1) / (double)warm;
    if (config_is(cfg->train.lr_schedule, "constant")) return lr;
    int64_t span = total - warm;
    if (span <= 1) return lr;
    double ratio = (double)(step - warm) / (double)(span - 1); /* 0 .. 1 at the last step */
    if (ratio > 1) ratio = 1;
    return min_lr + 0.5 * (1.0 + cos(PI * ratio)) * (lr - min_lr);
}

void optim_reduce_tp_grads(struct model *m, struct comm *c)
{
    /* With sequence parallelism each tp rank saw only its rows of the
     * residual stream: the LayerNorm gradients are partial sums over tp. */
    if (!m->d.sp) return;
    enum param_id ln[] = {P_LN1W, P_LN1B, P_LN2W, P_LN2B, P_LNFW, P_LNFB};
    for (size_t i = 0; i < sizeof ln / sizeof ln[0]; i++)
        comm_allreduce_sum_f32(c, CG_TP, m->grad[ln[i]], m->size[ln[i]]);
}

void optim_reduce_grads(struct model *m, struct comm *c)
{
    /* the tied embedding: the first and the last stage hold wte; the sum of
     * their gradients (embedding + head) is the gradient of both copies */
    model_merge_embedding_grad(m);
    if (m->d.pp > 1 && m->size[P_WTE] > 0) comm_allreduce_sum_f32(c, CG_EMBED, m->grad[P_WTE], m->size[P_WTE]);
    optim_reduce_tp_grads(m, c);
    if (c->grid->dp == 1) return;
    /* one call over the contiguous gradient memory (tensors are packed with
     * 64-byte padding, which is zero and stays zero) */
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMS; i++) total += (m->size[i] + 15) / 16 * 16;
    comm_allreduce_sum_f32(c, CG_DP, m->grads_mem, total);
}

/* The squared norm of every logical tensor (one entry per tensor and layer)
 * meets in one vector and is summed in a fixed order, so the norm is the
 * same bit for bit however the layers are spread over pipeline stages. */
double optim_grad_norm(const struct model *m, struct comm *c)
{
    const struct model_dims *d = &m->d;
    int nglobal = 0, nlayer = 0;
    for (int i = 0; i < NUM_PARAMS; i++) param_table[i].per_layer ? nlayer++ : nglobal++;
    size_t n = (size_t)nglobal + (size_t)d->L * nlayer;
    double *e = xcalloc(n, sizeof *e);
    int g = 0, k = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        const struct param_info *pi = &param_table[i];
        /* a replicated tensor is counted on tp rank 0 only, the tied wte on
         * the first stage only */
        int counts = (pi->shard != SHARD_NONE || d->tp_rank == 0) && m->size[i] > 0;
        if (!pi->per_layer) {
            if (counts && (i != P_WTE || model_has_embedding(d))) e[g] = sumsq(m->grad[i], m->size[i]);
            g++;
            continue;
        }
        size_t per = m->size[i] / (size_t)d->Lp;
        for (int j = 0; j < d->Lp && counts; j++)
            e[nglobal + (size_t)model_global_layer(d, j) * nlayer + k] = sumsq(m->grad[i] + (size_t)j * per, per);
        k++;
    }
    if (d->tp > 1) comm_allreduce_sum_f64(c, CG_TP, e, n);
    if (c && c->grid->pp > 1) comm_allreduce_sum_f64(c, CG_PP, e, n);
    double ss = 0;
    for (size_t j = 0; j < n; j++) ss += e[j];
    free(e);
    return sqrt(ss);
}

void optim_update(struct optim *o, struct model *m, double grad_norm, double lr, int64_t t)
{
    double coef = o->grad_clip > 0 ? o->grad_clip / (grad_norm + 1e-6) : 1.0; /* as PyTorch */
    if (coef < 1.0) {
        float s = (float)coef;
        for (int i = 0; i < NUM_PARAMS; i++) scale_inplace(m->grad[i], m->size[i], s);
    }
    for (int i = 0; i < NUM_PARAMS; i++) {
        float wd = param_table[i].decay ? (float)o->weight_decay : 0.0f;
        adamw_update(m->param[i], m->grad[i], o->m[i], o->v[i], m->size[i], (float)lr, (float)o->beta1,
                     (float)o->beta2, (float)o->eps, wd, (int)t);
    }
}
