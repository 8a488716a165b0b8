/* test_model_grad.c -- the whole model's gradients against finite
 * differences, for both block families: gpt2, and llama (RMSNorm, rotary
 * positions, 2 query heads on 1 kv head, SwiGLU, no biases, untied head);
 * and llama's mixture of experts (router, top-k, shared experts, the
 * load-balancing and z losses, the capacity). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "moe.h"
#include "rng.h"
#include "tap.h"
#include "whole_model.h"

enum { B = 2, T = 5 };

/* The objective: the mean token loss, and a mixture's auxiliary losses
 * (each coefficient times their mean over the layers). */
static double mean_loss(struct model *m, const int32_t *in, const int32_t *tg)
{
    moe_stats_reset(m);
    double loss = whole_forward(m, NULL, in, tg) / (B * T);
    if (m->moe) loss += (m->d.aux_coef * m->moe->stats.aux + m->d.z_coef * m->moe->stats.z) / m->d.L;
    return loss;
}

/* The mixtures of experts checked: none; softmax router with renormalised
 * top 2 of 4, a gated shared expert, both auxiliary losses; sigmoid router
 * without renormalisation, an ungated shared expert, a capacity that drops.
 * The first also has llama's optional q, k and v biases. */
enum { MOE_NONE, MOE_SOFTMAX, MOE_SIGMOID };
static const char *const moe_name[] = {"", " moe softmax", " moe sigmoid"};
static void moe_dims(struct model_dims *d, int moe)
{
    if (moe == MOE_NONE) return;
    d->E = d->El = 4, d->K = 2, d->Fe = 6, d->F = 4, d->ep = 1;
    d->shared_gate = moe == MOE_SOFTMAX;
    d->qkv_bias = moe == MOE_SOFTMAX; /* (Qwen2-MoE's q, k and v biases) */
    d->sigmoid_router = moe == MOE_SIGMOID;
    d->norm_topk = moe == MOE_SOFTMAX;
    d->aux_coef = 0.5, d->z_coef = moe == MOE_SOFTMAX ? 0.1 : 0.0;
    d->capacity = moe == MOE_SIGMOID ? 1.0 : 0.0;
}

/* Copy all parameters out of (dir 0) or into (dir 1) a flat buffer. */
static void copy_params(struct model *m, float *flat, int into_model)
{
    for (int i = 0; i < NUM_PARAMS; i++) {
        size_t bytes = m->size[i] * sizeof(float);
        if (into_model) memcpy(m->param[i], flat, bytes);
        else memcpy(flat, m->param[i], bytes);
        flat += m->size[i];
    }
}

