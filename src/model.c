/* model.c -- GPT-2 forward and backward on this rank's layers. */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "log.h"
#include "rng.h"

const struct param_info param_table[NUM_PARAMS] = {
    [P_WTE] = {"wte", 0, 1, INIT_NORMAL, SHARD_ROWS},
    [P_WPE] = {"wpe", 0, 1, INIT_NORMAL, SHARD_NONE},
    [P_LN1W] = {"ln1_w", 1, 0, INIT_ONE, SHARD_NONE, 1},
    [P_LN1B] = {"ln1_b", 1, 0, INIT_ZERO, SHARD_NONE, 1},
    [P_QKVW] = {"qkv_w", 1, 1, INIT_NORMAL, SHARD_ROWS3},
    [P_QKVB] = {"qkv_b", 1, 0, INIT_ZERO, SHARD_ROWS3},
    [P_ATTPROJW] = {"attproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS},
    [P_ATTPROJB] = {"attproj_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_LN2W] = {"ln2_w", 1, 0, INIT_ONE, SHARD_NONE, 1},
    [P_LN2B] = {"ln2_b", 1, 0, INIT_ZERO, SHARD_NONE, 1},
    [P_FCW] = {"fc_w", 1, 1, INIT_NORMAL, SHARD_ROWS},
    [P_FCB] = {"fc_b", 1, 0, INIT_ZERO, SHARD_ROWS},
    [P_FCPROJW] = {"fcproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS},
    [P_FCPROJB] = {"fcproj_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_LNFW] = {"lnf_w", 0, 0, INIT_ONE, SHARD_NONE, 1},
    [P_LNFB] = {"lnf_b", 0, 0, INIT_ZERO, SHARD_NONE, 1},
};

int param_sp_partial(const struct model_dims *d, enum param_id id) { return d->sp && param_table[id].sp_partial; }

void param_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols)
{
    size_t C = (size_t)d->C;
    size_t r = C, c = 1; /* vectors are (n, 1) */
    switch (id) {
    case P_WTE: r = (size_t)d->Vp; c = C; break;
    case P_WPE: r = (size_t)d->T; c = C; break;
    case P_QKVW: r = 3 * C; c = C; break;
    case P_QKVB: r = 3 * C; break;
    case P_ATTPROJW: c = C; break;
    case P_FCW: r = 4 * C; c = C; break;
    case P_FCB: r = 4 * C; break;
    case P_FCPROJW: c = 4 * C; break;
    default: break;
    }
    *rows = r;
    *cols = c;
}

void param_local_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols)
{
    param_shape(d, id, rows, cols);
    enum shard_kind k = param_table[id].shard;
    if (k == SHARD_ROWS || k == SHARD_ROWS3) *rows /= (size_t)d->tp;
    if (k == SHARD_COLS) *cols /= (size_t)d->tp;
}

void param_logical_index(const struct model_dims *d, enum param_id id, size_t r, size_t c, size_t *lr,
                         size_t *lc)
{
    size_t rows, cols, tr = (size_t)d->tp_rank;
    param_local_shape(d, id, &rows, &cols);
    *lr = r;
    *lc = c;
    switch (param_table[id].shard) {
    case SHARD_ROWS: *lr = tr * rows + r; break;
    case SHARD_ROWS3: { /* q, k, v thirds: this rank's heads of each */
        size_t third = rows / 3, blk = r / third;
        *lr = blk * third * (size_t)d->tp + tr * third + r % third;
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
    d->T = (int)cfg->model.seq_len;
    d->V = (int)cfg->model.vocab_size;
    d->Vp = (int)s->Vp;
    d->tp = s->tp;
    d->tp_rank = g->tp_rank;
    d->sp = s->sp;
    d->pp = s->pp;
    d->pp_rank = g->pp_rank;
    d->dp = s->dp;
    d->v = s->v;
    d->Lc = d->L / (d->pp * d->v);
    d->Lp = d->v * d->Lc;
    d->recompute = config_is(cfg->train.recompute, "full")        ? RECOMPUTE_FULL
                   : config_is(cfg->train.recompute, "selective") ? RECOMPUTE_SELECTIVE
                                                                  : RECOMPUTE_NONE;
    d->prec = precision_from_name(cfg->train.precision);
    d->shard_grads = s->zero2;
    int64_t n = cfg->train.recompute_layers;
    d->Lr = d->recompute != RECOMPUTE_FULL ? 0 : n == 0 || n > d->Lc ? d->Lc : (int)n;
}

int model_global_layer(const struct model_dims *d, int j)
{
    int chunk = j / d->Lc;
    return (chunk * d->pp + d->pp_rank) * d->Lc + j % d->Lc;
}

int model_local_layer(const struct model_dims *d, int l)
{
    int s = l / d->Lc; /* virtual stage */
    if (s % d->pp != d->pp_rank) return -1;
    return (s / d->pp) * d->Lc + l % d->Lc;
}

int model_has_embedding(const struct model_dims *d) { return d->pp_rank == 0; }
int model_has_head(const struct model_dims *d) { return d->pp_rank == d->pp - 1; }

/* Does this rank hold tensor id (per-layer tensors: if it holds any layer)? */
static int holds(const struct model_dims *d, enum param_id id)
{
    switch (id) {
    case P_WTE: return model_has_embedding(d) || model_has_head(d); /* tied: both ends */
    case P_WPE: return model_has_embedding(d);
    case P_LNFW:
    case P_LNFB: return model_has_head(d);
    default: return d->Lp > 0;
    }
}

int64_t model_logical_params(const struct model_dims *d) { return shape_params(d->L, d->C, d->T, d->V); }

double model_flops_per_token(const struct model_dims *d)
{
    double n = (double)(model_logical_params(d) - (int64_t)d->T * d->C);
    return 6.0 * n + 12.0 * d->L * d->C * d->T;
}

/* ------------------------------------------------------------ allocation */

static float *carve(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += (n + 15) / 16 * 16; /* keep every tensor 64-byte aligned */
    return p;
}

/* The fields of one layer's activations, `layers` of them per field (att
 * only when with_att); stat marks the LayerNorm statistics, which stay fp32
 * whatever the precision. */
enum { LAYER_FIELDS = 12 };
struct act_field { float **p; size_t n; int stat; };
static void layer_fields(struct act_field *t, struct layer_acts *la, const struct model_dims *d, int B,
                         size_t layers, int with_att)
{
    size_t N = (size_t)B * d->T, C = (size_t)d->C, Cl = C / (size_t)d->tp, S = d->sp ? N / (size_t)d->tp : N;
    size_t NHl = (size_t)(d->NH / d->tp), TT = (size_t)d->T * d->T, n = layers;
    struct act_field f[LAYER_FIELDS] = {
        {&la->ln1, n * N * C, 0}, {&la->ln1_mean, n * S, 1}, {&la->ln1_rstd, n * S, 1},
        {&la->qkv, n * N * 3 * Cl, 0}, {&la->atty, n * N * Cl, 0}, {&la->att, with_att ? n * B * NHl * TT : 0, 0},
        {&la->residual2, n * S * C, 0},
        {&la->ln2, n * N * C, 0}, {&la->ln2_mean, n * S, 1}, {&la->ln2_rstd, n * S, 1},
        {&la->fch, n * N * 4 * Cl, 0}, {&la->fch_gelu, n * N * 4 * Cl, 0},
    };
    memcpy(t, f, sizeof f);
}

/* Lay out one layer's activations, `layers` of them per field, from mem
 * (NULL: just count); att only when with_att.  Returns the floats used. */
static size_t layer_layout(struct layer_acts *la, float *mem, const struct model_dims *d, int B, size_t layers,
                           int with_att)
{
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, la, d, B, layers, with_att);
    size_t total = 0;
    for (int i = 0; i < LAYER_FIELDS; i++) {
        *t[i].p = mem && t[i].n ? mem + total : NULL;
        total += (t[i].n + 15) / 16 * 16;
    }
    return total;
}

/* bf16/fp16: a stored layer is kept packed in 16-bit elements (the
 * statistics as the two halves of their fp32 bits): its size in uint16. */
static size_t packed_layer_u16(const struct model_dims *d, int B, int with_att)
{
    struct layer_acts probe;
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, &probe, d, B, 1, with_att);
    size_t total = 0;
    for (int i = 0; i < LAYER_FIELDS; i++) total += ((t[i].stat ? 2 : 1) * t[i].n + 31) / 32 * 32;
    return total;
}

/* Store one layer's activations (la, computed in fp32 containers holding
 * values of the format) into dst, or load them back: exact both ways. */
static void pack_layer(const struct model *m, uint16_t *dst, struct layer_acts *la, int with_att)
{
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, la, &m->d, m->B, 1, with_att);
    for (int i = 0; i < LAYER_FIELDS; i++) {
        if (t[i].stat) m->k->copy(dst, *t[i].p, t[i].n * sizeof(float));
        else if (t[i].n) m->k->lp_pack(m->d.prec, dst, *t[i].p, t[i].n);
        dst += ((t[i].stat ? 2 : 1) * t[i].n + 31) / 32 * 32;
    }
}

static void unpack_layer(const struct model *m, struct layer_acts *la, const uint16_t *src, int with_att)
{
    struct act_field t[LAYER_FIELDS];
    layer_fields(t, la, &m->d, m->B, 1, with_att);
    for (int i = 0; i < LAYER_FIELDS; i++) {
        if (t[i].stat) m->k->copy(*t[i].p, src, t[i].n * sizeof(float));
        else if (t[i].n) m->k->lp_unpack(m->d.prec, *t[i].p, src, t[i].n);
        src += ((t[i].stat ? 2 : 1) * t[i].n + 31) / 32 * 32;
    }
}

/* Are the stored layers' activations kept packed, and with att? */
static int packed(const struct model_dims *d) { return d->prec != PREC_FP32; }
static int stores_att(const struct model_dims *d) { return d->recompute != RECOMPUTE_SELECTIVE; }

/* One micro-batch's activations for one chunk (head buffers only where the
 * head lives), carved from mem (NULL: just count). */
static size_t slot_layout(struct chunk_acts *a, float *mem, const struct model_dims *d, int B)
{
    size_t N = (size_t)B * d->T, C = (size_t)d->C, Lc = (size_t)d->Lc, tp = (size_t)d->tp;
    size_t S = d->sp ? N / tp : N, H = model_has_head(d) ? 1 : 0;
    struct { float **p; size_t n; } t[] = {
        {(float **)&a->inputs, N}, {(float **)&a->targets, N},
        {&a->input, S * C}, {&a->dout, S * C}, {&a->residual3, Lc * S * C},
        {&a->lnf, H * N * C}, {&a->lnf_mean, H * S}, {&a->lnf_rstd, H * S},
        {&a->logits, H * N * (size_t)d->Vp / tp}, {&a->ce_max, H * N}, {&a->ce_sums, H * 2 * N},
        {&a->losses, H * N},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (mem) *t[i].p = mem + total; /* int32 and float are both 4 bytes */
        total += (t[i].n + 15) / 16 * 16;
    }
    /* the layers not recomputed in full keep everything; att only without
     * selective recomputation; in bf16/fp16 packed in 16 bits */
    size_t kept = Lc - (size_t)d->Lr;
    if (packed(d)) {
        memset(&a->stored, 0, sizeof a->stored);
        size_t u16 = kept * packed_layer_u16(d, B, stores_att(d));
        a->packed = mem && u16 ? (uint16_t *)(mem + total) : NULL;
        total += (u16 / 2 + 15) / 16 * 16;
    } else {
        a->packed = NULL;
        total += layer_layout(&a->stored, mem ? mem + total : NULL, d, B, kept, stores_att(d));
    }
    a->mb = -1;
    return total;
}

static size_t scratch_layout(struct scratch *s, float *mem, const struct model_dims *d, int B)
{
    size_t N = (size_t)B * d->T, C = (size_t)d->C, Cl = C / (size_t)d->tp, S = d->sp ? N / (size_t)d->tp : N;
    size_t NHl = (size_t)(d->NH / d->tp), TT = (size_t)d->T * d->T;
    int sel = d->recompute == RECOMPUTE_SELECTIVE;
    struct { float **p; size_t n; } t[] = {
        {&s->full, N * C}, {&s->part, S * C}, {&s->dresidual, S * C}, {&s->dfull, N * C},
        {&s->dln_full, N * C}, {&s->dln_part, S * C}, {&s->datty, N * Cl}, {&s->dqkv, N * 3 * Cl},
        {&s->dfch, N * 4 * Cl}, {&s->dfch_gelu, N * 4 * Cl}, {&s->datt, B * NHl * TT},
        {&s->atty_discard, sel ? N * Cl : 0},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (mem) *t[i].p = mem + total;
        total += (t[i].n + 15) / 16 * 16;
    }
    /* one layer's worth for the recomputed ones (full) and the packed ones
     * (bf16/fp16): all of it; the attention probabilities (selective) */
    if (d->recompute == RECOMPUTE_FULL || packed(d)) {
        total += layer_layout(&s->layer, mem ? mem + total : NULL, d, B, 1, 1);
    } else if (sel) {
        size_t att = (size_t)B * NHl * TT;
        memset(&s->layer, 0, sizeof s->layer);
        if (mem) s->layer.att = mem + total;
        total += (att + 15) / 16 * 16;
    } else {
        memset(&s->layer, 0, sizeof s->layer);
    }
    return total;
}

size_t model_slot_floats(const struct model_dims *d, int B)
{
    struct chunk_acts probe;
    return slot_layout(&probe, NULL, d, B);
}

size_t model_scratch_floats(const struct model_dims *d, int B)
{
    struct scratch probe;
    return scratch_layout(&probe, NULL, d, B);
}

size_t model_tensor_size(const struct model_dims *d, enum param_id id)
{
    size_t r, c;
    param_local_shape(d, id, &r, &c);
    return holds(d, id) ? r * c * (param_table[id].per_layer ? (size_t)d->Lp : 1) : 0;
}

size_t model_layer_floats(const struct model_dims *d)
{
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (param_table[i].per_layer && d->Lp > 0) n += model_tensor_size(d, (enum param_id)i) / (size_t)d->Lp;
    return n;
}

size_t model_rest_grad_floats(const struct model_dims *d)
{
    size_t n = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        if (!param_table[i].per_layer) n += (model_tensor_size(d, (enum param_id)i) + 15) / 16 * 16;
    return n > 0 ? n : 16;
}

static void activations_alloc(struct model *m, int nslots)
{
    size_t per = model_slot_floats(&m->d, m->B), scr = model_scratch_floats(&m->d, m->B);
    float *mem = m->k->alloc((per * (size_t)nslots + scr) * sizeof(float));
    m->nslots = nslots;
    m->slot = xcalloc((size_t)nslots, sizeof *m->slot);
    for (int i = 0; i < nslots; i++) slot_layout(&m->slot[i], mem + per * (size_t)i, &m->d, m->B);
    scratch_layout(&m->scr, mem + per * (size_t)nslots, &m->d, m->B);
    m->act_bytes = (per * (size_t)nslots + scr) * sizeof(float);
}

struct chunk_acts *model_slot(struct model *m, int mb, int chunk)
{
    struct chunk_acts *free_slot = NULL;
    for (int i = 0; i < m->nslots; i++) {
        if (m->slot[i].mb == mb && m->slot[i].chunk == chunk) return &m->slot[i];
        if (m->slot[i].mb < 0 && !free_slot) free_slot = &m->slot[i];
    }
    if (!free_slot)
        die("no free activation slot for micro-batch %d, chunk %d (%d in flight): the schedule holds more "
            "micro-batches than planned", mb, chunk, m->nslots);
    free_slot->mb = mb;
    free_slot->chunk = chunk;
    return free_slot;
}

void model_slot_release(struct chunk_acts *a) { a->mb = -1; }

/* --------------------------------------------------------- initialisation */

/* Each element draws the number of its logical position, so every
 * decomposition starts from the serial run's weights. */
static void init_tensor(float *p, const struct model_dims *d, enum param_id id, int layer, uint64_t seed)
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
    if (pi->per_layer) snprintf(key, sizeof key, "h.%d/%s", layer, pi->name);
    else snprintf(key, sizeof key, "%s", pi->name);
    uint64_t stream = rng_stream_id(key);
    size_t real_rows = id == P_WTE ? (size_t)d->V : lrows; /* padded vocabulary rows stay zero */
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t lr, lc;
            param_logical_index(d, id, r, c, &lr, &lc);
            p[r * cols + c] = lr < real_rows ? (float)(std * rng_normal(seed, stream, lr * lcols + lc)) : 0.0f;
        }
}

