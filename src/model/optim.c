/* optim.c -- global-norm clipping, AdamW, the ZeRO slice, lr schedule. */
#include "optim.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static const double PI = 3.14159265358979323846;

size_t optim_zero_piece(double bucket_mb, int dp)
{
    size_t piece = (size_t)(bucket_mb * 1048576.0 / sizeof(float)) / (size_t)dp;
    return piece < 16 ? 16 : piece;
}

size_t optim_zero_pack_floats(const struct zero_slices *z, double bucket_mb, int dp)
{
    size_t piece = optim_zero_piece(bucket_mb, dp), most = 0;
    for (int k = 0; k < z->n; k++)
        if (z->part[k].shard > piece && piece * (size_t)z->part[k].ranks > most)
            most = piece * (size_t)z->part[k].ranks;
    return most;
}

const struct zero_part *optim_slice_counts(const struct optim *o, const struct flat_range *r, int k, int *counts,
                                           int *displs)
{
    const struct zero_part *p = zero_part_of(&o->z, r[0].at);
    size_t at = 0;
    for (int q = 0; q < p->ranks; q++) {
        size_t n = 0, lo, hi;
        for (int i = 0; i < k; i++)
            if (flat_meet(r[i].at, r[i].n, p->at + (size_t)q * p->shard, p->shard, &lo, &hi)) n += hi - lo;
        if (at + n > (size_t)INT_MAX) die("a ZeRO block of %zu elements exceeds MPI's int count", at + n);
        counts[q] = (int)n;
        if (displs) displs[q] = (int)at;
        at += n;
    }
    return p;
}

void optim_zero_layers(const struct optim *o, const struct model *m, struct zero_layers *zl)
{
    memset(zl, 0, sizeof *zl);
    struct flat_range r[NUM_PARAMS];
    zl->Lp = m->d.Lp;
    zl->nranges = model_layer_ranges(m, 0, r);
    zl->stride = m->d.dpcp;
    for (int i = 0; i < zl->nranges; i++) { /* a new part where a range lies in another one than the last */
        const struct zero_part *p = zero_part_of(&o->z, r[i].at);
        if (zl->nparts == 0 || p != zl->part[zl->nparts - 1]) {
            if (zl->nparts == 2) die("a layer's tensors in more than two parts of ZeRO's slices");
            zl->first[zl->nparts] = i;
            zl->part[zl->nparts++] = p;
        }
    }
    zl->first[zl->nparts] = zl->nranges;
    zl->ranges = xcalloc((size_t)zl->Lp * zl->nranges, sizeof *zl->ranges);
    zl->off = xcalloc(2 * (size_t)zl->Lp, sizeof *zl->off);
    zl->counts = xcalloc(2 * (size_t)zl->Lp * zl->nparts * zl->stride, sizeof *zl->counts);
    zl->displs = zl->counts + (size_t)zl->Lp * zl->nparts * zl->stride;
    for (int j = 0; j < zl->Lp; j++) {
        struct flat_range *rj = zl->ranges + (size_t)j * zl->nranges;
        model_layer_ranges(m, j, rj);
        for (int i = 0; zl->nparts == 2 && i < zl->first[1]; i++) zl->off[2 * (size_t)j + 1] += rj[i].n;
        for (int k = 0; k < zl->nparts; k++)
            optim_slice_counts(o, zero_layer_ranges(zl, j, k), zl->first[k + 1] - zl->first[k],
                               zl->counts + zero_layer_run(zl, j, k), zl->displs + zero_layer_run(zl, j, k));
    }
}

void optim_zero_layers_free(struct zero_layers *zl)
{
    free(zl->ranges);
    free(zl->off);
    free(zl->counts);
    memset(zl, 0, sizeof *zl);
}

