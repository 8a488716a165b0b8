/* model.c -- GPT-2 forward and backward on this rank's layers. */
#include "model.h"

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
    [P_LN1W] = {"ln1_w", 1, 0, INIT_ONE, SHARD_NONE},
    [P_LN1B] = {"ln1_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_QKVW] = {"qkv_w", 1, 1, INIT_NORMAL, SHARD_ROWS3},
    [P_QKVB] = {"qkv_b", 1, 0, INIT_ZERO, SHARD_ROWS3},
    [P_ATTPROJW] = {"attproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS},
    [P_ATTPROJB] = {"attproj_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_LN2W] = {"ln2_w", 1, 0, INIT_ONE, SHARD_NONE},
    [P_LN2B] = {"ln2_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_FCW] = {"fc_w", 1, 1, INIT_NORMAL, SHARD_ROWS},
    [P_FCB] = {"fc_b", 1, 0, INIT_ZERO, SHARD_ROWS},
    [P_FCPROJW] = {"fcproj_w", 1, 1, INIT_NORMAL_SCALED, SHARD_COLS},
    [P_FCPROJB] = {"fcproj_b", 1, 0, INIT_ZERO, SHARD_NONE},
    [P_LNFW] = {"lnf_w", 0, 0, INIT_ONE, SHARD_NONE},
    [P_LNFB] = {"lnf_b", 0, 0, INIT_ZERO, SHARD_NONE},
};

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

void model_dims_init(struct model_dims *d, const struct config *cfg, const struct grid *g)
{
    memset(d, 0, sizeof *d);
    d->L = (int)cfg->model.n_layer;
    d->C = (int)cfg->model.d_model;
    d->NH = (int)cfg->model.n_head;
    d->HS = d->C / d->NH;
    d->T = (int)cfg->model.seq_len;
    d->V = (int)cfg->model.vocab_size;
    int mult = 128 * g->tp;
    d->Vp = (d->V + mult - 1) / mult * mult;
    d->Lp = d->L / g->pp;
    d->l0 = g->pp_rank * d->Lp;
    d->tp = g->tp;
    d->tp_rank = g->tp_rank;
    d->sp = cfg->parallel.sequence_parallel && g->tp > 1;
}

int64_t model_logical_params(const struct model_dims *d)
{
    int64_t C = d->C, L = d->L;
    int64_t per_layer = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
    return (int64_t)d->V * C + (int64_t)d->T * C + L * per_layer + 2 * C;
}

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

static void activations_alloc(struct activations *a, const struct model_dims *d, int B, int Ns)
{
    size_t N = (size_t)B * d->T, C = (size_t)d->C, Lp = (size_t)d->Lp, tp = (size_t)d->tp;
    size_t NHl = (size_t)(d->NH / d->tp), TT = (size_t)d->T * d->T, Cl = C / tp, S = (size_t)Ns;
    struct { float **p; size_t n; } t[] = {
        {&a->encoded, S * C},
        {&a->ln1, Lp * N * C}, {&a->ln1_mean, Lp * S}, {&a->ln1_rstd, Lp * S},
        {&a->qkv, Lp * N * 3 * Cl}, {&a->atty, Lp * N * Cl}, {&a->att, Lp * B * NHl * TT},
        {&a->residual2, Lp * S * C},
        {&a->ln2, Lp * N * C}, {&a->ln2_mean, Lp * S}, {&a->ln2_rstd, Lp * S},
        {&a->fch, Lp * N * 4 * Cl}, {&a->fch_gelu, Lp * N * 4 * Cl},
        {&a->residual3, Lp * S * C},
        {&a->lnf, N * C}, {&a->lnf_mean, S}, {&a->lnf_rstd, S},
        {&a->logits, N * (size_t)d->Vp / tp}, {&a->ce_max, N}, {&a->ce_sums, 2 * N}, {&a->losses, N},
        {&a->full, N * C}, {&a->part, S * C}, {&a->dresidual, S * C}, {&a->dfull, N * C},
        {&a->dln_full, N * C}, {&a->dln_part, S * C}, {&a->datty, N * Cl}, {&a->dqkv, N * 3 * Cl},
        {&a->dfch, N * 4 * Cl}, {&a->dfch_gelu, N * 4 * Cl}, {&a->datt, B * NHl * TT},
    };
    size_t total = 0, count = sizeof t / sizeof t[0];
    for (size_t i = 0; i < count; i++) total += (t[i].n + 15) / 16 * 16;
    float *cur = xalloc_aligned(total * sizeof(float));
    for (size_t i = 0; i < count; i++) *t[i].p = carve(&cur, t[i].n);
    a->bytes = total * sizeof(float);
}

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

void model_init(struct model *m, const struct model_dims *d, int B, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->d = *d;
    m->B = B;
    m->N = B * d->T;
    m->Ns = d->sp ? m->N / d->tp : m->N;
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t r, c;
        param_local_shape(d, (enum param_id)i, &r, &c);
        m->size[i] = r * c * (param_table[i].per_layer ? (size_t)d->Lp : 1);
        total += (m->size[i] + 15) / 16 * 16;
    }
    m->params_mem = xalloc_aligned(total * sizeof(float));
    m->grads_mem = xalloc_aligned(total * sizeof(float));
    float *pc = m->params_mem, *gc = m->grads_mem;
    m->num_params = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        m->param[i] = carve(&pc, m->size[i]);
        m->grad[i] = carve(&gc, m->size[i]);
        m->num_params += m->size[i];
        int layers = param_table[i].per_layer ? d->Lp : 1;
        size_t per = m->size[i] / (size_t)layers;
        for (int l = 0; l < layers; l++)
            init_tensor(m->param[i] + (size_t)l * per, d, (enum param_id)i, d->l0 + l, seed);
    }
    activations_alloc(&m->act, d, B, m->Ns);
}

void model_free(struct model *m)
{
    free(m->params_mem);
    free(m->grads_mem);
    free(m->act.encoded);
    memset(m, 0, sizeof *m);
}

void model_zero_grad(struct model *m)
{
    for (int i = 0; i < NUM_PARAMS; i++) memset(m->grad[i], 0, m->size[i] * sizeof(float));
}

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
                            const float *inp, const float *w, const float *b)
{
    float *out = m->d.sp ? m->act.part : full;
    layernorm_forward(out, mean, rstd, inp, w, b, m->Ns, m->d.C);
    gather_to_tp(m, c, full, out);
}