void model_init(struct model *m, const struct model_dims *d, const struct kernels *k, int B, int nslots,
                uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->d = *d;
    m->k = k;
    m->B = B;
    m->N = B * d->T;
    m->Ns = d->sp ? m->N / d->tp : m->N;
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        m->size[i] = model_tensor_size(d, (enum param_id)i);
        total += (m->size[i] + 15) / 16 * 16;
    }
    size_t quantum = 16 * (size_t)(d->dp > 0 ? d->dp : 1);
    m->flat = (total + quantum - 1) / quantum * quantum;
    m->params_mem = k->alloc(m->flat * sizeof(float));
    m->grads_mem = k->alloc((d->shard_grads ? model_rest_grad_floats(d) : m->flat) * sizeof(float));
    float *pc = m->params_mem, *gc = m->grads_mem;
    m->num_params = 0;
    size_t most = 1; /* the largest tensor slice: the host staging of the initial values */
    for (int i = 0; i < NUM_PARAMS; i++) most = m->size[i] > most ? m->size[i] : most;
    float *host = k->on_device ? xalloc_aligned(most * sizeof(float)) : NULL;
    for (int i = 0; i < NUM_PARAMS; i++) {
        m->param[i] = carve(&pc, m->size[i]);
        m->grad[i] = d->shard_grads && param_table[i].per_layer ? NULL : carve(&gc, m->size[i]);
        m->num_params += m->size[i];
        int layers = m->size[i] == 0 ? 0 : param_table[i].per_layer ? d->Lp : 1;
        size_t per = layers ? m->size[i] / (size_t)layers : 0;
        for (int j = 0; j < layers; j++) {
            float *dst = m->param[i] + (size_t)j * per;
            init_tensor(host ? host : dst, d, (enum param_id)i, model_global_layer(d, j), seed);
            if (host) k->to_device(dst, host, per * sizeof(float));
        }
    }
    free(host);
    m->dwte_embed = k->alloc((m->size[P_WTE] ? m->size[P_WTE] : 1) * sizeof(float));
    m->host = xalloc_aligned(2 * (size_t)m->N * sizeof(float)); /* token losses, or a micro-batch's tokens */
    m->bad_order = LONG_MAX;
    activations_alloc(m, nslots);
}