void optim_init(struct optim *o, const struct model *m, const struct config *cfg, const struct run_shape *s)
{
    memset(o, 0, sizeof *o);
    o->zero_stage = s->zero_stage;
    o->z = m->zs;
    size_t n = o->z.floats;
    o->k = m->k;
    o->m_mem = o->k->alloc(n * sizeof(float));
    o->v_mem = o->k->alloc(n * sizeof(float));
    o->prec = m->d.prec;
    if (o->zero_stage == 3) o->master_mem = m->shard_mem; /* the model's one copy of its shares, in fp32 */
    else if (o->prec != PREC_FP32) o->master_mem = o->k->alloc(n * sizeof(float));
    if (o->zero_stage) {
        o->gshard = o->k->alloc(n * sizeof(float));
        o->piece = optim_zero_piece(cfg->parallel.bucket_mb, s->dpcp);
        /* (ZeRO-3 never gathers the shares whole: optim_params_from_master) */
        o->pack_floats = o->zero_stage == 3 ? 0 : optim_zero_pack_floats(&o->z, cfg->parallel.bucket_mb, s->dpcp);
        if (o->pack_floats) o->pack = o->k->alloc(o->pack_floats * sizeof(float));
    }
    o->beta1 = cfg->train.beta1;
    o->beta2 = cfg->train.beta2;
    o->eps = cfg->train.eps;
    o->weight_decay = cfg->train.weight_decay;
    o->grad_clip = cfg->train.grad_clip;
}

void optim_free(struct optim *o)
{
    if (!o->k) return;
    o->k->release(o->m_mem);
    o->k->release(o->v_mem);
    if (o->gshard) o->k->release(o->gshard);
    if (o->master_mem && o->zero_stage != 3) o->k->release(o->master_mem);
    if (o->pack) o->k->release(o->pack);
    memset(o, 0, sizeof *o);
}

/* ZeRO-3: the tensors outside the layers between the slice (master) and
 * their full copies in params_mem: this rank's parts copied into the slice
 * (to_slice), or from it and all-gathered in pieces of a bucket. */
static void rest_to_slice(struct optim *o, const struct model *m)
{
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t lo, hi, s;
        if (param_table[i].per_layer || !optim_slice_part(o, m->at[i], m->size[i], &lo, &hi, &s)) continue;
        o->k->copy(o->master_mem + s, m->param[i] + (lo - m->at[i]), (hi - lo) * sizeof(float));
    }
}

static void rest_from_slice(struct optim *o, struct model *m, struct comm *c)
{
    int dpcp = c->grid->dpcp;
    size_t bucket = o->piece * (size_t)dpcp;
    int *counts = xmalloc(2 * (size_t)dpcp * sizeof *counts), *displs = counts + dpcp;
    for (int i = 0; i < NUM_PARAMS; i++) {
        if (param_table[i].per_layer || m->size[i] == 0) continue;
        for (size_t t = 0; t < m->size[i]; t += bucket) {
            struct flat_range r = {m->at[i] + t, m->size[i] - t < bucket ? m->size[i] - t : bucket};
            const struct zero_part *p = optim_slice_counts(o, &r, 1, counts, displs);
            float *piece = m->param[i] + t, *mine = piece + displs[p->rank];
            size_t lo, hi, s;
            if (optim_slice_part(o, r.at, r.n, &lo, &hi, &s)) /* this rank's part, rounded as it is copied */
                o->k->lp_round_to(o->prec, mine, o->master_mem + s, hi - lo);
            comm_allgatherv_f32(c, p->group, piece, counts, displs);
        }
    }
    free(counts);
}

void optim_master_from_params(struct optim *o, const struct model *m)
{
    if (o->zero_stage == 3) rest_to_slice(o, m); /* (the layers' parameters live in the slice already) */
    else if (o->master_mem)
        for (int k = 0; k < o->z.n; k++) {
            const struct zero_part *p = &o->z.part[k];
            o->k->copy(o->master_mem + p->state, m->params_mem + p->offset, p->shard * sizeof(float));
        }
}

/* ZeRO-1 and 2: every rank's updated shares spread to all their replicas. */
static void gather_params(struct optim *o, struct model *m, struct comm *c)
{
    for (int k = 0; k < o->z.n; k++)
        comm_allgather_sliced(c, o->z.part[k].group, m->params_mem + o->z.part[k].at, o->z.part[k].shard, o->piece,
                              o->pack);
}