/* ----------------------------------------------------------------- forward */

/* Layer l's slice of a per-layer tensor. */
#define LAYER(base, id, l) ((base)[id] + (size_t)(l) * (m->size[id] / (size_t)m->d.Lp))

static void block_forward(struct model *m, struct comm *c, int l, const float *residual)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int B = m->B, T = d->T, C = d->C, Cl = C / d->tp, NHl = d->NH / d->tp, N = m->N, Ns = m->Ns;
    size_t NC = (size_t)N * C, SC = (size_t)Ns * C;
    float *const *P = m->param;
    const float *no_bias = NULL;
    int root = d->tp_rank == 0; /* adds the replicated bias of a row-parallel matmul once */
    float *l_ln1 = a->ln1 + l * NC, *l_qkv = a->qkv + l * 3 * (size_t)N * Cl, *l_atty = a->atty + l * (size_t)N * Cl;
    float *l_att = a->att + (size_t)l * B * NHl * T * T, *l_res2 = a->residual2 + l * SC;
    float *l_ln2 = a->ln2 + l * NC, *l_fch = a->fch + l * 4 * (size_t)N * Cl;
    float *l_fchg = a->fch_gelu + l * 4 * (size_t)N * Cl, *l_res3 = a->residual3 + l * SC;

    layernorm_to_tp(m, c, l_ln1, a->ln1_mean + (size_t)l * Ns, a->ln1_rstd + (size_t)l * Ns, residual,
                    LAYER(P, P_LN1W, l), LAYER(P, P_LN1B, l));
    matmul_forward(l_qkv, l_ln1, LAYER(P, P_QKVW, l), LAYER(P, P_QKVB, l), N, C, 3 * Cl); /* column-parallel */
    attention_forward(l_atty, l_att, l_qkv, B, T, Cl, NHl);
    matmul_forward(a->full, l_atty, LAYER(P, P_ATTPROJW, l), root ? LAYER(P, P_ATTPROJB, l) : no_bias, N, Cl,
                   C); /* row-parallel */
    residual_forward(l_res2, residual, reduce_from_tp(m, c, a->part, a->full), SC);

    layernorm_to_tp(m, c, l_ln2, a->ln2_mean + (size_t)l * Ns, a->ln2_rstd + (size_t)l * Ns, l_res2,
                    LAYER(P, P_LN2W, l), LAYER(P, P_LN2B, l));
    matmul_forward(l_fch, l_ln2, LAYER(P, P_FCW, l), LAYER(P, P_FCB, l), N, C, 4 * Cl);
    gelu_forward(l_fchg, l_fch, 4 * (size_t)N * Cl);
    matmul_forward(a->full, l_fchg, LAYER(P, P_FCPROJW, l), root ? LAYER(P, P_FCPROJB, l) : no_bias, N, 4 * Cl, C);
    residual_forward(l_res3, l_res2, reduce_from_tp(m, c, a->part, a->full), SC);
}