void model_set_tokens(struct model *m, struct chunk_acts *a, const int32_t *inputs, const int32_t *targets)
{
    m->k->to_device(a->inputs, inputs, (size_t)m->N * sizeof *inputs);
    m->k->to_device(a->targets, targets, (size_t)m->N * sizeof *targets);
}

void model_free(struct model *m)
{
    m->k->release(m->params_mem);
    m->k->release(m->grads_mem);
    m->k->release(m->dwte_embed);
    free(m->host);
    if (m->slot) m->k->release(m->slot[0].inputs); /* the one activation allocation */
    free(m->slot);
    memset(m, 0, sizeof *m);
}

void model_zero_grad(struct model *m)
{
    for (int i = 0; i < NUM_PARAMS; i++)
        if (m->grad[i]) m->k->zero(m->grad[i], m->size[i] * sizeof(float));
    m->k->zero(m->dwte_embed, m->size[P_WTE] * sizeof(float));
}

void model_merge_embedding_grad(struct model *m)
{
    m->k->residual_forward(m->grad[P_WTE], m->grad[P_WTE], m->dwte_embed, m->size[P_WTE]);
}

static void tensor_name(const struct model *m, int id, int j, char *name, size_t len)
{
    if (param_table[id].per_layer) snprintf(name, len, "h.%d/%s", model_global_layer(&m->d, j), param_table[id].name);
    else snprintf(name, len, "%s", param_table[id].name);
}

