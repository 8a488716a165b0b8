/* model_params.c -- the parameter table of both block families: each
 * tensor's shape (none: absent from the family), its split over the tp
 * ranks, the layers each pipeline rank holds, the sizes, the logical
 * parameter count and the initial values. */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model_internal.h"
#include "rng.h"

const struct param_info param_table[NUM_PARAMS] = {
    [P_WTE] = {"wte", 0, 1, INIT_NORMAL, SHARD_ROWS},
    [P_WPE] = {"wpe", 0, 1, INIT_NORMAL, SHARD_NONE},
    [P_LN1W] = {"ln1_w", 1, 0, INIT_ONE, SHARD_NONE, 1},
    [P_LN1B] = {"ln1_b", 1, 0, INIT_ZERO, SHARD_NONE, 1},
    [P_QKVW] = {"qkv_w", 1, 1, INIT_NORMAL, SHARD_ROWS},
    [P_QKVB] = {"qkv_b", 1, 0, INIT_ZERO, SHARD_ROWS},
    [P_ATTPROJW] = {"attproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS},
    [P_ATTPROJB] = {"attproj_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_LN2W] = {"ln2_w", 1, 0, INIT_ONE, SHARD_NONE, 1},
    [P_LN2B] = {"ln2_b", 1, 0, INIT_ZERO, SHARD_NONE, 1},
    [P_FCW] = {"fc_w", 1, 1, INIT_NORMAL, SHARD_ROWS, .layers = LAYERS_MOE},
    [P_FCB] = {"fc_b", 1, 0, INIT_ZERO, SHARD_ROWS, .layers = LAYERS_MOE},
    [P_FCPROJW] = {"fcproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS, .layers = LAYERS_MOE},
    [P_FCPROJB] = {"fcproj_b", 1, 0, INIT_ZERO, SHARD_NONE, .layers = LAYERS_MOE},
    [P_LNFW] = {"lnf_w", 0, 0, INIT_ONE, SHARD_NONE, 1},
    [P_LNFB] = {"lnf_b", 0, 0, INIT_ZERO, SHARD_NONE, 1},
    [P_LMHEAD] = {"lm_head", 0, 1, INIT_NORMAL, SHARD_ROWS},
    [P_DFCW] = {"fc_w", 1, 1, INIT_NORMAL, SHARD_ROWS, .layers = LAYERS_DENSE},
    [P_DFCPROJW] = {"fcproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS, .layers = LAYERS_DENSE},
    [P_ROUTERW] = {"router_w", 1, 1, INIT_NORMAL, SHARD_NONE, .layers = LAYERS_MOE},
    [P_SHGATEW] = {"shared_gate_w", 1, 1, INIT_NORMAL, SHARD_NONE, .layers = LAYERS_MOE},
    [P_EXPFCW] = {"fc_w", 1, 1, INIT_NORMAL, SHARD_ROWS, 0, 1, LAYERS_MOE},
    [P_EXPPROJW] = {"fcproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS, 0, 1, LAYERS_MOE},
};

int param_sp_partial(const struct model_dims *d, enum param_id id) { return d->sp && param_table[id].sp_partial; }

int param_row_parts(const struct model_dims *d, enum param_id id, size_t part[3])
{
    size_t C = (size_t)d->C, KV = (size_t)d->NKV * (size_t)d->HS, F = (size_t)d->F;
    switch (id) {
    case P_QKVW:
    case P_QKVB: part[0] = C, part[1] = KV, part[2] = KV; return 3;
    case P_FCW:
    case P_FCB: part[0] = F, part[1] = F; return d->llama ? 2 : 1;
    case P_DFCW: part[0] = part[1] = (size_t)d->Fd; return 2; /* a leading dense layer's gate and up */
    case P_EXPFCW: part[0] = part[1] = (size_t)d->Fe; return 2; /* an expert's gate and up */
    default: part[0] = (size_t)d->Vp; return 1; /* the vocabulary of wte and lm_head */
    }
}

void param_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols)
{
    size_t C = (size_t)d->C, F = (size_t)d->F, part[3];
    size_t r = C, c = 1; /* vectors are (n, 1) */
    int gpt2 = !d->llama;
    switch (id) {
    case P_WTE: r = (size_t)d->Vp; c = C; break;
    case P_WPE: r = gpt2 ? (size_t)d->T : 0; c = C; break;
    case P_QKVW: r = C + 2 * (size_t)d->NKV * (size_t)d->HS; c = C; break;
    case P_QKVB: r = gpt2 || d->qkv_bias ? C + 2 * (size_t)d->NKV * (size_t)d->HS : 0; break;
    case P_ATTPROJW: c = C; break;
    case P_FCW: r = (size_t)param_row_parts(d, id, part) * F; c = C; break;
    case P_FCB: r = gpt2 ? F : 0; break;
    case P_FCPROJW: c = F; break;
    case P_LN1B:
    case P_ATTPROJB:
    case P_LN2B:
    case P_FCPROJB:
    case P_LNFB: r = gpt2 ? C : 0; break; /* llama: no biases */
    case P_LMHEAD: r = d->tied ? 0 : (size_t)d->Vp; c = C; break;
    case P_ROUTERW: r = (size_t)d->E; c = C; break;
    case P_EXPFCW: r = 2 * (size_t)d->Fe; c = C; break; /* one expert's (a slice) */
    case P_EXPPROJW: r = d->E ? C : 0; c = (size_t)d->Fe; break;
    case P_SHGATEW: r = d->F && d->E && d->shared_gate ? 1 : 0; c = C; break;
    case P_DFCW: r = d->E && d->Ld ? 2 * (size_t)d->Fd : 0; c = C; break;
    case P_DFCPROJW: r = d->E && d->Ld ? C : 0; c = (size_t)d->Fd; break;
    default: break;
    }
    *rows = r;
    *cols = c;
}

int param_present(const struct model_dims *d, enum param_id id)
{
    size_t r, c;
    param_shape(d, id, &r, &c);
    return r * c > 0;
}

int param_slices(const struct model_dims *d, enum param_id id)
{
    if (!param_present(d, id)) return 0;
    return param_table[id].expert ? d->L * d->E : param_table[id].per_layer ? d->L : 1;
}

/* Does global layer l hold per-layer tensor id? */
static int layer_has(const struct model_dims *d, enum param_id id, int l)
{
    switch (param_table[id].layers) {
    case LAYERS_MOE: return !d->E || l >= d->Ld;
    case LAYERS_DENSE: return l < d->Ld;
    default: return 1;
    }
}

/* The local layers holding per-layer tensor id: *first of the set's first, their number returned. */
static int local_layers(const struct model_dims *d, enum param_id id, int *first)
{
    int dense = d->E ? d->Lpd : 0;
    switch (param_table[id].layers) {
    case LAYERS_MOE: *first = dense; return d->Lp - dense;
    case LAYERS_DENSE: *first = 0; return dense;
    default: *first = 0; return d->Lp;
    }
}

int param_slice_exists(const struct model_dims *d, enum param_id id, int g)
{
    if (!param_table[id].per_layer) return 1;
    return layer_has(d, id, param_table[id].expert ? g / d->E : g);
}

int param_local_slices(const struct model_dims *d, enum param_id id)
{
    int first, n = local_layers(d, id, &first);
    return param_table[id].expert ? n * d->El : param_table[id].per_layer ? n : 1;
}

/* This rank's experts are [E0, E0 + El). */
static int first_expert(const struct model_dims *d) { return d->ep_rank * d->El; }

int param_slice_global(const struct model_dims *d, enum param_id id, int j)
{
    int first;
    local_layers(d, id, &first);
    if (param_table[id].expert) return model_global_layer(d, first + j / d->El) * d->E + first_expert(d) + j % d->El;
    return param_table[id].per_layer ? model_global_layer(d, first + j) : 0;
}

int param_slice_local(const struct model_dims *d, enum param_id id, int g)
{
    if (!param_table[id].per_layer) return 0;
    int first, ex = param_table[id].expert, l = ex ? g / d->E : g, j = model_local_layer(d, l);
    local_layers(d, id, &first);
    if (j < 0 || !layer_has(d, id, l)) return -1;
    if (!ex) return j - first;
    int e = g % d->E - first_expert(d);
    return e < 0 || e >= d->El ? -1 : (j - first) * d->El + e;
}

size_t param_layer_floats(const struct model_dims *d, enum param_id id, int j)
{
    if (!param_table[id].per_layer || !layer_has(d, id, model_global_layer(d, j))) return 0;
    size_t r, c;
    param_local_shape(d, id, &r, &c);
    return r * c * (size_t)(param_table[id].expert ? d->El : 1);
}

size_t param_layer_offset(const struct model_dims *d, enum param_id id, int j)
{
    int first;
    local_layers(d, id, &first);
    return (size_t)(j - first) * param_layer_floats(d, id, j);
}

void param_slice_name(const struct model_dims *d, enum param_id id, int g, char *name, size_t len)
{
    const char *n = param_table[id].name;
    if (param_table[id].expert) snprintf(name, len, "h.%d/expert.%d/%s", g / d->E, g % d->E, n);
    else if (param_table[id].per_layer) snprintf(name, len, "h.%d/%s", g, n);
    else snprintf(name, len, "%s", n);
}

void param_local_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols)
{
    param_shape(d, id, rows, cols);
    enum shard_kind k = param_table[id].shard;
    if (k == SHARD_ROWS) *rows /= (size_t)d->tp;
    if (k == SHARD_COLS) *cols /= (size_t)d->tp;
}

void param_logical_index(const struct model_dims *d, enum param_id id, size_t r, size_t c, size_t *lr,
                         size_t *lc)
{
    size_t rows, cols, tr = (size_t)d->tp_rank, tp = (size_t)d->tp, part[3];
    param_local_shape(d, id, &rows, &cols);
    *lr = r;
    *lc = c;
    switch (param_table[id].shard) {
    case SHARD_ROWS: { /* this rank's block of each row part */
        int n = param_row_parts(d, id, part);
        size_t start = 0; /* the part's first logical row */
        for (int p = 0; p < n; p++) {
            size_t local = part[p] / tp;
            if (r < local || p == n - 1) {
                *lr = start + tr * local + r;
                break;
            }
            r -= local;
            start += part[p];
        }
        break;
    }
    case SHARD_COLS: *lc = tr * cols + c; break;
    default: break;
    }
}

void model_dims_init(struct model_dims *d, const struct config *cfg, const struct run_shape *s, const struct grid *g)
{
    memset(d, 0, sizeof *d);
    d->L = (int)cfg->model.n_layer;
    d->C = (int)cfg->model.d_model;
    d->NH = (int)cfg->model.n_head;
    d->HS = d->C / d->NH;
    d->llama = s->fam.llama;
    d->NKV = (int)s->fam.NKV;
    d->F = (int)(s->fam.E ? s->fam.Fs : s->fam.F);
    d->qkv_bias = s->fam.qkv_bias;
    d->E = (int)s->fam.E;
    d->K = (int)s->fam.K;
    d->Fe = (int)s->fam.Fe;
    d->ep = g->ep > 0 ? g->ep : 1;
    d->ep_rank = g->ep_rank;
    d->El = d->E / d->ep;
    d->shared_gate = cfg->model.moe_shared_gate != 0;
    d->sigmoid_router = cfg->model.moe_router_id == MODEL_MOE_ROUTER_sigmoid;
    d->norm_topk = cfg->model.moe_norm_topk != 0;
    d->aux_coef = cfg->train.moe_aux_loss;
    d->z_coef = cfg->train.moe_z_loss;
    d->capacity = cfg->train.moe_capacity;
    d->tied = s->fam.tied;
    d->eps = (float)cfg->model.norm_eps;
    d->rope_theta = cfg->model.rope_theta;
    d->rope = (struct rope_scaling){cfg->model.rope_scaling_id == MODEL_ROPE_SCALING_llama3, cfg->model.rope_factor,
                                    cfg->model.rope_low_freq_factor, cfg->model.rope_high_freq_factor,
                                    (double)cfg->model.rope_original_max_positions};
    d->params = s->params;
    d->T = (int)cfg->model.seq_len;
    d->V = (int)cfg->model.vocab_size;
    d->Vp = (int)s->Vp;
    d->tp = s->tp;
    d->tp_rank = g->tp_rank;
    d->sp = s->sp;
    d->pp = s->pp;
    d->pp_rank = g->pp_rank;
    d->dpcp = s->dpcp;
    d->cp = s->cp;
    d->cp_rank = g->cp_rank;
    d->Tl = d->T / (d->cp > 0 ? d->cp : 1);
    d->v = s->v;
    d->vshape = s->sched == PP_ZBV;
    d->Lc = d->L / (d->pp * d->v);
    d->Lp = d->v * d->Lc;
    d->recompute = cfg->train.recompute_id == TRAIN_RECOMPUTE_full        ? RECOMPUTE_FULL
                   : cfg->train.recompute_id == TRAIN_RECOMPUTE_selective ? RECOMPUTE_SELECTIVE
                                                                  : RECOMPUTE_NONE;
    d->prec = s->prec;
    /* (unset, -1, only where no run resolved it: eval and sample, which keep no layer for a backward) */
    d->pack_acts = s->prec != PREC_FP32 && cfg->train.pack_activations != 0;
    d->dpcp_rank = g->dpcp_rank;
    d->zero_stage = s->zero_stage;
    int64_t n = cfg->train.recompute_layers;
    d->Lr = d->recompute != RECOMPUTE_FULL ? 0 : n == 0 || n > d->Lc ? d->Lc : (int)n;
    d->Ld = (int)s->fam.Ld;
    d->Fd = (int)s->fam.F;
    for (int j = 0; j < d->Lp; j++) d->Lpd += model_global_layer(d, j) < d->Ld; /* (in order: a prefix) */
}

int model_virtual_stage(const struct model_dims *d, int chunk)
{
    /* (the schedules' rule, pipeline.h: the loop, or zbv's V) */
    return pp_virtual_stage(d->vshape ? PP_ZBV : PP_INTERLEAVED, d->pp, d->pp_rank, chunk);
}

int model_global_layer(const struct model_dims *d, int j)
{
    return model_virtual_stage(d, j / d->Lc) * d->Lc + j % d->Lc;
}

int model_local_layer(const struct model_dims *d, int l)
{
    int s = l / d->Lc; /* virtual stage */
    for (int c = 0; c < d->v; c++)
        if (model_virtual_stage(d, c) == s) return c * d->Lc + l % d->Lc;
    return -1;
}

int model_has_embedding(const struct model_dims *d) { return d->pp_rank == 0; }
int model_has_head(const struct model_dims *d) { return d->pp_rank == (d->vshape ? 0 : d->pp - 1); }
int model_wte_on_two_ranks(const struct model_dims *d) { return d->pp > 1 && d->tied && !d->vshape; }

/* Does this rank hold tensor id (per-layer tensors: if it holds any layer)? */
static int holds(const struct model_dims *d, enum param_id id)
{
    switch (id) {
    case P_WTE: return model_has_embedding(d) || (d->tied && model_has_head(d)); /* tied: both ends */
    case P_WPE: return model_has_embedding(d);
    case P_LMHEAD: return model_has_head(d);
    case P_LNFW:
    case P_LNFB: return model_has_head(d);
    default: return d->Lp > 0;
    }
}

int64_t model_logical_params(const struct model_dims *d) { return d->params; }

double model_flops_per_token(const struct model_dims *d)
{
    /* the parameters a token multiplies by: not gpt2's position table, nor an untied head's embedding */
    double n = (double)model_logical_params(d) - (d->llama ? 0.0 : (double)d->T * d->C) -
               (d->tied ? 0.0 : (double)d->V * d->C);
    n -= (double)(d->L - d->Ld) * (d->E - d->K) * 3.0 * d->Fe * d->C; /* a token passes k of the E experts */
    return 6.0 * n + 12.0 * d->L * d->C * d->T;
}

void model_action_flops(const struct model_dims *d, int B, double flops[3])
{
    double N = (double)B * d->Tl, C = d->C, Cl = C / d->tp, Vs = (double)d->Vp / d->tp;
    /* the MLP's columns a token computes: the dense or shared ones and its k experts' (not the buffers' bound) */
    double fc = ((d->llama ? 2.0 : 1.0) * d->F + 2.0 * d->K * d->Fe) / d->tp, hid = (d->F + (double)d->K * d->Fe) / d->tp;
    double M = 2 * N * (C * model_qkv_cols(d) + Cl * C + C * fc + hid * C +
                        C * d->E); /* (the router's product: E x C a token, 0 for a dense MLP) */
    if (d->Lp > 0 && d->E && d->Lpd) { /* a mixture's leading dense layers: the mean over this rank's */
        double Md = 2 * N * (C * model_qkv_cols(d) + Cl * C + 3.0 * C * d->Fd / d->tp);
        M = (d->Lpd * Md + (d->Lp - d->Lpd) * M) / d->Lp;
    }
    /* causal attention: each query row against T/2 keys on average, QK^T and PV */
    double A = 2.0 * N * model_q_heads(d) * d->HS * d->T;
    double head = model_has_head(d) ? 2 * N * C * Vs / d->v : 0; /* (a chunk's share: the last holds it) */
    flops[0] = d->Lc * (M + A) + head;
    flops[1] = d->Lc * (M + 2.5 * A) + head + d->Lr * (M + A); /* flash backward: 5 products to the forward's 2 */
    flops[2] = d->Lc * M + head;
}

int model_logical_tensors(const struct model_dims *d)
{
    int n = 0;
    for (int id = 0; id < NUM_PARAMS; id++)
        for (int g = 0; g < param_slices(d, (enum param_id)id); g++) n += param_slice_exists(d, (enum param_id)id, g);
    return n;
}

int model_norm_terms(const struct model_dims *d)
{
    int n = 0;
    for (int id = 0; id < NUM_PARAMS; id++) n += param_slices(d, (enum param_id)id);
    return n;
}

size_t model_tensor_size(const struct model_dims *d, enum param_id id)
{
    size_t r, c;
    param_local_shape(d, id, &r, &c);
    return holds(d, id) ? r * c * (size_t)param_local_slices(d, id) : 0;
}

size_t model_flat_layout(const struct model_dims *d, size_t at[NUM_PARAMS])
{
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        at[i] = total;
        total += (model_tensor_size(d, (enum param_id)i) + 15) / 16 * 16;
    }
    size_t quantum = 16 * (size_t)(d->dpcp > 0 ? d->dpcp : 1);
    if (d->ep > 1 && d->E > 0) { /* the dense part ends on a quantum too: the experts' shares start there */
        size_t pad = (at[P_EXPFCW] + quantum - 1) / quantum * quantum - at[P_EXPFCW];
        for (int i = P_EXPFCW; i < NUM_PARAMS; i++) at[i] += pad;
        total += pad;
    }
    return (total + quantum - 1) / quantum * quantum;
}

void model_zero_slices(const struct model_dims *d, const size_t at[NUM_PARAMS], size_t flat, struct zero_slices *z)
{
    memset(z, 0, sizeof *z);
    int sliced = d->zero_stage > 0 && d->dpcp > 1, dpcp = sliced ? d->dpcp : 1, me = sliced ? d->dpcp_rank : 0;
    size_t ex = sliced && d->E > 0 ? model_experts_at(d, at, flat) : flat;
    z->part[z->n++] = (struct zero_part){CG_DP, dpcp, me, 0, ex, 0, 0, 0};
    if (ex < flat) /* the experts' replicas: every ep-th of the dp * cp ranks (topo.c) */
        z->part[z->n++] = (struct zero_part){CG_EDP, dpcp / d->ep, me / d->ep, ex, flat - ex, 0, 0, 0};
    for (int k = 0; k < z->n; k++) {
        struct zero_part *p = &z->part[k];
        p->shard = p->n / (size_t)p->ranks;
        p->offset = p->at + (size_t)p->rank * p->shard;
        p->state = z->floats;
        z->floats += p->shard;
    }
}

size_t model_layer_floats_of(const struct model_dims *d, int j)
{
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMS; i++) n += param_layer_floats(d, (enum param_id)i, j);
    return n;
}

size_t model_layer_floats(const struct model_dims *d)
{
    size_t most = 0;
    for (int j = 0; j < d->Lp; j++) {
        size_t n = model_layer_floats_of(d, j);
        most = n > most ? n : most;
    }
    return most;
}

size_t model_rest_floats(const struct model_dims *d)
{
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (!param_table[i].per_layer) n += (model_tensor_size(d, (enum param_id)i) + 15) / 16 * 16;
    return n > 0 ? n : 16;
}

/* --------------------------------------------------------- initialisation */

void model_init_tensor(float *p, const struct model_dims *d, enum param_id id, int slice, uint64_t seed)
{
    const struct param_info *pi = &param_table[id];
    size_t rows, cols, lrows, lcols;
    param_local_shape(d, id, &rows, &cols);
    param_shape(d, id, &lrows, &lcols);
    if (pi->init == INIT_ZERO || pi->init == INIT_ONE) {
        float v = pi->init == INIT_ONE ? 1.0f : 0.0f;
        for (size_t i = 0; i < rows * cols; i++) p[i] = v;
        return;
    }
    double std = 0.02;
    if (pi->init == INIT_NORMAL_SCALED) std = 0.02 / sqrt(2.0 * d->L);
    char key[64];
    param_slice_name(d, id, slice, key, sizeof key);
    uint64_t stream = rng_stream_id(key);
    size_t real_rows = id == P_WTE || id == P_LMHEAD ? (size_t)d->V : lrows; /* padded vocabulary rows stay zero */
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t lr, lc;
            param_logical_index(d, id, r, c, &lr, &lc);
            p[r * cols + c] = lr < real_rows ? (float)(std * rng_normal(seed, stream, lr * lcols + lc)) : 0.0f;
        }
}