/* Vocabulary-parallel cross-entropy: only maxima and sums cross ranks. */
static double loss_forward(struct model *m, struct comm *c, const int32_t *targets)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int N = m->N, Vs = d->Vp / d->tp, v0 = d->tp_rank * Vs;
    matmul_forward(a->logits, a->lnf, m->param[P_WTE], NULL, N, d->C, Vs);
    crossentropy_max(a->ce_max, a->logits, N, Vs, v0, d->V);
    if (d->tp > 1) comm_allreduce_max_f32(c, CG_TP, a->ce_max, (size_t)N);
    crossentropy_sumexp(a->ce_sums, a->ce_sums + N, a->logits, a->ce_max, targets, N, Vs, v0, d->V);
    if (d->tp > 1) comm_allreduce_sum_f32(c, CG_TP, a->ce_sums, 2 * (size_t)N);
    crossentropy_loss(a->losses, a->ce_max, a->ce_sums, a->ce_sums + N, N);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += a->losses[i];
    return sum;
}

double model_forward(struct model *m, struct comm *c, const int32_t *inputs, const int32_t *targets)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int Vs = d->Vp / d->tp;
    size_t SC = (size_t)m->Ns * d->C;

    /* vocabulary-parallel embedding: each rank looks up its rows, the sum
     * over ranks is the full lookup; rank 0 adds the positions */
    encoder_forward(a->full, inputs, m->param[P_WTE], d->tp_rank == 0 ? m->param[P_WPE] : NULL, m->B, d->T, d->C,
                    d->tp_rank * Vs, Vs);
    memcpy(a->encoded, reduce_from_tp(m, c, a->part, a->full), SC * sizeof(float));
    const float *residual = a->encoded;
    for (int l = 0; l < d->Lp; l++) {
        block_forward(m, c, l, residual);
        residual = a->residual3 + l * SC;
    }
    layernorm_to_tp(m, c, a->lnf, a->lnf_mean, a->lnf_rstd, residual, m->param[P_LNFW], m->param[P_LNFB]);
    return loss_forward(m, c, targets);
}

/* ---------------------------------------------------------------- backward */

/* The gradient of a LayerNorm output (partial sums over tp of a column-
 * parallel matmul's input gradient) back into the residual stream. */
static void layernorm_from_tp(struct model *m, struct comm *c, float *dln_full, float *dw, float *db,
                              const float *inp, const float *w, const float *mean, const float *rstd)
{
    const float *dln = reduce_from_tp(m, c, m->act.dln_part, dln_full);
    layernorm_backward(m->act.dresidual, dw, db, dln, inp, w, mean, rstd, m->Ns, m->d.C);
}