int model_first_nonfinite_param(const struct model *m, char *name, size_t len)
{
    for (int id = 0; id < NUM_PARAMS; id++) {
        int layers = m->size[id] == 0 ? 0 : param_table[id].per_layer ? m->d.Lp : 1;
        size_t per = layers ? m->size[id] / (size_t)layers : 0;
        for (int j = 0; j < layers; j++)
            if (m->k->count_nonfinite(m->param[id] + (size_t)j * per, per)) {
                tensor_name(m, id, j, name, len);
                return 1;
            }
    }
    return 0;
}

/* ------------------------------------------- outputs in storage precision */

/* Where a forward output sits in the model's order: the embedding, then each
 * global layer's outputs in turn, then the head. */
enum { OUT_PER_LAYER = 16 };
static long out_order(const struct model *m, int layer, int op)
{
    return (long)(layer + 1) * OUT_PER_LAYER + op; /* layer -1: embedding, L: head */
}

/* A forward output (n floats at x) is stored in the run's precision: rounded
 * here (a no-op in fp32).  While watching, the first that holds a value that
 * is not finite is remembered by name. */
static void fwd_out(struct model *m, float *x, size_t n, int layer, int op, const char *what)
{
    m->k->lp_round(m->d.prec, x, n);
    if (!m->watch || !m->k->count_nonfinite(x, n)) return;
    long order = out_order(m, layer, op);
    if (order >= m->bad_order) return;
    m->bad_order = order;
    if (layer < 0) snprintf(m->bad_name, sizeof m->bad_name, "embedding output");
    else if (layer >= m->d.L) snprintf(m->bad_name, sizeof m->bad_name, "head: %s", what);
    else snprintf(m->bad_name, sizeof m->bad_name, "h.%d/%s", layer, what);
}