void optim_params_from_master(struct optim *o, struct model *m, struct comm *c)
{
    if (!o->master_mem) return;
    m->param_version++; /* (ZeRO-3: the layers are gathered from the slice when next used) */
    if (o->zero_stage == 3) {
        rest_from_slice(o, m, c);
        return;
    }
    for (int k = 0; k < o->z.n; k++) {
        const struct zero_part *p = &o->z.part[k];
        float *mine = m->params_mem + p->offset;
        o->k->lp_round_to(o->prec, mine, o->master_mem + p->state, p->shard); /* (one pass) */
    }
    if (o->zero_stage) gather_params(o, m, c);
}

void optim_unscale(struct optim *o, struct model *m, float inv)
{
    o->k->scale_inplace(o->prec, o->zero_stage ? o->gshard : m->grads_mem, o->z.floats, inv);
}

double lr_at(const struct config *cfg, int64_t step)
{
    double lr = cfg->train.lr, min_lr = cfg->train.min_lr;
    int64_t warm = cfg->train.warmup_steps, total = cfg->train.steps;
    if (step < warm) return lr * (double)(step + 1) / (double)warm;
    if (cfg->train.lr_schedule_id == TRAIN_LR_SCHEDULE_constant) return lr;
    int64_t span = total - warm;
    if (span <= 1) return lr;
    double ratio = (double)(step - warm) / (double)(span - 1); /* 0 .. 1 at the last step */
    if (ratio > 1) ratio = 1;
    return min_lr + 0.5 * (1.0 + cos(PI * ratio)) * (lr - min_lr);
}

/* Sum of squares of gradient range [a, a + n) of the flat buffer: from the
 * full gradients, or (ZeRO) from this rank's part of its slice. */
static double range_sumsq(const struct optim *o, const struct model *m, size_t a, size_t n)
{
    if (!o->zero_stage) return o->k->sumsq(o->prec, m->grads_mem + a, n);
    size_t lo, hi, s;
    return optim_slice_part(o, a, n, &lo, &hi, &s) ? o->k->sumsq(o->prec, o->gshard + s, hi - lo) : 0.0;
}

/* Does this rank count tensor i's gradient in the norm (and its non-finite
 * check)?  A replicated tensor is counted on tp rank 0 only, the tied wte
 * on the first stage only; under expert parallelism without ZeRO the
 * others than the experts on ep rank 0 only (the experts on theirs; with
 * ZeRO each rank counts its shares, summed over all dp * cp). */
static int counted(const struct optim *o, const struct model *m, enum param_id i)
{
    const struct model_dims *d = &m->d;
    const struct param_info *pi = &param_table[i];
    return param_present(d, i) && m->size[i] > 0 && (pi->shard != SHARD_NONE || d->tp_rank == 0) &&
           (pi->expert || d->ep_rank == 0 || o->zero_stage) && (i != P_WTE || model_has_embedding(d));
}

/* The squared norm of every logical tensor (one entry per tensor and layer)
 * meets in one vector and is summed in a fixed order, so the norm is the
 * same bit for bit however the layers are spread over pipeline stages. */