static void block_backward(struct model *m, struct comm *c, int l, const float *l_in)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int B = m->B, T = d->T, C = d->C, Cl = C / d->tp, NHl = d->NH / d->tp, N = m->N, Ns = m->Ns;
    size_t NC = (size_t)N * C, SC = (size_t)Ns * C;
    float *const *P = m->param, *const *G = m->grad;
    float *l_ln1 = a->ln1 + l * NC, *l_qkv = a->qkv + l * 3 * (size_t)N * Cl, *l_atty = a->atty + l * (size_t)N * Cl;
    float *l_att = a->att + (size_t)l * B * NHl * T * T, *l_res2 = a->residual2 + l * SC;
    float *l_ln2 = a->ln2 + l * NC, *l_fch = a->fch + l * 4 * (size_t)N * Cl;
    float *l_fchg = a->fch_gelu + l * 4 * (size_t)N * Cl;

    /* MLP; dresidual holds d(block output), which is also d(residual2) through the skip */
    const float *dout = gather_to_tp(m, c, a->dfull, a->dresidual);
    matmul_backward(a->dfch_gelu, LAYER(G, P_FCPROJW, l), LAYER(G, P_FCPROJB, l), dout, l_fchg,
                    LAYER(P, P_FCPROJW, l), N, 4 * Cl, C);
    gelu_backward(a->dfch, l_fch, a->dfch_gelu, 4 * (size_t)N * Cl);
    matmul_backward(a->dln_full, LAYER(G, P_FCW, l), LAYER(G, P_FCB, l), a->dfch, l_ln2, LAYER(P, P_FCW, l), N, C,
                    4 * Cl);
    layernorm_from_tp(m, c, a->dln_full, LAYER(G, P_LN2W, l), LAYER(G, P_LN2B, l), l_res2, LAYER(P, P_LN2W, l),
                      a->ln2_mean + (size_t)l * Ns, a->ln2_rstd + (size_t)l * Ns);
    /* attention; dresidual now holds d(residual2) = d(block input) through the skip */
    dout = gather_to_tp(m, c, a->dfull, a->dresidual);
    matmul_backward(a->datty, LAYER(G, P_ATTPROJW, l), LAYER(G, P_ATTPROJB, l), dout, l_atty,
                    LAYER(P, P_ATTPROJW, l), N, Cl, C);
    attention_backward(a->dqkv, a->datt, a->datty, l_qkv, l_att, B, T, Cl, NHl);
    matmul_backward(a->dln_full, LAYER(G, P_QKVW, l), LAYER(G, P_QKVB, l), a->dqkv, l_ln1, LAYER(P, P_QKVW, l), N,
                    C, 3 * Cl);
    layernorm_from_tp(m, c, a->dln_full, LAYER(G, P_LN1W, l), LAYER(G, P_LN1B, l), l_in, LAYER(P, P_LN1W, l),
                      a->ln1_mean + (size_t)l * Ns, a->ln1_rstd + (size_t)l * Ns);
}

void model_backward(struct model *m, struct comm *c, const int32_t *inputs, const int32_t *targets, float dloss)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int N = m->N, C = d->C, Vs = d->Vp / d->tp, v0 = d->tp_rank * Vs;
    size_t SC = (size_t)m->Ns * C;

    crossentropy_backward(a->logits, a->logits, a->ce_max, a->ce_sums, targets, dloss, N, Vs, v0, d->V);
    matmul_backward(a->dln_full, m->grad[P_WTE], NULL, a->logits, a->lnf, m->param[P_WTE], N, C, Vs);
    memset(a->dresidual, 0, SC * sizeof(float));
    const float *last = d->Lp > 0 ? a->residual3 + (size_t)(d->Lp - 1) * SC : a->encoded;
    layernorm_from_tp(m, c, a->dln_full, m->grad[P_LNFW], m->grad[P_LNFB], last, m->param[P_LNFW], a->lnf_mean,
                      a->lnf_rstd);
    for (int l = d->Lp - 1; l >= 0; l--)
        block_backward(m, c, l, l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * SC);
    /* every rank needs the full gradient of the embedding output: its
     * vocabulary rows may be used anywhere in the batch */
    const float *dout = gather_to_tp(m, c, a->dfull, a->dresidual);
    encoder_backward(m->grad[P_WTE], m->grad[P_WPE], dout, inputs, m->B, d->T, C, v0, Vs);
}