/* An activation gradient, stored in the run's precision too. */
static void bwd_out(const struct model *m, float *x, size_t n) { m->k->lp_round(m->d.prec, x, n); }

/* ------------------------------------------------ the TP region operators */

/* Megatron's conjugate pairs over tp_comm.  Without sequence parallelism the
 * residual stream is replicated: entering the TP region is the identity
 * (all-reduce in backward) and leaving it an all-reduce.  With it the stream
 * holds Ns = N/tp rows: entering is an all-gather (reduce-scatter in
 * backward), leaving a reduce-scatter (all-gather in backward). */

/* Rows (Ns,C) -> the full (N,C) the column-parallel matmul reads. */
static const float *gather_to_tp(const struct model *m, struct comm *c, float *full, const float *rows)
{
    if (!m->d.sp) return rows;
    comm_allgather_f32(c, CG_TP, full, rows, (size_t)m->Ns * m->d.C);
    return full;
}

/* Partial sums (N,C) of a row-parallel matmul -> the stream's rows. */
static const float *reduce_from_tp(const struct model *m, struct comm *c, float *rows, float *partial)
{
    if (m->d.tp == 1) return partial;
    if (!m->d.sp) {
        comm_allreduce_sum_f32(c, CG_TP, partial, (size_t)m->N * m->d.C);
        return partial;
    }
    comm_reduce_scatter_f32(c, CG_TP, rows, partial, (size_t)m->Ns * m->d.C);
    return rows;
}

/* LayerNorm of the stream's rows, its output gathered to (N,C) in full. */
static void layernorm_to_tp(struct model *m, struct comm *c, float *full, float *mean, float *rstd,
                            const float *inp, const float *w, const float *b, int layer, int op, const char *what)
{
    float *out = m->d.sp ? m->scr.part : full;
    m->k->layernorm_forward(out, mean, rstd, inp, w, b, m->Ns, m->d.C);
    fwd_out(m, out, (size_t)m->Ns * m->d.C, layer, op, what);
    gather_to_tp(m, c, full, out);
}

/* ----------------------------------------------------------------- forward */

/* Local layer j's slice of a per-layer tensor. */
#define LAYER(base, id, j) ((base)[id] + (size_t)(j) * (m->size[id] / (size_t)m->d.Lp))

/* Where layer k of slot a's chunk keeps its activations: the shared
 * one-layer scratch if it is recomputed in full, else its place among the
 * slot's stored layers (att in the scratch under selective recomputation). */
static void layer_acts_of(const struct model *m, const struct chunk_acts *a, int k, struct layer_acts *la)
{
    const struct model_dims *d = &m->d;
    if (k < d->Lr || packed(d)) { /* recomputed, or (un)packed through the scratch */
        *la = m->scr.layer;
        return;
    }
    size_t i = (size_t)(k - d->Lr), N = (size_t)m->N, S = (size_t)m->Ns, C = (size_t)d->C;
    size_t Cl = C / (size_t)d->tp, att = (size_t)m->B * (size_t)(d->NH / d->tp) * d->T * d->T;
    const struct layer_acts *st = &a->stored;
    la->ln1 = st->ln1 + i * N * C;
    la->ln1_mean = st->ln1_mean + i * S;
    la->ln1_rstd = st->ln1_rstd + i * S;
    la->qkv = st->qkv + i * N * 3 * Cl;
    la->atty = st->atty + i * N * Cl;
    la->att = d->recompute == RECOMPUTE_SELECTIVE ? m->scr.layer.att : st->att + i * att;
    la->residual2 = st->residual2 + i * S * C;
    la->ln2 = st->ln2 + i * N * C;
    la->ln2_mean = st->ln2_mean + i * S;
    la->ln2_rstd = st->ln2_rstd + i * S;
    la->fch = st->fch + i * N * 4 * Cl;
    la->fch_gelu = st->fch_gelu + i * N * 4 * Cl;
}