double optim_grad_norm(const struct optim *o, const struct model *m, struct comm *c, int *local_nonfinite,
                       double *local_ss)
{
    const struct model_dims *d = &m->d;
    int nglobal = 0, nlayer = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (param_present(d, (enum param_id)i))
            param_table[i].per_layer ? (nlayer += param_slices(d, (enum param_id)i) / d->L) : nglobal++;
    size_t n = (size_t)model_norm_terms(d);
    double *e = xcalloc(n, sizeof *e);
    int g = 0, k = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        const struct param_info *pi = &param_table[i];
        if (!param_present(d, (enum param_id)i)) continue;
        int counts = counted(o, m, (enum param_id)i);
        size_t at = m->at[i];
        if (!pi->per_layer) {
            if (counts) e[g] = range_sumsq(o, m, at, m->size[i]);
            g++;
            continue;
        }
        /* each layer's entries in table order, an expert tensor's one per expert */
        int per_layer = param_slices(d, (enum param_id)i) / d->L, local = param_local_slices(d, (enum param_id)i);
        size_t per = m->size[i] / (size_t)local;
        for (int j = 0; j < local && counts; j++) {
            int gs = param_slice_global(d, (enum param_id)i, j);
            e[nglobal + (size_t)(gs / per_layer) * nlayer + k + gs % per_layer] =
                range_sumsq(o, m, at + (size_t)j * per, per);
        }
        k += per_layer;
    }
    if (local_nonfinite) {
        *local_nonfinite = 0;
        for (size_t j = 0; j < n; j++) *local_nonfinite |= !isfinite(e[j]);
    }
    if (local_ss) {
        *local_ss = 0;
        for (size_t j = 0; j < n; j++) *local_ss += e[j];
    }
    if (o->zero_stage) comm_allreduce_sum_f64(c, CG_DP, e, n);
    if (d->tp > 1) comm_allreduce_sum_f64(c, CG_TP, e, n);
    if (d->ep > 1 && !o->zero_stage) comm_allreduce_sum_f64(c, CG_EP, e, n);
    if (c && c->grid->pp > 1) comm_allreduce_sum_f64(c, CG_PP, e, n);
    double ss = 0;
    for (size_t j = 0; j < n; j++) ss += e[j];
    free(e);
    return sqrt(ss);
}

void optim_update(struct optim *o, struct model *m, struct comm *c, double grad_norm, double lr)
{
    int t = (int)++o->updates;
    float *grads = o->zero_stage ? o->gshard : m->grads_mem; /* indexed as the state (optim_slice_part) */
    double coef = o->grad_clip > 0 ? o->grad_clip / (grad_norm + 1e-6) : 1.0; /* as PyTorch */
    float gscale = coef < 1.0 ? (float)coef : 1.0f; /* applied by the update itself (no pass of its own) */
    /* Without ZeRO the update reads every gradient where the step left it
     * (grads_mem, each tensor whole) and leaves it zero as it goes: the next
     * step's zeroing pass is saved (model_zero_grad).  With ZeRO it reads
     * the reduced shard, and grads_mem is zeroed as before. */
    const int clear = !o->zero_stage && o->z.n == 1 && o->z.part[0].shard == m->flat; /* (one part: the whole) */
    /* With master weights outside ZeRO-3 the working copy is rounded as the
     * update writes each block (params_mem + lo is state s's parameter;
     * between the tensors, padding: zero in both), which saves
     * optim_params_from_master's pass over the master weights. */
    const int fused = o->master_mem && o->zero_stage != 3 && o->k->adamw_update_rounded;
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t lo, hi, s, at = m->at[i];
        if (!optim_slice_part(o, at, m->size[i], &lo, &hi, &s)) continue;
        float wd = param_table[i].decay ? (float)o->weight_decay : 0.0f;
        float *w = o->master_mem ? o->master_mem + s : m->params_mem + lo;
        if (fused)
            o->k->adamw_update_rounded(o->prec, w, m->params_mem + lo, grads + s, gscale, o->m_mem + s,
                                       o->v_mem + s, hi - lo, (float)lr, (float)o->beta1, (float)o->beta2,
                                       (float)o->eps, wd, t, clear);
        else
            o->k->adamw_update(o->prec, w, grads + s, gscale, o->m_mem + s, o->v_mem + s, hi - lo, (float)lr,
                               (float)o->beta1, (float)o->beta2, (float)o->eps, wd, t, clear);
    }
    m->grads_cleared = clear;
    if (fused) {
        m->param_version++; /* (as optim_params_from_master) */
        if (o->zero_stage) gather_params(o, m, c);
    } else if (o->master_mem)
        optim_params_from_master(o, m, c);
    else if (o->zero_stage)
        gather_params(o, m, c);
}

float *optim_some_grad(struct optim *o, struct model *m)
{
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t lo, hi, s, at = m->at[i];
        if (counted(o, m, (enum param_id)i) && optim_slice_part(o, at, m->size[i], &lo, &hi, &s))
            return (o->zero_stage ? o->gshard : m->grads_mem) + s;
    }
    return NULL;
}
