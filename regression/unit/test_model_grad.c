/* test_model_grad.c -- the whole model's gradients against finite
 * differences, for both block families: gpt2, and llama (RMSNorm, rotary
 * positions, 2 query heads on 1 kv head, SwiGLU, no biases, untied head). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "rng.h"
#include "tap.h"
#include "whole_model.h"

enum { B = 2, T = 5 };

static double mean_loss(struct model *m, const int32_t *in, const int32_t *tg)
{
    return whole_forward(m, NULL, in, tg) / (B * T);
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

static void check_family(int llama)
{
    struct model_dims d = {.L = 2, .C = 8, .NH = 2, .HS = 4, .T = T, .Tl = T, .cp = 1, .V = 11, .Vp = 128, .tp = 1, .tp_rank = 0,
                           .sp = 0, .pp = 1, .pp_rank = 0, .dpcp = 1, .v = 1, .Lc = 2, .Lp = 2, .llama = llama,
                           .NKV = llama ? 1 : 2, .F = llama ? 12 : 32, .tied = !llama, .eps = 1e-5f,
                           .rope_theta = 10000.0};
    const char *family = llama ? "llama" : "gpt2";
    tap_diag("%s", family);
    struct model m;
    model_init(&m, &d, &cpu_device, B, 1, 0, 5);
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
    int worst_id = -1;
    double worst = 0;
    for (int i = 0; i < NUM_PARAMS; i++) {
        int bad = 0, checked = 0;
        size_t n = m.size[i];
        if (n == 0) continue; /* absent from the family */
        if (i == P_WTE || i == P_LMHEAD) n = (size_t)d.V * d.C;
        for (int s = 0; s < 12; s++) {
            size_t k = (size_t)(rng_uniform(9, (uint64_t)i, (uint64_t)s) * n);
            double fd2[2];
            for (int r = 0; r < 2; r++) {
                double hr = r ? h / 2 : h;
                float keep = m.param[i][k];
                m.param[i][k] = (float)(keep + hr);
                double lp = mean_loss(&m, in, tg);
                m.param[i][k] = (float)(keep - hr);
                double lm = mean_loss(&m, in, tg);
                m.param[i][k] = keep;
                fd2[r] = (lp - lm) / (2 * hr);
            }
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

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    check_family(0);
    check_family(1);
    MPI_Finalize();
    return tap_done();
}