/* Layer k of slot a's chunk (local layer j = chunk * Lc + k). */
static void block_forward(struct model *m, struct comm *c, struct chunk_acts *a, int k, const float *residual)
{
    const struct model_dims *d = &m->d;
    struct scratch *s = &m->scr;
    int B = m->B, T = d->T, C = d->C, Cl = C / d->tp, NHl = d->NH / d->tp, N = m->N;
    int j = a->chunk * d->Lc + k, l = model_global_layer(d, j);
    size_t SC = (size_t)m->Ns * C, NC = (size_t)N * C, NCl = (size_t)N * Cl;
    float *const *P = m->param;
    const float *no_bias = NULL;
    int root = d->tp_rank == 0; /* adds the replicated bias of a row-parallel matmul once */
    struct layer_acts la;
    layer_acts_of(m, a, k, &la);
    float *l_res3 = a->residual3 + k * SC;

    layernorm_to_tp(m, c, la.ln1, la.ln1_mean, la.ln1_rstd, residual, LAYER(P, P_LN1W, j), LAYER(P, P_LN1B, j), l, 0,
                    "ln1");
    m->k->matmul_forward(d->prec, la.qkv, la.ln1, LAYER(P, P_QKVW, j), LAYER(P, P_QKVB, j), N, C,
                         3 * Cl); /* column-parallel */
    fwd_out(m, la.qkv, 3 * NCl, l, 1, "qkv");
    m->k->attention_forward(d->prec, la.atty, la.att, la.qkv, B, T, Cl, NHl);
    fwd_out(m, la.att, (size_t)B * NHl * T * T, l, 2, "attention probabilities");
    fwd_out(m, la.atty, NCl, l, 3, "attention output");
    m->k->matmul_forward(d->prec, s->full, la.atty, LAYER(P, P_ATTPROJW, j), root ? LAYER(P, P_ATTPROJB, j) : no_bias,
                         N, Cl, C); /* row-parallel */
    fwd_out(m, s->full, NC, l, 4, "attention projection");
    m->k->residual_forward(la.residual2, residual, reduce_from_tp(m, c, s->part, s->full), SC);
    fwd_out(m, la.residual2, SC, l, 5, "residual after attention");

    layernorm_to_tp(m, c, la.ln2, la.ln2_mean, la.ln2_rstd, la.residual2, LAYER(P, P_LN2W, j), LAYER(P, P_LN2B, j),
                    l, 6, "ln2");
    m->k->matmul_forward(d->prec, la.fch, la.ln2, LAYER(P, P_FCW, j), LAYER(P, P_FCB, j), N, C, 4 * Cl);
    fwd_out(m, la.fch, 4 * NCl, l, 7, "fc");
    m->k->gelu_forward(la.fch_gelu, la.fch, 4 * NCl);
    fwd_out(m, la.fch_gelu, 4 * NCl, l, 8, "gelu");
    m->k->matmul_forward(d->prec, s->full, la.fch_gelu, LAYER(P, P_FCPROJW, j),
                         root ? LAYER(P, P_FCPROJB, j) : no_bias, N, 4 * Cl, C);
    fwd_out(m, s->full, NC, l, 9, "fc projection");
    m->k->residual_forward(l_res3, la.residual2, reduce_from_tp(m, c, s->part, s->full), SC);
    fwd_out(m, l_res3, SC, l, 10, "block output");
    if (packed(d) && k >= d->Lr) /* a stored layer (a recomputation stores nothing: k < Lr) */
        pack_layer(m, a->packed + (size_t)(k - d->Lr) * packed_layer_u16(d, B, stores_att(d)), &la, stores_att(d));
}

/* Vocabulary-parallel embedding: each rank looks up its rows, the sum over
 * ranks is the full lookup; tp rank 0 adds the positions. */
static void embed_forward(struct model *m, struct comm *c, struct chunk_acts *a)
{
    const struct model_dims *d = &m->d;
    int Vs = d->Vp / d->tp;
    float *out = d->tp == 1 ? a->input : m->scr.full;
    m->k->encoder_forward(out, a->inputs, m->param[P_WTE], d->tp_rank == 0 ? m->param[P_WPE] : NULL, m->B, d->T, d->C,
                    d->tp_rank * Vs, Vs);
    if (d->tp > 1)
        m->k->copy(a->input, reduce_from_tp(m, c, m->scr.part, m->scr.full), (size_t)m->Ns * d->C * sizeof(float));
    fwd_out(m, a->input, (size_t)m->Ns * d->C, -1, 0, "embedding");
}

/* Final LayerNorm, tied LM head and vocabulary-parallel cross-entropy: only
 * maxima and sums cross ranks.  Returns the sum of the token losses. */
