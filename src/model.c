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
    [P_WTE] = {"wte", 0, 1, INIT_NORMAL},
    [P_WPE] = {"wpe", 0, 1, INIT_NORMAL},
    [P_LN1W] = {"ln1_w", 1, 0, INIT_ONE},
    [P_LN1B] = {"ln1_b", 1, 0, INIT_ZERO},
    [P_QKVW] = {"qkv_w", 1, 1, INIT_NORMAL},
    [P_QKVB] = {"qkv_b", 1, 0, INIT_ZERO},
    [P_ATTPROJW] = {"attproj_w", 1, 1, INIT_NORMAL_SCALED},
    [P_ATTPROJB] = {"attproj_b", 1, 0, INIT_ZERO},
    [P_LN2W] = {"ln2_w", 1, 0, INIT_ONE},
    [P_LN2B] = {"ln2_b", 1, 0, INIT_ZERO},
    [P_FCW] = {"fc_w", 1, 1, INIT_NORMAL},
    [P_FCB] = {"fc_b", 1, 0, INIT_ZERO},
    [P_FCPROJW] = {"fcproj_w", 1, 1, INIT_NORMAL_SCALED},
    [P_FCPROJB] = {"fcproj_b", 1, 0, INIT_ZERO},
    [P_LNFW] = {"lnf_w", 0, 0, INIT_ONE},
    [P_LNFB] = {"lnf_b", 0, 0, INIT_ZERO},
};

void param_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols)
{
    size_t C = (size_t)d->C;
    size_t r = 1, c = C;
    switch (id) {
    case P_WTE: r = (size_t)d->Vp; break;
    case P_WPE: r = (size_t)d->T; break;
    case P_QKVW: r = 3 * C; break;
    case P_QKVB: r = 1; c = 3 * C; break;
    case P_ATTPROJW: r = C; break;
    case P_FCW: r = 4 * C; break;
    case P_FCB: r = 1; c = 4 * C; break;
    case P_FCPROJW: r = C; c = 4 * C; break;
    default: break; /* (1, C) vectors */
    }
    *rows = r;
    *cols = c;
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

uint64_t model_params_hash(const struct model *m)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the bytes, tensor by tensor */
    for (int i = 0; i < NUM_PARAMS; i++) {
        const unsigned char *p = (const unsigned char *)m->param[i];
        for (size_t k = 0; k < m->size[i] * sizeof(float); k++) h = (h ^ p[k]) * 1099511628211ull;
    }
    return h;
}

/* ------------------------------------------------------------ allocation */

static float *carve(float **cursor, size_t n)
{
    float *p = *cursor;
    *cursor += (n + 15) / 16 * 16; /* keep every tensor 64-byte aligned */
    return p;
}

static size_t act_floats(const struct model_dims *d, int B, size_t *sizes, int *count)
{
    size_t BT = (size_t)B * d->T, C = (size_t)d->C, Lp = (size_t)d->Lp, NH = (size_t)d->NH;
    size_t TT = (size_t)d->T * d->T;
    size_t s[] = {
        BT * C,                                    /* encoded */
        Lp * BT * C, Lp * BT, Lp * BT,             /* ln1 */
        Lp * BT * 3 * C, Lp * BT * C,              /* qkv atty */
        Lp * B * NH * TT,                          /* att */
        Lp * BT * C,                               /* residual2 */
        Lp * BT * C, Lp * BT, Lp * BT,             /* ln2 */
        Lp * BT * 4 * C, Lp * BT * 4 * C,          /* fch fch_gelu */
        Lp * BT * C,                               /* residual3 */
        BT * C, BT, BT,                            /* lnf */
        BT * (size_t)d->Vp,                        /* logits */
        BT, BT, BT, BT,                            /* ce */
        BT * C, BT * C, BT * C, BT * 3 * C,        /* dresidual dbt_c dbt_c2 dqkv */
        BT * 4 * C, BT * 4 * C, B * NH * TT, BT * C /* dfch dfch_gelu datt scratch */
    };
    size_t total = 0;
    *count = (int)(sizeof s / sizeof s[0]);
    for (int i = 0; i < *count; i++) {
        if (sizes) sizes[i] = s[i];
        total += (s[i] + 15) / 16 * 16;
    }
    return total;
}

static void activations_alloc(struct activations *a, const struct model_dims *d, int B)
{
    size_t sizes[64];
    int count;
    size_t total = act_floats(d, B, sizes, &count);
    float **f[] = {&a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty, &a->att,
                   &a->residual2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch, &a->fch_gelu,
                   &a->residual3, &a->lnf, &a->lnf_mean, &a->lnf_rstd, &a->logits, &a->ce_max,
                   &a->ce_sum, &a->ce_tlogit, &a->losses, &a->dresidual, &a->dbt_c, &a->dbt_c2,
                   &a->dqkv, &a->dfch, &a->dfch_gelu, &a->datt, &a->scratch};
    if ((int)(sizeof f / sizeof f[0]) != count) die("activation table out of sync");
    float *mem = xalloc_aligned(total * sizeof(float));
    float *cur = mem;
    for (int i = 0; i < count; i++) *f[i] = carve(&cur, sizes[i]);
    a->bytes = total * sizeof(float);
}