static void check_family(int llama, int moe)
{
    struct model_dims d = {.L = 2, .C = 8, .NH = 2, .HS = 4, .T = T, .Tl = T, .cp = 1, .V = 11, .Vp = 128, .tp = 1, .tp_rank = 0,
                           .sp = 0, .pp = 1, .pp_rank = 0, .dpcp = 1, .v = 1, .Lc = 2, .Lp = 2, .llama = llama,
                           .NKV = llama ? 1 : 2, .F = llama ? 12 : 32, .tied = !llama, .eps = 1e-5f,
                           .rope_theta = 10000.0};
    moe_dims(&d, moe);
    char family[32];
    snprintf(family, sizeof family, "%s%s", llama ? "llama" : "gpt2", moe_name[moe]);
    tap_diag("%s", family);
    struct model m;
    model_init(&m, &d, &cpu_device, B, (struct model_buffers){.slots = 1}, 5);
    /* Larger weights than the 0.02 init so every gradient is well above the
     * finite-difference noise of a float forward. */
    for (int i = 0; i < NUM_PARAMS; i++)
        for (size_t k = 0; k < m.size[i]; k++)
            if ((i != P_WTE && i != P_LMHEAD) || k < (size_t)d.V * d.C)
                m.param[i][k] = (float)(0.3 * rng_normal(11, (uint64_t)i, k) + (i == P_LN1W || i == P_LN2W || i == P_LNFW));
    int32_t in[B * T], tg[B * T];
    for (int i = 0; i < B * T; i++) {
        in[i] = (int32_t)(rng_uniform(3, 1, (uint64_t)i) * d.V);
        tg[i] = (int32_t)(rng_uniform(3, 2, (uint64_t)i) * d.V);
    }

    model_zero_grad(&m);
    double L0 = mean_loss(&m, in, tg);
    whole_backward(&m, NULL, 1.0f / (B * T));
    model_merge_embedding_grad(&m);
    tap_diag("loss %.6f", L0);

    /* Central differences at h and h/2 combined by Richardson extrapolation:
     * the O(h^2) truncation error cancels, leaving O(h^4) plus float noise. */
    const double h = 2e-2;
    uint64_t routing = m.moe ? m.moe->stats.signature : 0;
    int worst_id = -1, skipped = 0;
    double worst = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        int bad = 0, checked = 0;
        size_t n = m.size[i];
        if (n == 0) continue; /* absent from the family */
        if (i == P_WTE || i == P_LMHEAD) n = (size_t)d.V * d.C;
        for (int s = 0, draw = 0; s < 12 && draw < 100; draw++) {
            size_t k = (size_t)(rng_uniform(9, (uint64_t)i, (uint64_t)draw) * n);
            double fd2[2];
            int rerouted = 0; /* a mixture's routing is piecewise: skip an element whose step changes it */
            for (int r = 0; r < 2; r++) {
                double hr = r ? h / 2 : h;
                float keep = m.param[i][k];
                m.param[i][k] = (float)(keep + hr);
                double lp = mean_loss(&m, in, tg);
                rerouted |= m.moe && m.moe->stats.signature != routing;
                m.param[i][k] = (float)(keep - hr);
                double lm = mean_loss(&m, in, tg);
                rerouted |= m.moe && m.moe->stats.signature != routing;
                m.param[i][k] = keep;
                fd2[r] = (lp - lm) / (2 * hr);
            }
            if (rerouted && ++skipped) continue;
            s++;
            double fd = (4 * fd2[1] - fd2[0]) / 3, an = m.grad[i][k];
            double err = fabs(fd - an) / (2e-2 * fabs(an) + 2e-5); /* > 1: outside 2% + 2e-5 */
            if (err > worst) { worst = err; worst_id = i; }
            if (err > 1) tap_diag("%s[%zu]: finite difference %.6g, backward %.6g", param_table[i].name, k, fd, an);
            bad += err > 1;
            checked++;
        }
        tap_ok(bad == 0, "%s %-9s: %d sampled gradients within 2%% + 2e-5 of finite differences", family,
               param_table[i].name, checked);
    }
    tap_diag("worst error %.3f of the tolerance, in %s", worst, worst_id >= 0 ? param_table[worst_id].name : "-");
    if (m.moe) tap_diag("%d elements skipped: their step changed the routing", skipped);

    /* The directional derivative along the gradient is |g|^2, using every entry. */
    double g2 = 0;
    for (int i = 0; i < NUM_PARAMS; i++)
        for (size_t k = 0; k < m.size[i]; k++) g2 += (double)m.grad[i][k] * m.grad[i][k];
    float *save = malloc(m.num_params * sizeof(float));
    copy_params(&m, save, 0);
    double eps = 2.5e-3 / sqrt(g2), lpm[2];
    for (int sgn = 0; sgn < 2; sgn++) {
        for (int i = 0; i < NUM_PARAMS; i++)
            for (size_t k = 0; k < m.size[i]; k++)
                m.param[i][k] += (float)((sgn ? -2 : 1) * eps * m.grad[i][k]);
        lpm[sgn] = mean_loss(&m, in, tg);
    }
    double dd = (lpm[0] - lpm[1]) / (2 * eps);
    tap_diag("directional derivative %.6f, |g|^2 %.6f", dd, g2);
    tap_ok(fabs(dd - g2) / g2 < 2e-3, "%s: directional derivative along the gradient equals |g|^2 within 0.2%%",
           family);

    int pad_zero = 1;
    for (size_t k = (size_t)d.V * d.C; k < m.size[P_WTE]; k++) pad_zero &= m.grad[P_WTE][k] == 0.0f;
    for (size_t k = (size_t)d.V * d.C; k < m.size[P_LMHEAD]; k++) pad_zero &= m.grad[P_LMHEAD][k] == 0.0f;
    tap_ok(pad_zero, "%s: padded vocabulary rows get no gradient", family);

    /* Accumulation over micro-batches: two backward passes double the gradient. */
    model_zero_grad(&m);
    copy_params(&m, save, 1);
    mean_loss(&m, in, tg);
    whole_backward(&m, NULL, 1.0f / (B * T));
    float g1 = m.grad[P_QKVW][3];
    mean_loss(&m, in, tg);
    whole_backward(&m, NULL, 1.0f / (B * T));
    tap_ok(m.grad[P_QKVW][3] == 2 * g1, "%s: gradients accumulate over backward passes", family);
    free(save);
    model_free(&m);
}