static double head_forward(struct model *m, struct comm *c, struct chunk_acts *a, const float *residual)
{
    const struct model_dims *d = &m->d;
    int N = m->N, Vs = d->Vp / d->tp, v0 = d->tp_rank * Vs;
    layernorm_to_tp(m, c, a->lnf, a->lnf_mean, a->lnf_rstd, residual, m->param[P_LNFW], m->param[P_LNFB], d->L, 0,
                    "final layernorm");
    m->k->matmul_forward(d->prec, a->logits, a->lnf, m->param[P_WTE], NULL, N, d->C, Vs);
    fwd_out(m, a->logits, (size_t)N * Vs, d->L, 1, "logits");
    m->k->crossentropy_max(a->ce_max, a->logits, N, Vs, v0, d->V);
    if (d->tp > 1) comm_allreduce_max_f32(c, CG_TP, a->ce_max, (size_t)N);
    m->k->crossentropy_sumexp(a->ce_sums, a->ce_sums + N, a->logits, a->ce_max, a->targets, N, Vs, v0, d->V);
    if (d->tp > 1) comm_allreduce_sum_f32(c, CG_TP, a->ce_sums, 2 * (size_t)N);
    m->k->crossentropy_loss(a->losses, a->ce_max, a->ce_sums, a->ce_sums + N, N); /* in fp32 */
    if (m->watch && m->k->count_nonfinite(a->losses, (size_t)N) && out_order(m, d->L, 2) < m->bad_order) {
        m->bad_order = out_order(m, d->L, 2);
        snprintf(m->bad_name, sizeof m->bad_name, "head: token losses");
    }
    const float *losses = a->losses;
    if (m->k->on_device) {
        m->k->to_host(m->host, a->losses, (size_t)N * sizeof(float));
        losses = m->host;
    }
    double sum = 0;
    for (int i = 0; i < N; i++) sum += losses[i];
    return sum;
}

static int first_stage(const struct model *m, const struct chunk_acts *a)
{
    return a->chunk == 0 && model_has_embedding(&m->d);
}

static int last_stage(const struct model *m, const struct chunk_acts *a)
{
    return a->chunk == m->d.v - 1 && model_has_head(&m->d);
}

double model_chunk_forward(struct model *m, struct comm *c, struct chunk_acts *a)
{
    size_t SC = (size_t)m->Ns * m->d.C;
    if (first_stage(m, a)) embed_forward(m, c, a);
    const float *residual = a->input;
    for (int k = 0; k < m->d.Lc; k++) {
        block_forward(m, c, a, k, residual);
        residual = a->residual3 + k * SC;
    }
    return last_stage(m, a) ? head_forward(m, c, a, residual) : 0.0;
}

/* ---------------------------------------------------------------- backward */

/* The gradient of a LayerNorm output (partial sums over tp of a column-
 * parallel matmul's input gradient) back into the residual stream. */
static void layernorm_from_tp(struct model *m, struct comm *c, float *dln_full, float *dw, float *db,
                              const float *inp, const float *w, const float *mean, const float *rstd)
{
    bwd_out(m, dln_full, (size_t)m->N * m->d.C);
    const float *dln = reduce_from_tp(m, c, m->scr.dln_part, dln_full);
    m->k->layernorm_backward(m->scr.dresidual, dw, db, dln, inp, w, mean, rstd, m->Ns, m->d.C);
    bwd_out(m, m->scr.dresidual, (size_t)m->Ns * m->d.C);
}

/* Where local layer j's parameter gradients accumulate: their places in
 * grad[], or (ZeRO-2) the buffer the layer_grads hook hands out. */
static void layer_grads(struct model *m, int j, float *G[NUM_PARAMS])
{
    float *buf = m->layer_grads ? m->layer_grads(m->layer_grads_ctx, j) : NULL;
    for (int id = 0; id < NUM_PARAMS; id++) {
        if (!param_table[id].per_layer) {
            G[id] = m->grad[id];
            continue;
        }
        size_t per = m->size[id] / (size_t)m->d.Lp;
        G[id] = buf ? buf : m->grad[id] + (size_t)j * per;
        if (buf) buf += per;
    }
}