/* --------------------------------------------------------- initialisation */

static void init_tensor(float *p, const struct model_dims *d, enum param_id id, int layer,
                        uint64_t seed)
{
    const struct param_info *pi = &param_table[id];
    size_t rows, cols;
    param_shape(d, id, &rows, &cols);
    size_t n = rows * cols;
    if (pi->init == INIT_ZERO || pi->init == INIT_ONE) {
        float v = pi->init == INIT_ONE ? 1.0f : 0.0f;
        for (size_t i = 0; i < n; i++) p[i] = v;
        return;
    }
    double std = 0.02;
    if (pi->init == INIT_NORMAL_SCALED) std = 0.02 / sqrt(2.0 * d->L);
    char key[64];
    if (pi->per_layer) snprintf(key, sizeof key, "h.%d/%s", layer, pi->name);
    else snprintf(key, sizeof key, "%s", pi->name);
    uint64_t stream = rng_stream_id(key);
    /* the logical [V, C] table: padded rows stay zero */
    size_t real = id == P_WTE ? (size_t)d->V * cols : n;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) p[i] = i < real ? (float)(std * rng_normal(seed, stream, i)) : 0.0f;
}

void model_init(struct model *m, const struct model_dims *d, int B, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->d = *d;
    m->B = B;
    size_t total = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t r, c;
        param_shape(d, (enum param_id)i, &r, &c);
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
        size_t per = param_table[i].per_layer ? m->size[i] / (size_t)d->Lp : m->size[i];
        int layers = param_table[i].per_layer ? d->Lp : 1;
        for (int l = 0; l < layers; l++)
            init_tensor(m->param[i] + (size_t)l * per, d, (enum param_id)i, d->l0 + l, seed);
    }
    activations_alloc(&m->act, d, B);
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

/* ----------------------------------------------------------------- forward */

/* Pointers to layer l's slice of every per-layer tensor in `base`. */
#define LAYER(base, id, l) ((base)[id] + (size_t)(l) * (m->size[id] / (size_t)m->d.Lp))

double model_forward(struct model *m, const int32_t *inputs, const int32_t *targets)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int B = m->B, T = d->T, C = d->C, NH = d->NH, N = B * T;
    size_t BTC = (size_t)N * C;

    encoder_forward(a->encoded, inputs, m->param[P_WTE], m->param[P_WPE], B, T, C, 0, d->Vp);
    const float *residual = a->encoded;
    for (int l = 0; l < d->Lp; l++) {
        float *l_ln1 = a->ln1 + l * BTC, *l_qkv = a->qkv + l * 3 * BTC, *l_atty = a->atty + l * BTC;
        float *l_att = a->att + (size_t)l * B * NH * T * T;
        float *l_res2 = a->residual2 + l * BTC, *l_ln2 = a->ln2 + l * BTC;
        float *l_fch = a->fch + l * 4 * BTC, *l_fchg = a->fch_gelu + l * 4 * BTC;
        float *l_res3 = a->residual3 + l * BTC;
        layernorm_forward(l_ln1, a->ln1_mean + (size_t)l * N, a->ln1_rstd + (size_t)l * N, residual,
                          LAYER(m->param, P_LN1W, l), LAYER(m->param, P_LN1B, l), N, C);
        matmul_forward(l_qkv, l_ln1, LAYER(m->param, P_QKVW, l), LAYER(m->param, P_QKVB, l), N, C, 3 * C);
        attention_forward(l_atty, l_att, l_qkv, B, T, C, NH);
        matmul_forward(a->scratch, l_atty, LAYER(m->param, P_ATTPROJW, l), LAYER(m->param, P_ATTPROJB, l),
                       N, C, C);
        residual_forward(l_res2, residual, a->scratch, BTC);
        layernorm_forward(l_ln2, a->ln2_mean + (size_t)l * N, a->ln2_rstd + (size_t)l * N, l_res2,
                          LAYER(m->param, P_LN2W, l), LAYER(m->param, P_LN2B, l), N, C);
        matmul_forward(l_fch, l_ln2, LAYER(m->param, P_FCW, l), LAYER(m->param, P_FCB, l), N, C, 4 * C);
        gelu_forward(l_fchg, l_fch, 4 * BTC);
        matmul_forward(a->scratch, l_fchg, LAYER(m->param, P_FCPROJW, l), LAYER(m->param, P_FCPROJB, l),
                       N, 4 * C, C);
        residual_forward(l_res3, l_res2, a->scratch, BTC);
        residual = l_res3;
    }
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, residual, m->param[P_LNFW], m->param[P_LNFB], N, C);
    matmul_forward(a->logits, a->lnf, m->param[P_WTE], NULL, N, C, d->Vp);
    crossentropy_max(a->ce_max, a->logits, N, d->Vp, 0, d->V);
    crossentropy_sumexp(a->ce_sum, a->ce_tlogit, a->logits, a->ce_max, targets, N, d->Vp, 0, d->V);
    crossentropy_loss(a->losses, a->ce_max, a->ce_sum, a->ce_tlogit, N);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += a->losses[i];
    return sum;
}

