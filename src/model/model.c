/* model.c -- the model on this rank's layers: its life (allocation, initial
 * values, gradients, the NaN watch) and forward and backward of the
 * embedding, the blocks and the head.  One block for both families: gpt2's
 * LayerNorm, biases and GELU; llama's RMSNorm (model_norm_to_tp), rotary
 * positions on q and k, grouped-query attention and SwiGLU, no biases. */
#include "model.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "log.h"
#include "model_internal.h"

double model_rope_freq(const struct model_dims *d, int i)
{
    double f = pow(d->rope_theta, -2.0 * (double)i / d->HS);
    const struct rope_scaling *r = &d->rope;
    if (!r->llama3) return f;
    /* Llama 3.1's remap by wavelength: short ones (high frequencies) kept,
     * long ones slowed by factor, and a linear blend in 1/wavelength between */
    double wavelen = 2.0 * 3.14159265358979323846 / f;
    if (wavelen < r->original_max / r->high_freq_factor) return f;
    if (wavelen > r->original_max / r->low_freq_factor) return f / r->factor;
    double smooth = (r->original_max / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
    return (1.0 - smooth) * f / r->factor + smooth * f;
}

/* llama: the rotary embedding's cosines and sines (Tl, HS/2) of this rank's
 * rows: position t turns pair i by t * model_rope_freq(i) (Hugging Face's
 * inv_freq), in double and rounded once.  Training and `triad sample` (its
 * rows gathered from these) turn by this table alone. */
static void rope_tables(struct model *m)
{
    const struct model_dims *d = &m->d;
    size_t half = (size_t)d->HS / 2, n = (size_t)d->Tl * half;
    float *c = xalloc_aligned(2 * n * sizeof(float)), *s = c + n;
    for (int t = 0; t < d->Tl; t++)
        for (size_t i = 0; i < half; i++) {
            double a = model_position(d, t) * model_rope_freq(d, (int)i);
            c[(size_t)t * half + i] = (float)cos(a);
            s[(size_t)t * half + i] = (float)sin(a);
        }
    m->rope_cos = m->k->alloc(2 * n * sizeof(float));
    m->rope_sin = m->rope_cos + n;
    m->k->to_device(m->rope_cos, c, 2 * n * sizeof(float));
    free(c);
}

/* Where in the ZeRO-3 shard the part [*lo, *hi) of flat range [a, a + n)
 * that this rank keeps lies; NULL if none. */
static float *shard_part(const struct model *m, size_t a, size_t n, size_t *lo, size_t *hi)
{
    size_t state;
    return zero_slice_part(&m->zs, a, n, lo, hi, &state) ? m->shard_mem + state : NULL;
}

/* Is tensor id kept in the shard alone (ZeRO-3's per-layer tensors)? */
static int in_shard(const struct model *m, int id) { return m->d.zero_stage == 3 && param_table[id].per_layer; }

static size_t slice_floats(const struct model *m, int id)
{
    int n = param_local_slices(&m->d, (enum param_id)id);
    return n ? m->size[id] / (size_t)n : 0; /* (0: an expert's tensor of a dense model) */
}

void model_set_tensor(struct model *m, enum param_id id, int j, const float *host)
{
    size_t per = slice_floats(m, id), lo, hi, a = m->at[id] + (size_t)j * per;
    if (!in_shard(m, id)) m->k->to_device(m->param[id] + (size_t)j * per, host, per * sizeof(float));
    else {
        float *dst = shard_part(m, a, per, &lo, &hi);
        if (dst) m->k->to_device(dst, host + (lo - a), (hi - lo) * sizeof(float));
    }
}

float *model_element(const struct model *m, enum param_id id, int j, size_t i)
{
    size_t per = slice_floats(m, id), lo, hi, p = m->at[id] + (size_t)j * per + i;
    if (m->size[id] == 0 || i >= per) return NULL;
    if (!in_shard(m, id)) return m->param[id] + (size_t)j * per + i;
    return shard_part(m, p, 1, &lo, &hi);
}

int model_layer_ranges(const struct model *m, int j, struct flat_range *r)
{
    int n = 0;
    for (int id = 0; id < NUM_PARAMS; id++)
        if (param_table[id].per_layer) /* (empty where the layer has none: every layer lists the same tensors) */
            r[n++] = (struct flat_range){m->at[id] + param_layer_offset(&m->d, id, j), param_layer_floats(&m->d, id, j)};
    return n;
}

void model_init(struct model *m, const struct model_dims *d, const struct device *k, int B, struct model_buffers nb,
                uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->d = *d;
    m->k = k;
    m->B = B;
    m->N = B * d->Tl;
    m->Ns = d->sp ? m->N / d->tp : m->N;
    for (int i = 0; i < NUM_PARAMS; i++) m->size[i] = model_tensor_size(d, (enum param_id)i);
    m->flat = model_flat_layout(d, m->at);
    m->params_mem = k->alloc((d->zero_stage == 3 ? model_rest_floats(d) : m->flat) * sizeof(float));
    m->grads_mem = k->alloc((d->zero_stage >= 2 ? model_rest_floats(d) : m->flat) * sizeof(float));
    model_zero_slices(d, m->at, m->flat, &m->zs);
    if (d->zero_stage == 3) {
        m->shard_mem = k->alloc(m->zs.floats * sizeof(float));
        k->zero(m->shard_mem, m->zs.floats * sizeof(float)); /* (the padding between tensors stays zero) */
    }
    float *pc = m->params_mem, *gc = m->grads_mem;
    m->num_params = 0;
    size_t most = 1; /* the largest tensor slice staged in host memory: the initial values' */
    for (int i = 0; i < NUM_PARAMS; i++)
        if ((k->on_device || in_shard(m, i)) && slice_floats(m, i) > most) most = slice_floats(m, i);
    float *host = xalloc_aligned(most * sizeof(float));
    for (int i = 0; i < NUM_PARAMS; i++) {
        /* at its place in the flat layout, or (the tensors outside the layers alone) one after the other */
        m->param[i] = in_shard(m, i) ? NULL : d->zero_stage == 3 ? model_carve(&pc, m->size[i]) : m->params_mem + m->at[i];
        m->grad[i] = d->zero_stage >= 2 ? (param_table[i].per_layer ? NULL : model_carve(&gc, m->size[i]))
                                        : m->grads_mem + m->at[i];
        m->num_params += m->size[i];
        int slices = m->size[i] == 0 ? 0 : param_local_slices(d, (enum param_id)i);
        for (int j = 0; j < slices; j++) {
            float *dst = k->on_device || in_shard(m, i) ? host : m->param[i] + (size_t)j * slice_floats(m, i);
            model_init_tensor(dst, d, (enum param_id)i, param_slice_global(d, (enum param_id)i, j), seed);
            if (dst == host) model_set_tensor(m, (enum param_id)i, j, host);
        }
    }
    free(host);
    m->dwte_embed = k->alloc((m->size[P_WTE] ? m->size[P_WTE] : 1) * sizeof(float));
    if (!k->on_device && m->size[P_WTE]) m->wte_rows = xcalloc((size_t)d->Vp / d->tp, 1);
    if (d->llama) rope_tables(m);
    m->host = xalloc_aligned(2 * (size_t)B * d->T * sizeof(float)); /* token losses, or a micro-batch's tokens */
    m->bad_order = LONG_MAX;
    model_acts_alloc(m, nb);
    moe_alloc(m);
}

void model_set_tokens(struct model *m, struct chunk_acts *a, const int32_t *inputs, const int32_t *targets)
{
    const struct model_dims *d = &m->d;
    if (d->cp <= 1) { /* whole sequences, one after the other */
        m->k->to_device(a->inputs, inputs, (size_t)m->N * sizeof *inputs);
        m->k->to_device(a->targets, targets, (size_t)m->N * sizeof *targets);
        return;
    }
    int c = d->Tl / 2; /* this rank's two chunks of each sequence */
    for (int b = 0; b < m->B; b++)
        for (int r = 0; r < d->Tl; r += c) {
            size_t to = (size_t)b * d->Tl + (size_t)r, from = (size_t)b * d->T + (size_t)model_position(d, r);
            m->k->to_device(a->inputs + to, inputs + from, (size_t)c * sizeof *inputs);
            m->k->to_device(a->targets + to, targets + from, (size_t)c * sizeof *targets);
        }
}

void model_free(struct model *m)
{
    m->k->release(m->params_mem);
    m->k->release(m->grads_mem);
    if (m->shard_mem) m->k->release(m->shard_mem);
    m->k->release(m->dwte_embed);
    free(m->wte_rows);
    if (m->rope_cos) m->k->release(m->rope_cos);
    free(m->host);
    if (m->slot) m->k->release(m->slot[0].inputs); /* the one activation allocation */
    free(m->slot);
    free(m->wslot);
    moe_free(m);
    memset(m, 0, sizeof *m);
}

/* The next run of consecutive rows marked in wte_rows at or after row
 * `from`, [r0, r1), or (no marks kept) the whole table once; 0 when no run
 * is left. */
static int wte_runs(const struct model *m, int *r0, int *r1, int from)
{
    int rows = m->d.Vp / m->d.tp;
    if (!m->wte_rows) {
        *r0 = 0, *r1 = rows;
        return from == 0;
    }
    for (*r0 = from; *r0 < rows && !m->wte_rows[*r0]; ++*r0) {}
    for (*r1 = *r0; *r1 < rows && m->wte_rows[*r1]; ++*r1) {}
    return *r0 < rows;
}

void model_zero_grad(struct model *m)
{
    if (!m->grads_cleared)
        for (int i = 0; i < NUM_PARAMS; i++)
            if (m->grad[i]) m->k->zero(m->grad[i], m->size[i] * sizeof(float));
    m->grads_cleared = 0;
    size_t C = (size_t)m->d.C;
    for (int r0, r1 = 0; m->size[P_WTE] && wte_runs(m, &r0, &r1, r1);)
        m->k->zero(m->dwte_embed + r0 * C, (size_t)(r1 - r0) * C * sizeof(float));
    if (m->wte_rows) memset(m->wte_rows, 0, (size_t)m->d.Vp / m->d.tp);
}

void model_merge_embedding_grad(struct model *m)
{
    size_t C = (size_t)m->d.C;
    for (int r0, r1 = 0; m->size[P_WTE] && wte_runs(m, &r0, &r1, r1);)
        m->k->residual_forward(PREC_FP32, m->grad[P_WTE] + r0 * C, m->grad[P_WTE] + r0 * C, m->dwte_embed + r0 * C,
                               (size_t)(r1 - r0) * C);
}

/* The rows of this rank's shard that n tokens at t write (wte_rows). */
static void mark_wte_rows(struct model *m, const int32_t *t, size_t n)
{
    int Vs = m->d.Vp / m->d.tp, v0 = m->d.tp_rank * Vs;
    if (!m->wte_rows) return;
    for (size_t i = 0; i < n; i++)
        if (t[i] >= v0 && t[i] - v0 < Vs) m->wte_rows[t[i] - v0] = 1;
}

int model_first_nonfinite_param(const struct model *m, char *name, size_t len)
{
    for (int id = 0; id < NUM_PARAMS; id++) {
        int slices = m->size[id] == 0 ? 0 : param_local_slices(&m->d, (enum param_id)id);
        size_t per = slices ? slice_floats(m, id) : 0, lo, hi;
        for (int j = 0; j < slices; j++) {
            const float *mine = in_shard(m, id) ? shard_part(m, m->at[id] + (size_t)j * per, per, &lo, &hi) : NULL;
            int bad = !in_shard(m, id) ? m->k->count_nonfinite(m->param[id] + (size_t)j * per, per) != 0
                      : mine /* (ZeRO-3: its part in this rank's shard) */ ? m->k->count_nonfinite(mine, hi - lo) != 0
                             : 0;
            if (bad) {
                param_slice_name(&m->d, (enum param_id)id, param_slice_global(&m->d, (enum param_id)id, j), name, len);
                return 1;
            }
        }
    }
    return 0;
}

/* ------------------------------------------- outputs in storage precision */

/* Where a forward output sits in the model's order: the embedding, then each
 * global layer's outputs in turn, then the head. */
static long out_order(int layer, enum fwd_out out)
{
    return (long)(layer + 1) * NUM_FWD_OUTS + out; /* layer -1: embedding, L: head */
}

/* A forward output (n floats at x) is stored in the run's precision: rounded
 * here (a no-op in fp32).  While watching, the first that holds a value that
 * is not finite is remembered by name. */
/* The watch of model_fwd_out alone (x already rounded). */
static void fwd_watch(struct model *m, const float *x, size_t n, int layer, enum fwd_out out, const char *what)
{
    if (!m->watch || !m->k->count_nonfinite(x, n)) return;
    long order = out_order(layer, out);
    if (order >= m->bad_order) return;
    m->bad_order = order;
    if (layer < 0) snprintf(m->bad_name, sizeof m->bad_name, "embedding output");
    else if (layer >= m->d.L) snprintf(m->bad_name, sizeof m->bad_name, "head: %s", what);
    else snprintf(m->bad_name, sizeof m->bad_name, "h.%d/%s", layer, what);
}

void model_fwd_out(struct model *m, float *x, size_t n, int layer, enum fwd_out out, const char *what)
{
    m->k->lp_round(m->d.prec, x, n);
    fwd_watch(m, x, n, layer, out, what);
}

void model_act_out(struct model *m, float *x, size_t n, int layer, enum fwd_out out, const char *what)
{
    if (m->k->acts_rounded) fwd_watch(m, x, n, layer, out, what);
    else model_fwd_out(m, x, n, layer, out, what);
}

void model_act_bwd_out(const struct model *m, float *x, size_t n)
{
    if (!m->k->acts_rounded) model_bwd_out(m, x, n);
}

/* out = inp W^T + b (N, OC) as a forward output (model_fwd_out): rounded by
 * the product itself where the device offers it (matmul_forward_rounded),
 * else after it. */
static void product_forward(struct model *m, float *out, const float *inp, const float *w, const float *b, int N,
                            int C, int OC, int layer, enum fwd_out o, const char *what)
{
    if (!m->k->matmul_forward_rounded) {
        m->k->matmul_forward(m->d.prec, out, inp, w, b, N, C, OC);
        model_fwd_out(m, out, (size_t)N * OC, layer, o, what);
        return;
    }
    m->k->matmul_forward_rounded(m->d.prec, out, inp, w, b, N, C, OC);
    fwd_watch(m, out, (size_t)N * OC, layer, o, what);
}

/* An activation gradient, stored in the run's precision too. */
void model_bwd_out(const struct model *m, float *x, size_t n) { m->k->lp_round(m->d.prec, x, n); }

/* ----------------------------------------------------------------- forward */

/* A mixture's leading dense layer runs the dense block: its MLP (dfc,
 * dfcproj) in the places of fc and fcproj. */
static void dense_mlp_in_place(const struct model_dims *d, int j, const float **P)
{
    if (!d->E || model_moe_layer(d, model_global_layer(d, j))) return;
    P[P_FCW] = P[P_DFCW];
    P[P_FCPROJW] = P[P_DFCPROJW];
}

/* Local layer j's parameters, each per-layer tensor's slice (NULL where the
 * family or the layer has none: llama's biases, which the kernels skip): in
 * place, or (ZeRO-3) from the gathered copy the layer_params hook hands
 * out, with the gather of layer `next` under way meanwhile. */
static void layer_weights(struct model *m, int j, int next, const float *W[NUM_PARAMS])
{
    const float *buf = m->layer_params ? m->layer_params(m->layer_params_ctx, j, next) : NULL;
    if (!buf) {
        model_layer_params(m, j, W);
        return;
    }
    for (int id = 0; id < NUM_PARAMS; id++) {
        if (!param_table[id].per_layer) continue;
        size_t per = param_layer_floats(&m->d, id, j);
        W[id] = per == 0 ? NULL : buf;
        buf += per;
    }
    dense_mlp_in_place(&m->d, j, W);
}

void model_layer_params(const struct model *m, int j, const float *W[NUM_PARAMS])
{
    for (int id = 0; id < NUM_PARAMS; id++) {
        size_t per = param_layer_floats(&m->d, id, j);
        W[id] = per == 0 ? NULL : m->param[id] + param_layer_offset(&m->d, id, j);
    }
    dense_mlp_in_place(&m->d, j, W);
}

/* A block's sizes on this rank: rows, widths (model.h) and heads. */
struct block_sizes {
    int B, T, C, Cl, N;  /* micro-batch, sequence, width and this rank's share of it, rows */
    int NHl, NKVl;       /* query and kv heads on this rank */
    int QKV, FC, Fl;     /* columns of qkv, of the MLP's first product, of its activation */
};

/* (of global layer l) */
static struct block_sizes block_sizes(const struct model *m, int l)
{
    const struct model_dims *d = &m->d;
    return (struct block_sizes){ .B = m->B, .T = d->Tl, .C = d->C, .Cl = d->C / d->tp, .N = m->N,
                                 .NHl = model_q_heads(d), .NKVl = model_kv_heads(d), .QKV = model_qkv_cols(d),
                                 .FC = model_layer_fc_cols(d, l), .Fl = model_layer_hidden_cols(d, l) };
}

/* Layer i of slot a's chunk (local layer j = chunk * Lc + i), with its parameters P. */
static void block_forward(struct model *m, struct comm *c, struct chunk_acts *a, int i, const float *residual,
                          const float *const *P)
{
    const struct model_dims *d = &m->d;
    struct scratch *s = &m->scr;
    int j = a->chunk * d->Lc + i, l = model_global_layer(d, j);
    const struct block_sizes z = block_sizes(m, l);
    int B = z.B, T = z.T, C = z.C, Cl = z.Cl, N = z.N, NHl = z.NHl, NKVl = z.NKVl, QKV = z.QKV, FC = z.FC, Fl = z.Fl;
    size_t SC = (size_t)m->Ns * C, NCl = (size_t)N * Cl;
    const float *no_bias = NULL;
    int root = d->tp_rank == 0; /* adds the replicated bias of a row-parallel matmul once */
    struct layer_acts la;
    model_layer_acts(m, a, i, &la);
    model_pack_pending(m); /* (the scratch is about to be overwritten) */
    float *l_res3 = a->residual3 + i * SC;

    model_norm_to_tp(m, c, la.ln1, la.ln1_mean, la.ln1_rstd, residual, P[P_LN1W], P[P_LN1B], l, OUT_LN1,
                     "ln1");
    if (d->llama) { /* column-parallel; the rotary embedding on the product's fp32 sums */
        m->k->matmul_forward(d->prec, la.qkv, la.ln1, P[P_QKVW], P[P_QKVB], N, C, QKV);
        m->k->rope_forward(d->prec, la.qkv, m->rope_cos, m->rope_sin, B, T, NHl, NKVl, d->HS);
        model_fwd_out(m, la.qkv, (size_t)N * QKV, l, OUT_QKV, "qkv");
    } else
        product_forward(m, la.qkv, la.ln1, P[P_QKVW], P[P_QKVB], N, C, QKV, l, OUT_QKV, "qkv");
    if (d->cp > 1) {
        struct cp_dims cd = model_cp_dims(d, m->B);
        cp_attention_forward(&cd, m->k, c, &m->cp_time, s->cp, la.atty, la.lse, la.qkv);
    }
    else /* the whole sequence: one call, causal (lse: fp32) */
        m->k->attention_forward(d->prec, la.atty, la.lse, la.qkv, la.qkv + (size_t)NHl * d->HS, QKV, B, T, 0, 0, T,
                                NHl, NKVl, d->HS, ATT_CAUSAL);
    model_fwd_out(m, la.atty, NCl, l, OUT_ATTENTION, "attention output");
    product_forward(m, s->full, la.atty, P[P_ATTPROJW], root ? P[P_ATTPROJB] : no_bias, N, Cl, C, l, OUT_ATTPROJ,
                    "attention projection"); /* row-parallel */
    m->k->residual_forward(m->d.prec, la.residual2, residual, model_reduce_from_tp(m, c, s->part, s->full), SC);
    model_act_out(m, la.residual2, SC, l, OUT_RESIDUAL2, "residual after attention");

    model_norm_to_tp(m, c, la.ln2, la.ln2_mean, la.ln2_rstd, la.residual2, P[P_LN2W], P[P_LN2B],
                     l, OUT_LN2, "ln2");
    if (model_moe_layer(d, l)) { /* a mixture of experts in place of the MLP */
        moe_forward(m, c, &la, P, j, l, s->full);
        m->k->residual_forward(m->d.prec, l_res3, la.residual2, model_reduce_from_tp(m, c, s->part, s->full), SC);
        model_act_out(m, l_res3, SC, l, OUT_BLOCK, "block output");
        model_pack_layer(m, a, i);
        return;
    }
    product_forward(m, la.fch, la.ln2, P[P_FCW], P[P_FCB], N, C, FC, l, OUT_FC, "fc");
    if (d->llama) m->k->swiglu_forward(m->d.prec, la.fch_gelu, la.fch, (size_t)N, Fl);
    else m->k->gelu_forward(m->d.prec, la.fch_gelu, la.fch, (size_t)N * Fl);
    model_act_out(m, la.fch_gelu, (size_t)N * Fl, l, OUT_ACT, d->llama ? "swiglu" : "gelu");
    product_forward(m, s->full, la.fch_gelu, P[P_FCPROJW], root ? P[P_FCPROJB] : no_bias, N, Fl, C, l, OUT_FCPROJ,
                    "fc projection");
    m->k->residual_forward(m->d.prec, l_res3, la.residual2, model_reduce_from_tp(m, c, s->part, s->full), SC);
    model_act_out(m, l_res3, SC, l, OUT_BLOCK, "block output");
    model_pack_layer(m, a, i);
}

/* Vocabulary-parallel embedding: each rank looks up its rows, the sum over
 * ranks is the full lookup; tp rank 0 adds gpt2's positions. */
static void embed_forward(struct model *m, struct comm *c, struct chunk_acts *a)
{
    const struct model_dims *d = &m->d;
    int Vs = d->Vp / d->tp;
    float *out = d->tp == 1 ? a->input : m->scr.full;
    const float *wpe = d->tp_rank == 0 && m->size[P_WPE] ? m->param[P_WPE] : NULL;
    if (d->cp > 1 && wpe) /* each chunk of rows at its positions */
        for (int b = 0; b < m->B; b++)
            for (int h = 0; h < 2; h++) {
                size_t r = (size_t)b * d->Tl + (size_t)h * (d->Tl / 2);
                m->k->encoder_forward(m->d.prec, out + r * d->C, a->inputs + r, m->param[P_WTE],
                                      wpe + (size_t)model_position(d, (int)(r % d->Tl)) * d->C, 1, d->Tl / 2, d->C,
                                      d->tp_rank * Vs, Vs);
            }
    else
        m->k->encoder_forward(m->d.prec, out, a->inputs, m->param[P_WTE], wpe, m->B, d->Tl, d->C, d->tp_rank * Vs,
                              Vs);
    if (d->tp > 1)
        m->k->copy(a->input, model_reduce_from_tp(m, c, m->scr.part, m->scr.full), (size_t)m->Ns * d->C * sizeof(float));
    model_fwd_out(m, a->input, (size_t)m->Ns * d->C, -1, OUT_EMBEDDING, "embedding");
}

/* The LM head's weight: wte (tied) or lm_head; and where its gradient goes. */
static float *head_weight(const struct model *m) { return m->param[m->d.tied ? P_WTE : P_LMHEAD]; }
static float *head_grad(const struct model *m) { return m->grad[m->d.tied ? P_WTE : P_LMHEAD]; }

/* Final norm, LM head and vocabulary-parallel cross-entropy: only maxima
 * and sums cross ranks.  Returns the sum of the token losses. */
static double head_forward(struct model *m, struct comm *c, struct chunk_acts *a, const float *residual)
{
    const struct model_dims *d = &m->d;
    int N = m->N, Vs = d->Vp / d->tp, v0 = d->tp_rank * Vs;
    model_norm_to_tp(m, c, a->lnf, a->lnf_mean, a->lnf_rstd, residual, m->param[P_LNFW],
                     m->size[P_LNFB] ? m->param[P_LNFB] : NULL, d->L, OUT_LNF, "final norm");
    product_forward(m, a->logits, a->lnf, head_weight(m), NULL, N, d->C, Vs, d->L, OUT_LOGITS, "logits");
    m->k->crossentropy_max(m->d.prec, a->ce_max, a->logits, N, Vs, v0, d->V);
    if (d->tp > 1) comm_allreduce_max_f32(c, CG_TP, a->ce_max, (size_t)N);
    m->k->crossentropy_sumexp(m->d.prec, a->ce_sums, a->ce_sums + N, a->logits, a->ce_max, a->targets, N, Vs, v0, d->V);
    if (d->tp > 1) comm_allreduce_sum_f32(c, CG_TP, a->ce_sums, 2 * (size_t)N);
    m->k->crossentropy_loss(m->d.prec, a->losses, a->ce_max, a->ce_sums, a->ce_sums + N, N); /* in fp32 */
    if (m->watch && m->k->count_nonfinite(a->losses, (size_t)N) && out_order(d->L, OUT_LOSSES) < m->bad_order) {
        m->bad_order = out_order(d->L, OUT_LOSSES);
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

void model_token_losses(struct model *m, const struct chunk_acts *a, float *out)
{
    const struct model_dims *d = &m->d;
    const float *losses = a->losses;
    if (m->k->on_device) {
        m->k->to_host(m->host, a->losses, (size_t)m->N * sizeof(float));
        losses = m->host;
    }
    for (int b = 0; b < m->B; b++)
        for (int r = 0; r < d->Tl; r++)
            out[(size_t)b * d->T + (size_t)model_position(d, r)] = losses[(size_t)b * d->Tl + (size_t)r];
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
    const float *residual = a->input, *W[NUM_PARAMS];
    for (int i = 0; i < m->d.Lc; i++) {
        int j = a->chunk * m->d.Lc + i;
        layer_weights(m, j, i + 1 < m->d.Lc ? j + 1 : -1, W);
        block_forward(m, c, a, i, residual, W);
        residual = a->residual3 + i * SC;
    }
    return last_stage(m, a) ? head_forward(m, c, a, residual) : 0.0;
}

/* ---------------------------------------------------------------- backward */

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
        size_t per = param_layer_floats(&m->d, id, j);
        G[id] = per == 0 ? NULL : buf ? buf : m->grad[id] + param_layer_offset(&m->d, id, j); /* NULL: absent */
        if (buf) buf += per;
    }
    dense_mlp_in_place(&m->d, j, (const float **)G);
}

/* The two halves of a backward.  Fused (w NULL): every gradient at once.
 * Split: B computes the input gradients and keeps in w what the weight
 * gradients need; W computes those from it later (a zero-bubble pipeline).
 * The kernels compute the two parts independently (backend_ops.h), so W's
 * numbers are the fused backward's bit for bit. */

/* A matmul's backward: the input gradient, stored in the run's precision
 * (model_bwd_out; by the product itself where the device offers it); the
 * weight's and the bias's now (keep NULL) or, for W, its output gradient
 * kept in keep. */
static void matmul_bwd(struct model *m, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                       const float *w, int N, int C, int OC, float *keep)
{
    if (keep) {
        if (keep != dout) m->k->copy(keep, dout, (size_t)N * OC * sizeof(float));
        dw = db = NULL;
    }
    if (m->k->matmul_backward_rounded) {
        m->k->matmul_backward_rounded(m->d.prec, dinp, dw, db, dout, inp, w, N, C, OC);
        return;
    }
    m->k->matmul_backward(m->d.prec, dinp, dw, db, dout, inp, w, N, C, OC);
    if (dinp) model_bwd_out(m, dinp, (size_t)N * C);
}

/* W of a matmul: its weight's and bias's gradients from the kept output gradient. */
static void matmul_wgt(struct model *m, float *dw, float *db, const float *dout, const float *inp, int N, int C,
                       int OC)
{
    m->k->matmul_backward(m->d.prec, NULL, dw, db, dout, inp, NULL, N, C, OC);
}

/* W of a norm of the stream's rows: its weight's (and LayerNorm's bias's)
 * gradients from the kept gradient of its output rows. */
static void norm_wgt(struct model *m, float *dw, float *db, const float *dln, const float *inp, const float *mean,
                     const float *rstd)
{
    if (m->d.llama) m->k->rmsnorm_backward(m->d.prec, NULL, dw, dln, inp, NULL, rstd, m->Ns, m->d.C);
    else m->k->layernorm_backward(m->d.prec, NULL, dw, db, dln, inp, NULL, mean, rstd, m->Ns, m->d.C);
}

/* Copy what W reads of a recomputed layer (la: the scratch) into in. */
static void keep_inputs(struct model *m, struct layer_acts *in, const struct layer_acts *la, int l)
{
    const float *from[] = {la->ln1, la->ln1_mean, la->ln1_rstd, la->atty, la->residual2,
                           la->ln2, la->ln2_mean, la->ln2_rstd, la->fch_gelu};
    float *to[] = {in->ln1, in->ln1_mean, in->ln1_rstd, in->atty, in->residual2,
                   in->ln2, in->ln2_mean, in->ln2_rstd, in->fch_gelu};
    const struct block_sizes z = block_sizes(m, l);
    size_t N = (size_t)z.N, S = (size_t)m->Ns, C = (size_t)z.C, M = m->d.llama ? 0 : S;
    size_t n[] = {N * C, M, S, N * (size_t)z.Cl, S * C, N * C, M, S, N * (size_t)z.Fl};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (n[i]) m->k->copy(to[i], from[i], n[i] * sizeof(float));
}

/* Layer i's backward, fused (lw NULL) or its B (what W needs into lw). */
static void block_backward(struct model *m, struct comm *c, struct chunk_acts *a, int i, const float *l_in,
                           struct layer_wgrad *lw, float dloss)
{
    const struct model_dims *d = &m->d;
    struct scratch *s = &m->scr;
    int j = a->chunk * d->Lc + i, l = model_global_layer(d, j);
    const struct block_sizes z = block_sizes(m, l);
    int B = z.B, T = z.T, C = z.C, Cl = z.Cl, N = z.N, NHl = z.NHl, NKVl = z.NKVl, QKV = z.QKV, FC = z.FC, Fl = z.Fl;
    const float *P[NUM_PARAMS];
    float *G[NUM_PARAMS] = {0};
    layer_weights(m, j, i > 0 ? j - 1 : -1, P);
    if (!lw) layer_grads(m, j, G); /* (split: W hands them out) */
    struct layer_acts la;
    model_layer_acts(m, a, i, &la);
    /* recomputation: the same arithmetic as the forward, so the result is bitwise the same */
    if (i < d->Lr) {
        moe_replay(m, 1); /* (its statistics are the forward's) */
        block_forward(m, c, a, i, l_in, P);
        moe_replay(m, 0);
    } else
        model_unpack_layer(m, a, i, lw != NULL); /* (kept packed for W, which loads it again) */
    if (lw && i < d->Lr) keep_inputs(m, &lw->in, &la, l);
    float *dfch = lw ? lw->dfch : s->dfch, *dqkv = lw ? lw->dqkv : s->dqkv;

    /* MLP; dresidual holds d(block output), which is also d(residual2) through the skip */
    const float *dout = model_gather_to_tp(m, c, s->dfull, s->dresidual);
    if (model_moe_layer(d, l)) {
        moe_backward(m, c, &la, P, G, dout, s->dln_full, dloss, lw);
    } else {
        /* GPT-2: d(gelu output) lands in dfch itself, which the GELU's
         * backward turns into d(fc output) in place (element-wise: one
         * buffer fewer through the caches, no line fetched to be written) */
        float *dact = d->llama ? s->dfch_gelu : dfch;
        matmul_bwd(m, dact, G[P_FCPROJW], G[P_FCPROJB], dout, la.fch_gelu, P[P_FCPROJW], N, Fl, C,
                   lw ? lw->dfcproj : NULL);
        if (d->llama) m->k->swiglu_backward(m->d.prec, dfch, la.fch, dact, (size_t)N, Fl);
        else m->k->gelu_backward(m->d.prec, dfch, la.fch, dact, (size_t)N * Fl);
        model_act_bwd_out(m, dfch, (size_t)N * FC);
        matmul_bwd(m, s->dln_full, G[P_FCW], G[P_FCB], dfch, la.ln2, P[P_FCW], N, C, FC, lw ? dfch : NULL);
    }
    model_norm_from_tp(m, c, s->dln_full, G[P_LN2W], G[P_LN2B], la.residual2, P[P_LN2W], la.ln2_mean,
                       la.ln2_rstd, lw ? lw->dln2 : NULL, !model_moe_layer(d, l)); /* (the MoE's: its sums) */
    /* attention; dresidual now holds d(residual2) = d(block input) through the skip */
    dout = model_gather_to_tp(m, c, s->dfull, s->dresidual);
    matmul_bwd(m, s->datty, G[P_ATTPROJW], G[P_ATTPROJB], dout, la.atty, P[P_ATTPROJW], N, Cl, C,
               lw ? lw->dattproj : NULL);
    if (d->cp > 1) {
        struct cp_dims cd = model_cp_dims(d, m->B);
        cp_attention_backward(&cd, m->k, c, &m->cp_time, s->cp, dqkv, s->datty, la.atty, la.qkv, la.lse);
    }
    else
        m->k->attention_backward(d->prec, dqkv, dqkv + (size_t)NHl * d->HS, s->datty, la.atty, la.qkv,
                                 la.qkv + (size_t)NHl * d->HS, QKV, la.lse, B, T, 0, 0, T, NHl, NKVl, d->HS, ATT_CAUSAL);
    if (d->llama) m->k->rope_backward(d->prec, dqkv, m->rope_cos, m->rope_sin, B, T, NHl, NKVl, d->HS);
    model_bwd_out(m, dqkv, (size_t)N * QKV);
    matmul_bwd(m, s->dln_full, G[P_QKVW], G[P_QKVB], dqkv, la.ln1, P[P_QKVW], N, C, QKV, lw ? dqkv : NULL);
    model_norm_from_tp(m, c, s->dln_full, G[P_LN1W], G[P_LN1B], l_in, P[P_LN1W], la.ln1_mean, la.ln1_rstd,
                       lw ? lw->dln1 : NULL, 1);
}

/* W of layer i: its parameter gradients from lw and the slot (a recomputed
 * layer's inputs from lw, a packed one's unpacked again). */
static void block_weight(struct model *m, struct comm *c, struct chunk_acts *a, int i, const float *l_in,
                         const struct layer_wgrad *lw)
{
    const struct model_dims *d = &m->d;
    int j = a->chunk * d->Lc + i, l = model_global_layer(d, j);
    const struct block_sizes z = block_sizes(m, l);
    int C = z.C, Cl = z.Cl, N = z.N, QKV = z.QKV, FC = z.FC, Fl = z.Fl;
    float *G[NUM_PARAMS];
    layer_grads(m, j, G);
    struct layer_acts la;
    if (i < d->Lr) la = lw->in;
    else {
        model_layer_acts(m, a, i, &la);
        model_unpack_layer(m, a, i, 1);
    }
    if (model_moe_layer(d, l)) moe_weight(m, c, &la, G, lw);
    else {
        matmul_wgt(m, G[P_FCPROJW], G[P_FCPROJB], lw->dfcproj, la.fch_gelu, N, Fl, C);
        matmul_wgt(m, G[P_FCW], G[P_FCB], lw->dfch, la.ln2, N, C, FC);
    }
    norm_wgt(m, G[P_LN2W], G[P_LN2B], lw->dln2, la.residual2, la.ln2_mean, la.ln2_rstd);
    matmul_wgt(m, G[P_ATTPROJW], G[P_ATTPROJB], lw->dattproj, la.atty, N, Cl, C);
    matmul_wgt(m, G[P_QKVW], G[P_QKVB], lw->dqkv, la.ln1, N, C, QKV);
    norm_wgt(m, G[P_LN1W], G[P_LN1B], lw->dln1, l_in, la.ln1_mean, la.ln1_rstd);
}

/* Cross-entropy and the LM head; leaves d(chunk output) in dresidual.  A
 * tied head's share of wte's gradient goes to grad[P_WTE]; split (w), that
 * share and the final norm's wait for W (dlogits stay in the slot). */
static void head_backward(struct model *m, struct comm *c, struct chunk_acts *a, const float *residual, float dloss,
                          struct chunk_wgrad *w)
{
    const struct model_dims *d = &m->d;
    int N = m->N, C = d->C, Vs = d->Vp / d->tp, v0 = d->tp_rank * Vs;
    /* (a->logits holds crossentropy_sumexp's exponentials) */
    m->k->crossentropy_backward(m->d.prec, a->logits, a->logits, a->ce_sums, a->targets, dloss, N, Vs, v0, d->V);
    model_act_bwd_out(m, a->logits, (size_t)N * Vs);
    matmul_bwd(m, m->scr.dln_full, head_grad(m), NULL, a->logits, a->lnf, head_weight(m), N, C, Vs,
               w ? a->logits : NULL);
    m->k->zero(m->scr.dresidual, (size_t)m->Ns * C * sizeof(float));
    model_norm_from_tp(m, c, m->scr.dln_full, m->grad[P_LNFW], m->size[P_LNFB] ? m->grad[P_LNFB] : NULL, residual,
                       m->param[P_LNFW], a->lnf_mean, a->lnf_rstd, w ? w->dlnf : NULL, 1);
}

static void head_weight_grads(struct model *m, struct chunk_acts *a, const float *residual, const struct chunk_wgrad *w)
{
    const struct model_dims *d = &m->d;
    matmul_wgt(m, head_grad(m), NULL, a->logits, a->lnf, m->N, d->C, d->Vp / d->tp);
    norm_wgt(m, m->grad[P_LNFW], m->size[P_LNFB] ? m->grad[P_LNFB] : NULL, w->dlnf, residual, a->lnf_mean,
             a->lnf_rstd);
}

/* Every tp rank needs the full gradient of the embedding output: its
 * vocabulary rows may be used anywhere in the batch.  wte's share goes to
 * dwte_embed (summed with the head's once per step, in a fixed order).
 * rows: d(embedding output), this rank's rows of the stream. */
static void embed_backward(struct model *m, struct comm *c, struct chunk_acts *a, const float *rows)
{
    const struct model_dims *d = &m->d;
    int Vs = d->Vp / d->tp;
    const float *dout = model_gather_to_tp(m, c, m->scr.dfull, rows);
    float *dwpe = m->size[P_WPE] ? m->grad[P_WPE] : NULL;
    if (d->cp > 1 && dwpe)
        for (int b = 0; b < m->B; b++)
            for (int h = 0; h < 2; h++) {
                size_t r = (size_t)b * d->Tl + (size_t)h * (d->Tl / 2);
                m->k->encoder_backward(m->d.prec, m->dwte_embed, dwpe + (size_t)model_position(d, (int)(r % d->Tl)) * d->C,
                                       dout + r * d->C, a->inputs + r, 1, d->Tl / 2, d->C, d->tp_rank * Vs, Vs);
            }
    else
        m->k->encoder_backward(m->d.prec, m->dwte_embed, dwpe, dout, a->inputs, m->B, d->Tl, d->C, d->tp_rank * Vs,
                               Vs);
    mark_wte_rows(m, a->inputs, (size_t)m->B * d->Tl); /* (host memory on a host table) */
}

/* The input of layer i of slot a's chunk, and the chunk's output. */
static const float *layer_input(const struct model *m, const struct chunk_acts *a, int i)
{
    return i == 0 ? a->input : a->residual3 + (size_t)(i - 1) * m->Ns * m->d.C;
}

/* The backward, fused (w NULL) or its B. */
static void chunk_backward(struct model *m, struct comm *c, struct chunk_acts *a, float dloss, struct chunk_wgrad *w)
{
    size_t SC = (size_t)m->Ns * m->d.C;
    int Lc = m->d.Lc;
    if (last_stage(m, a)) head_backward(m, c, a, layer_input(m, a, Lc), dloss, w);
    else m->k->copy(m->scr.dresidual, a->dout, SC * sizeof(float));
    for (int i = Lc - 1; i >= 0; i--) {
        struct layer_wgrad lw;
        if (w) model_layer_wgrad(m, w, i, &lw);
        block_backward(m, c, a, i, layer_input(m, a, i), w ? &lw : NULL, dloss);
        if (!w && m->layer_done) m->layer_done(m->layer_done_ctx, a->chunk * Lc + i);
    }
    if (!first_stage(m, a)) return;
    if (w) m->k->copy(w->demb, m->scr.dresidual, SC * sizeof(float));
    else embed_backward(m, c, a, m->scr.dresidual);
}

void model_chunk_backward(struct model *m, struct comm *c, struct chunk_acts *a, float dloss)
{
    chunk_backward(m, c, a, dloss, NULL);
}

void model_chunk_backward_input(struct model *m, struct comm *c, struct chunk_acts *a, struct chunk_wgrad *w,
                                float dloss)
{
    chunk_backward(m, c, a, dloss, w);
}

void model_chunk_backward_weight(struct model *m, struct comm *c, struct chunk_acts *a, struct chunk_wgrad *w)
{
    int Lc = m->d.Lc;
    if (last_stage(m, a)) head_weight_grads(m, a, layer_input(m, a, Lc), w);
    for (int i = Lc - 1; i >= 0; i--) {
        struct layer_wgrad lw;
        model_layer_wgrad(m, w, i, &lw);
        block_weight(m, c, a, i, layer_input(m, a, i), &lw);
        if (m->layer_done) m->layer_done(m->layer_done_ctx, a->chunk * Lc + i);
    }
    if (first_stage(m, a)) embed_backward(m, c, a, w->demb);
}