static void block_backward(struct model *m, struct comm *c, struct chunk_acts *a, int k, const float *l_in)
{
    const struct model_dims *d = &m->d;
    struct scratch *s = &m->scr;
    int B = m->B, T = d->T, C = d->C, Cl = C / d->tp, NHl = d->NH / d->tp, N = m->N;
    int j = a->chunk * d->Lc + k;
    float *const *P = m->param, *G[NUM_PARAMS];
    layer_grads(m, j, G);
    struct layer_acts la;
    layer_acts_of(m, a, k, &la);
    /* recomputation: the same arithmetic as the forward, so the result is bitwise the same */
    if (k < d->Lr) block_forward(m, c, a, k, l_in);
    else if (packed(d))
        unpack_layer(m, &la, a->packed + (size_t)(k - d->Lr) * packed_layer_u16(d, B, stores_att(d)), stores_att(d));
    if (k >= d->Lr && d->recompute == RECOMPUTE_SELECTIVE) {
        m->k->attention_forward(d->prec, s->atty_discard, la.att, la.qkv, B, T, Cl, NHl);
        m->k->lp_round(d->prec, la.att, (size_t)B * NHl * T * T); /* as stored in the forward */
    }

    /* MLP; dresidual holds d(block output), which is also d(residual2) through the skip */
    const float *dout = gather_to_tp(m, c, s->dfull, s->dresidual);
    m->k->matmul_backward(d->prec, s->dfch_gelu, G[P_FCPROJW], G[P_FCPROJB], dout, la.fch_gelu,
                    LAYER(P, P_FCPROJW, j), N, 4 * Cl, C);
    bwd_out(m, s->dfch_gelu, 4 * (size_t)N * Cl);
    m->k->gelu_backward(s->dfch, la.fch, s->dfch_gelu, 4 * (size_t)N * Cl);
    bwd_out(m, s->dfch, 4 * (size_t)N * Cl);
    m->k->matmul_backward(d->prec, s->dln_full, G[P_FCW], G[P_FCB], s->dfch, la.ln2, LAYER(P, P_FCW, j), N, C,
                    4 * Cl);
    layernorm_from_tp(m, c, s->dln_full, G[P_LN2W], G[P_LN2B], la.residual2, LAYER(P, P_LN2W, j),
                      la.ln2_mean, la.ln2_rstd);
    /* attention; dresidual now holds d(residual2) = d(block input) through the skip */
    dout = gather_to_tp(m, c, s->dfull, s->dresidual);
    m->k->matmul_backward(d->prec, s->datty, G[P_ATTPROJW], G[P_ATTPROJB], dout, la.atty,
                    LAYER(P, P_ATTPROJW, j), N, Cl, C);
    bwd_out(m, s->datty, (size_t)N * Cl);
    m->k->attention_backward(d->prec, s->dqkv, s->datt, s->datty, la.qkv, la.att, B, T, Cl, NHl);
    bwd_out(m, s->dqkv, 3 * (size_t)N * Cl);
    m->k->matmul_backward(d->prec, s->dln_full, G[P_QKVW], G[P_QKVB], s->dqkv, la.ln1, LAYER(P, P_QKVW, j), N,
                    C, 3 * Cl);
    layernorm_from_tp(m, c, s->dln_full, G[P_LN1W], G[P_LN1B], l_in, LAYER(P, P_LN1W, j),
                      la.ln1_mean, la.ln1_rstd);
}

/* Cross-entropy and the tied LM head; leaves d(chunk output) in dresidual.
 * The head's share of wte's gradient goes to grad[P_WTE]. */
static void head_backward(struct model *m, struct comm *c, struct chunk_acts *a, const float *residual, float dloss)
{
    const struct model_dims *d = &m->d;
    int N = m->N, C = d->C, Vs = d->Vp / d->tp, v0 = d->tp_rank * Vs;
    m->k->crossentropy_backward(a->logits, a->logits, a->ce_max, a->ce_sums, a->targets, dloss, N, Vs, v0, d->V);
    bwd_out(m, a->logits, (size_t)N * Vs);
    m->k->matmul_backward(d->prec, m->scr.dln_full, m->grad[P_WTE], NULL, a->logits, a->lnf, m->param[P_WTE], N, C,
                          Vs);
    m->k->zero(m->scr.dresidual, (size_t)m->Ns * C * sizeof(float));
    layernorm_from_tp(m, c, m->scr.dln_full, m->grad[P_LNFW], m->grad[P_LNFB], residual, m->param[P_LNFW],
                      a->lnf_mean, a->lnf_rstd);
}

/* Every tp rank needs the full gradient of the embedding output: its
 * vocabulary rows may be used anywhere in the batch.  wte's share goes to
 * dwte_embed (summed with the head's once per step, in a fixed order). */
static void embed_backward(struct model *m, struct comm *c, struct chunk_acts *a)
{
    const struct model_dims *d = &m->d;
    int Vs = d->Vp / d->tp;
    const float *dout = gather_to_tp(m, c, m->scr.dfull, m->scr.dresidual);
    m->k->encoder_backward(m->dwte_embed, m->grad[P_WPE], dout, a->inputs, m->B, d->T, d->C, d->tp_rank * Vs, Vs);
}

void model_chunk_backward(struct model *m, struct comm *c, struct chunk_acts *a, float dloss)
{
    size_t SC = (size_t)m->Ns * m->d.C;
    int Lc = m->d.Lc;
    if (last_stage(m, a)) head_backward(m, c, a, Lc > 0 ? a->residual3 + (size_t)(Lc - 1) * SC : a->input, dloss);
    else m->k->copy(m->scr.dresidual, a->dout, SC * sizeof(float));
    for (int k = Lc - 1; k >= 0; k--) {
        block_backward(m, c, a, k, k == 0 ? a->input : a->residual3 + (size_t)(k - 1) * SC);
        if (m->layer_done) m->layer_done(m->layer_done_ctx, a->chunk * Lc + k);
    }
    if (first_stage(m, a)) embed_backward(m, c, a);
}

double model_forward(struct model *m, struct comm *c, const int32_t *inputs, const int32_t *targets)
{
    struct chunk_acts *a = &m->slot[0];
    a->chunk = 0;
    model_set_tokens(m, a, inputs, targets);
    return model_chunk_forward(m, c, a);
}

void model_backward(struct model *m, struct comm *c, float dloss)
{
    model_chunk_backward(m, c, &m->slot[0], dloss);
}