/* ---------------------------------------------------------------- backward */

void model_backward(struct model *m, const int32_t *inputs, const int32_t *targets, float dloss)
{
    const struct model_dims *d = &m->d;
    struct activations *a = &m->act;
    int B = m->B, T = d->T, C = d->C, NH = d->NH, N = B * T;
    size_t BTC = (size_t)N * C;

    crossentropy_backward(a->logits, a->logits, a->ce_max, a->ce_sum, targets, dloss, N, d->Vp, 0, d->V);
    matmul_backward(a->dbt_c, m->grad[P_WTE], NULL, a->logits, a->lnf, m->param[P_WTE], N, C, d->Vp);
    memset(a->dresidual, 0, BTC * sizeof(float));
    const float *last = d->Lp > 0 ? a->residual3 + (size_t)(d->Lp - 1) * BTC : a->encoded;
    layernorm_backward(a->dresidual, m->grad[P_LNFW], m->grad[P_LNFB], a->dbt_c, last, m->param[P_LNFW],
                       a->lnf_mean, a->lnf_rstd, N, C);

    for (int l = d->Lp - 1; l >= 0; l--) {
        const float *l_in = l == 0 ? a->encoded : a->residual3 + (size_t)(l - 1) * BTC;
        float *l_ln1 = a->ln1 + l * BTC, *l_qkv = a->qkv + l * 3 * BTC, *l_atty = a->atty + l * BTC;
        float *l_att = a->att + (size_t)l * B * NH * T * T;
        float *l_res2 = a->residual2 + l * BTC, *l_ln2 = a->ln2 + l * BTC;
        float *l_fch = a->fch + l * 4 * BTC, *l_fchg = a->fch_gelu + l * 4 * BTC;
        /* MLP: dresidual holds d(block output) = d(residual2) through the skip */
        matmul_backward(a->dfch_gelu, LAYER(m->grad, P_FCPROJW, l), LAYER(m->grad, P_FCPROJB, l),
                        a->dresidual, l_fchg, LAYER(m->param, P_FCPROJW, l), N, 4 * C, C);
        gelu_backward(a->dfch, l_fch, a->dfch_gelu, 4 * BTC);
        matmul_backward(a->dbt_c, LAYER(m->grad, P_FCW, l), LAYER(m->grad, P_FCB, l), a->dfch, l_ln2,
                        LAYER(m->param, P_FCW, l), N, C, 4 * C);
        layernorm_backward(a->dresidual, LAYER(m->grad, P_LN2W, l), LAYER(m->grad, P_LN2B, l), a->dbt_c,
                           l_res2, LAYER(m->param, P_LN2W, l), a->ln2_mean + (size_t)l * N,
                           a->ln2_rstd + (size_t)l * N, N, C);
        /* attention: dresidual now holds d(residual2) = d(block input) through the skip */
        matmul_backward(a->dbt_c, LAYER(m->grad, P_ATTPROJW, l), LAYER(m->grad, P_ATTPROJB, l),
                        a->dresidual, l_atty, LAYER(m->param, P_ATTPROJW, l), N, C, C);
        attention_backward(a->dqkv, a->datt, a->dbt_c, l_qkv, l_att, B, T, C, NH);
        matmul_backward(a->dbt_c2, LAYER(m->grad, P_QKVW, l), LAYER(m->grad, P_QKVB, l), a->dqkv, l_ln1,
                        LAYER(m->param, P_QKVW, l), N, C, 3 * C);
        layernorm_backward(a->dresidual, LAYER(m->grad, P_LN1W, l), LAYER(m->grad, P_LN1B, l), a->dbt_c2,
                           l_in, LAYER(m->param, P_LN1W, l), a->ln1_mean + (size_t)l * N,
                           a->ln1_rstd + (size_t)l * N, N, C);
    }
    encoder_backward(m->grad[P_WTE], m->grad[P_WPE], a->dresidual, inputs, B, T, C, 0, d->Vp);
}