/* Every parameter gradient and the input gradient, bit for bit. */
static int same_grads(const struct model *a, const struct model *b, const float *da, const float *db, size_t n)
{
    for (int i = 0; i < NUM_PARAMS; i++)
        if (a->size[i] && memcmp(a->grad[i], b->grad[i], a->size[i] * sizeof(float))) return 0;
    return memcmp(a->dwte_embed, b->dwte_embed, a->size[P_WTE] * sizeof(float)) == 0 && memcmp(da, db, n) == 0;
}

/* A backward split into B and W (a zero-bubble pipeline's) gives the fused
 * backward's gradients bit for bit, with another micro-batch's forward and
 * B between them (they share the scratch, not what W keeps), in fp32 and
 * bf16 (layers stored packed), with no, one and every layer recomputed. */
static void check_split(int llama, int moe, enum precision prec, int Lr)
{
    struct model_dims d = {.L = 2, .C = 8, .NH = 2, .HS = 4, .T = T, .Tl = T, .cp = 1, .V = 11, .Vp = 128, .tp = 1,
                           .pp = 1, .dpcp = 1, .v = 1, .Lc = 2, .Lp = 2, .llama = llama, .NKV = llama ? 1 : 2,
                           .F = llama ? 12 : 32, .tied = !llama, .eps = 1e-5f, .rope_theta = 10000.0, .prec = prec,
                           .recompute = Lr ? RECOMPUTE_FULL : RECOMPUTE_NONE, .Lr = Lr};
    moe_dims(&d, moe);
    struct model f, w;
    model_init(&f, &d, &cpu_device, B, (struct model_buffers){.slots = 2}, 5);
    model_init(&w, &d, &cpu_device, B, (struct model_buffers){.slots = 2, .wslots = 2}, 5);
    int32_t in[2][B * T], tg[2][B * T];
    for (int i = 0; i < 2 * B * T; i++) {
        in[i / (B * T)][i % (B * T)] = (int32_t)(rng_uniform(4, 1, (uint64_t)i) * d.V);
        tg[i / (B * T)][i % (B * T)] = (int32_t)(rng_uniform(4, 2, (uint64_t)i) * d.V);
    }
    size_t SC = (size_t)f.Ns * d.C * sizeof(float);
    float *dinf = malloc(2 * SC), *dinw = malloc(2 * SC);
    model_zero_grad(&f);
    model_zero_grad(&w);
    for (int mb = 0; mb < 2; mb++) { /* fused: F0 B0 F1 B1 */
        struct chunk_acts *a = model_slot(&f, mb, 0);
        model_set_tokens(&f, a, in[mb], tg[mb]);
        model_chunk_forward(&f, NULL, a);
        model_chunk_backward(&f, NULL, a, 1.0f / (B * T));
        memcpy((char *)dinf + mb * SC, f.scr.dresidual, SC);
        model_slot_release(a);
    }
    struct chunk_acts *a[2];
    for (int mb = 0; mb < 2; mb++) { /* split: F0 B0 F1 B1 W0 W1 */
        a[mb] = model_slot(&w, mb, 0);
        model_set_tokens(&w, a[mb], in[mb], tg[mb]);
        model_chunk_forward(&w, NULL, a[mb]);
        model_chunk_backward_input(&w, NULL, a[mb], model_wslot(&w, mb, 0), 1.0f / (B * T));
        memcpy((char *)dinw + mb * SC, w.scr.dresidual, SC);
    }
    for (int mb = 0; mb < 2; mb++) model_chunk_backward_weight(&w, NULL, a[mb], model_wslot(&w, mb, 0));
    tap_ok(same_grads(&f, &w, dinf, dinw, 2 * SC),
           "%s%s %s, %d layer(s) recomputed: B then W later gives the fused backward's gradients bit for bit",
           llama ? "llama" : "gpt2", moe_name[moe], prec == PREC_FP32 ? "fp32" : "bf16", Lr);
    free(dinf), free(dinw);
    model_free(&f);
    model_free(&w);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    check_family(0, MOE_NONE);
    check_family(1, MOE_NONE);
    check_family(1, MOE_SOFTMAX);
    check_family(1, MOE_SIGMOID);
    for (int llama = 0; llama < 2; llama++)
        for (int p = 0; p < 2; p++)
            for (int Lr = 0; Lr <= 2; Lr++) check_split(llama, MOE_NONE, p ? PREC_BF16 : PREC_FP32, Lr);
    for (int moe = MOE_SOFTMAX; moe <= MOE_SIGMOID; moe++)
        for (int p = 0; p < 2; p++)
            for (int Lr = 0; Lr <= 2; Lr++) check_split(1, moe, p ? PREC_BF16 : PREC_FP32, Lr);
    MPI_Finalize();
    return tap_done();
}
