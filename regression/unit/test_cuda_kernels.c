/* test_cuda_kernels.c -- every fp32 CUDA kernel of cuda_backend.h against
 * the CPU kernel of backend.h on the same seeded random inputs.
 *
 * "+=" outputs start from the same random contents on both sides (so the
 * accumulation is checked); overwritten outputs start as NaN on the GPU.
 * Shapes are small and odd (not multiples of the warp or block) so that
 * every tail path runs.  Tolerances (relative, with a floor at 1% of the
 * array's largest value, cuda_test.h):
 *   exact       encoder (same additions in the same order), residual,
 *               scale, cross-entropy max and target logit;
 *   1e-5        layernorm, RMSNorm, rotary embedding, GELU, SwiGLU,
 *               cross-entropy, AdamW (libdevice expf vs
 *               the CPU's polynomial, reduction order, FMA contraction);
 *   1e-4        fp32 matmul and attention with TF32 off (cuBLAS sums the
 *               K products in another order and blocking than gemm.c);
 *   TF32 on:    5e-3 of the array's largest value (inputs cut to a 10-bit
 *               mantissa: each product is off by up to ~1e-3);
 *   1e-10       sumsq (both in double; only the order differs);
 *   tensor cores (bf16/fp16 runs): fp32 inputs on the GPU, the same
 *               rounded to the format on the CPU (so only 16-bit copies of
 *               the right format agree): the linear layer within 1e-4 like
 *               fp32; attention, which also rounds the probabilities and
 *               the softmax gradient to the format for its second products,
 *               within 8e-3 (bf16: 2^-9 relative per rounding) or 1e-3
 *               (fp16: 2^-12) of the array's largest value.
 * No GPU: "1..0 # SKIP no CUDA device: <reason>". */
#include "backend.h"
#include "cuda_test.h"
#include "device.h"
#include "precision.h"

#include <string.h>

#define TOL_F32 1e-5
#define TOL_GEMM 1e-4
#define TOL_TF32 5e-3
#define TOL_SUMSQ 1e-10

/* ------------------------------------------------------------ encoder */

static void test_encoder(void)
{
    int B = 3, T = 37, C = 200, v0 = 20, Vs = 50, N = B * T; /* tokens 0..89: some outside */
    int32_t *inp = ct_tokens(N, 90);
    float *wte = ct_frand((size_t)Vs * C, 1, 0), *wpe = ct_frand((size_t)T * C, 1, 0);
    float *out = ct_alloc(FLOATS((size_t)N * C));
    int32_t *d_inp = ct_put(inp, N * sizeof(int32_t));
    float *d_wte = ct_put(wte, FLOATS((size_t)Vs * C)), *d_wpe = ct_put(wpe, FLOATS((size_t)T * C));
    float *d_out = ct_nan((size_t)N * C);

    encoder_forward(out, inp, wte, wpe, B, T, C, v0, Vs);
    cuda_encoder_forward(d_out, d_inp, d_wte, d_wpe, B, T, C, v0, Vs);
    ct_equal("encoder_forward", d_out, out, (size_t)N * C);
    encoder_forward(out, inp, wte, NULL, B, T, C, v0, Vs);
    cuda_encoder_forward(d_out, d_inp, d_wte, NULL, B, T, C, v0, Vs);
    ct_equal("encoder_forward, wpe NULL", d_out, out, (size_t)N * C);

    float *dout = ct_frand((size_t)N * C, 1, 0);
    float *dwte = ct_frand((size_t)Vs * C, 1, 0), *dwpe = ct_frand((size_t)T * C, 1, 0);
    float *d_dout = ct_put(dout, FLOATS((size_t)N * C));
    float *d_dwte = ct_put(dwte, FLOATS((size_t)Vs * C)), *d_dwpe = ct_put(dwpe, FLOATS((size_t)T * C));
    encoder_backward(dwte, dwpe, dout, inp, B, T, C, v0, Vs);
    cuda_encoder_backward(d_dwte, d_dwpe, d_dout, d_inp, B, T, C, v0, Vs);
    ct_equal("encoder_backward dwte (+=, repeated tokens)", d_dwte, dwte, (size_t)Vs * C);
    ct_equal("encoder_backward dwpe (+=)", d_dwpe, dwpe, (size_t)T * C);
    encoder_backward(dwte, NULL, dout, inp, B, T, C, v0, Vs);
    cuda_encoder_backward(d_dwte, NULL, d_dout, d_inp, B, T, C, v0, Vs);
    ct_equal("encoder_backward dwte, dwpe NULL", d_dwte, dwte, (size_t)Vs * C);

    free(inp), free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
    ct_free_all();
}

/* ------------------------------------------------------------ layernorm */

static void test_layernorm(void)
{
    int N = 70, C = 300;
    size_t NC = (size_t)N * C;
    float *inp = ct_frand(NC, 2, 0.5), *w = ct_frand(C, 1, 1), *b = ct_frand(C, 1, 0);
    float *out = ct_alloc(FLOATS(NC)), *mean = ct_alloc(FLOATS(N)), *rstd = ct_alloc(FLOATS(N));
    float *d_inp = ct_put(inp, FLOATS(NC)), *d_w = ct_put(w, FLOATS(C)), *d_b = ct_put(b, FLOATS(C));
    float *d_out = ct_nan(NC), *d_mean = ct_nan(N), *d_rstd = ct_nan(N);
    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    cuda_layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C);
    ct_close("layernorm_forward out", d_out, out, NC, TOL_F32);
    ct_close("layernorm_forward mean", d_mean, mean, N, TOL_F32);
    ct_close("layernorm_forward rstd", d_rstd, rstd, N, TOL_F32);

    float *dout = ct_frand(NC, 1, 0);
    float *dinp = ct_frand(NC, 1, 0), *dw = ct_frand(C, 1, 0), *db = ct_frand(C, 1, 0);
    float *d_dout = ct_put(dout, FLOATS(NC));
    float *d_dinp = ct_put(dinp, FLOATS(NC)), *d_dw = ct_put(dw, FLOATS(C)), *d_db = ct_put(db, FLOATS(C));
    /* both sides from the CPU's mean and rstd */
    float *d_mean0 = ct_put(mean, FLOATS(N)), *d_rstd0 = ct_put(rstd, FLOATS(N));
    layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    cuda_layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, d_mean0, d_rstd0, N, C);
    ct_close("layernorm_backward dinp (+=)", d_dinp, dinp, NC, TOL_F32);
    ct_close("layernorm_backward dweight (+=)", d_dw, dw, C, TOL_F32);
    ct_close("layernorm_backward dbias (+=)", d_db, db, C, TOL_F32);

    free(inp), free(w), free(b), free(out), free(mean), free(rstd);
    free(dout), free(dinp), free(dw), free(db);
    ct_free_all();
}

/* ------------------------------------------------------------ matmul */

static void test_matmul(int tf32)
{
    int N = 65, C = 96, OC = 130;
    double tol = tf32 ? TOL_TF32 : TOL_GEMM, floor_frac = tf32 ? 1.0 : 1e-2;
    const char *mode = tf32 ? "TF32" : "fp32";
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    cuda_set_tf32(tf32);
    float *inp = ct_frand(NC, 1, 0), *w = ct_frand(OCC, 1, 0), *bias = ct_frand(OC, 1, 0);
    float *out = ct_alloc(FLOATS(NO));
    float *d_inp = ct_put(inp, FLOATS(NC)), *d_w = ct_put(w, FLOATS(OCC)), *d_bias = ct_put(bias, FLOATS(OC));
    float *d_out = ct_nan(NO);
    char what[96];
    matmul_forward(out, inp, w, bias, N, C, OC);
    cuda_matmul_forward(d_out, d_inp, d_w, d_bias, N, C, OC);
    snprintf(what, sizeof what, "matmul_forward (%s)", mode);
    ct_close_floor(what, d_out, out, NO, tol, floor_frac);
    matmul_forward(out, inp, w, NULL, N, C, OC);
    cuda_matmul_forward(d_out, d_inp, d_w, NULL, N, C, OC);
    snprintf(what, sizeof what, "matmul_forward, bias NULL (%s)", mode);
    ct_close_floor(what, d_out, out, NO, tol, floor_frac);

    float *dout = ct_frand(NO, 1, 0), *dinp = ct_alloc(FLOATS(NC));
    float *dw = ct_frand(OCC, 1, 0), *db = ct_frand(OC, 1, 0);
    float *d_dout = ct_put(dout, FLOATS(NO)), *d_dinp = ct_nan(NC);
    float *d_dw = ct_put(dw, FLOATS(OCC)), *d_db = ct_put(db, FLOATS(OC));
    matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC);
    cuda_matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC);
    snprintf(what, sizeof what, "matmul_backward dinp (%s)", mode);
    ct_close_floor(what, d_dinp, dinp, NC, tol, floor_frac);
    snprintf(what, sizeof what, "matmul_backward dweight (+=, %s)", mode);
    ct_close_floor(what, d_dw, dw, OCC, tol, floor_frac);
    ct_close("matmul_backward dbias (+=)", d_db, db, OC, TOL_F32);
    matmul_backward(NULL, dw, NULL, dout, inp, w, N, C, OC);
    cuda_matmul_backward(NULL, d_dw, NULL, d_dout, d_inp, d_w, N, C, OC);
    snprintf(what, sizeof what, "matmul_backward dweight, dinp and dbias NULL (%s)", mode);
    ct_close_floor(what, d_dw, dw, OCC, tol, floor_frac);

    cuda_set_tf32(0);
    free(inp), free(w), free(bias), free(out), free(dout), free(dinp), free(dw), free(db);
    ct_free_all();
}

/* ------------------------------------------------------------ attention */

/* NKV = NH: multi-head; fewer: grouped-query (each kv head's gradient sums
 * its query heads').  The whole sequence (causal), then ring attention's
 * chunk pairs: a packed block of keys and values (ldkv = 2 NKV HS), rows at
 * offsets, without the mask, extending the rows' softmax (ATT_MERGE) and
 * adding to the gradients (ATT_ACCUM).  Head sizes below and above a warp
 * (a lane holding one or several of a row's values), up to the kernel's
 * largest; chunks shorter and longer than a tile. */
static void test_attention(int NH, int NKV, int HS, int T)
{
    int B = 2, C = NH * HS, W = (NH + 2 * NKV) * HS, KW = 2 * NKV * HS;
    size_t n3 = (size_t)B * T * W, nc = (size_t)B * T * C, nl = (size_t)B * NH * T, nk = (size_t)B * T * KW;
    float *qkv = ct_frand(n3, 1, 0), *out = ct_alloc(FLOATS(nc)), *lse = ct_alloc(FLOATS(nl));
    float *d_qkv = ct_put(qkv, FLOATS(n3)), *d_out = ct_nan(nc), *d_lse = ct_nan(nl);
    char what[128];
    attention_forward(out, lse, qkv, qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    cuda_attention_forward(0, d_out, d_lse, d_qkv, d_qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    snprintf(what, sizeof what, "attention_forward out (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_close(what, d_out, out, nc, TOL_GEMM);
    snprintf(what, sizeof what, "attention_forward lse (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_close(what, d_lse, lse, nl, TOL_GEMM);

    float *dout = ct_frand(nc, 1, 0), *dqkv = ct_alloc(FLOATS(n3));
    float *d_dout = ct_put(dout, FLOATS(nc)), *d_dqkv = ct_nan(n3);
    float *d_lse0 = ct_put(lse, FLOATS(nl)), *d_out0 = ct_put(out, FLOATS(nc)); /* both sides from the CPU's */
    attention_backward(dqkv, dqkv + NH * HS, dout, out, qkv, qkv + NH * HS, W, lse, B, T, 0, 0, T, NH, NKV, HS,
                       ATT_CAUSAL);
    cuda_attention_backward(0, d_dqkv, d_dqkv + NH * HS, d_dout, d_out0, d_qkv, d_qkv + NH * HS, W, d_lse0, B, T, 0, 0,
                            T, NH, NKV, HS, ATT_CAUSAL);
    snprintf(what, sizeof what, "attention_backward dqkv (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_close(what, d_dqkv, dqkv, n3, TOL_GEMM);

    /* rows [n, 2n) against a packed block's rows [n, 2n), unmasked, merged into the forward's state */
    int n = (T - 9) / 2;
    float *kv = ct_frand(nk, 1, 0), *dkv = ct_frand(nk, 1, 0);
    float *d_kv = ct_put(kv, FLOATS(nk)), *d_dkv = ct_put(dkv, FLOATS(nk));
    ct_copy_in(d_out, out, FLOATS(nc));
    ct_copy_in(d_lse, lse, FLOATS(nl));
    attention_forward(out, lse, qkv, kv, KW, B, T, n, n, n, NH, NKV, HS, ATT_MERGE);
    cuda_attention_forward(0, d_out, d_lse, d_qkv, d_kv, KW, B, T, n, n, n, NH, NKV, HS, ATT_MERGE);
    snprintf(what, sizeof what, "attention_forward merged chunk pair out (n %d, HS %d, NKV %d)", n, HS, NKV);
    ct_close(what, d_out, out, nc, TOL_GEMM);
    snprintf(what, sizeof what, "attention_forward merged chunk pair lse (n %d, HS %d, NKV %d)", n, HS, NKV);
    ct_close(what, d_lse, lse, nl, TOL_GEMM);
    ct_copy_in(d_lse0, lse, FLOATS(nl));
    ct_copy_in(d_out0, out, FLOATS(nc));
    ct_copy_in(d_dqkv, dqkv, FLOATS(n3));
    attention_backward(dqkv, dkv, dout, out, qkv, kv, KW, lse, B, T, n, n, n, NH, NKV, HS, ATT_ACCUM);
    cuda_attention_backward(0, d_dqkv, d_dkv, d_dout, d_out0, d_qkv, d_kv, KW, d_lse0, B, T, n, n, n, NH, NKV, HS,
                            ATT_ACCUM);
    snprintf(what, sizeof what, "attention_backward chunk pair dq, added (n %d, HS %d, NKV %d)", n, HS, NKV);
    ct_close(what, d_dqkv, dqkv, n3, TOL_GEMM);
    snprintf(what, sizeof what, "attention_backward chunk pair dk dv, added (n %d, HS %d, NKV %d)", n, HS, NKV);
    ct_close(what, d_dkv, dkv, nk, TOL_GEMM);

    free(qkv), free(out), free(lse), free(dout), free(dqkv), free(kv), free(dkv);
    ct_free_all();
}

/* Device array dev (n floats) against ref: at least share of the
 * elements within tight (relative, floor 1 % of ref's largest), every one
 * within loose.  A bf16 run's attention rounds its probabilities to bf16:
 * where the two sides' fp32 probabilities fall on either side of a
 * rounding boundary the rounded values differ by a bf16 step, which moves
 * that row's sums by up to 2^-8 of a probability; everywhere else the two
 * agree as fp32 sums do. */
static void ct_mostly_close(const char *what, const float *dev, const float *ref, size_t n, double tight,
                            double share, double loose)
{
    float *g = ct_get(dev, FLOATS(n));
    double big = 0, worst = 0;
    size_t near = 0;
    for (size_t i = 0; i < n; i++) big = fabs(ref[i]) > big ? fabs(ref[i]) : big;
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(ref[i]) > 1e-2 * big ? fabs(ref[i]) : 1e-2 * big;
        double e = isnan(g[i]) ? INFINITY : fabs(g[i] - ref[i]) / (scale > 0 ? scale : 1);
        near += e <= tight;
        worst = e > worst ? e : worst;
    }
    tap_ok((double)near >= share * (double)n && worst <= loose,
           "%s: GPU vs CPU %.4f of the elements within %.0e (>= %.2f), all within %.0e (worst %.1e)", what,
           (double)near / (double)n, tight, share, loose, worst);
    free(g);
}

/* A bf16 run's attention (the probabilities and dS rounded to bf16 before
 * their products) against the CPU's (cpu_device in PREC_BF16: gemm_bf16),
 * on bf16 values of q, k, v and dout, causal over the whole sequence.  The
 * forward rounds probabilities not yet normalised, against the row's
 * running maximum, which moves at the end of each block of keys (64 on
 * the CPU, 32 here): the two round the same values only when every key
 * is in the first block (T <= 32); the backward's probabilities are
 * normalised (exp(s - lse)) on both, at every T. */
static void test_attention_bf16(int NH, int NKV, int HS, int T)
{
    int B = 2, C = NH * HS, W = (NH + 2 * NKV) * HS;
    size_t n3 = (size_t)B * T * W, nc = (size_t)B * T * C, nl = (size_t)B * NH * T;
    float *qkv = ct_frand(n3, 2, 0), *out = ct_alloc(FLOATS(nc)), *lse = ct_alloc(FLOATS(nl));
    float *dout = ct_frand(nc, 1, 0), *dqkv = ct_alloc(FLOATS(n3));
    lp_round(PREC_BF16, qkv, n3);
    lp_round(PREC_BF16, dout, nc);
    float *d_qkv = ct_put(qkv, FLOATS(n3)), *d_out = ct_nan(nc), *d_lse = ct_nan(nl);
    char what[128];
    cpu_device.attention_forward(PREC_BF16, out, lse, qkv, qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    cuda_attention_forward(1, d_out, d_lse, d_qkv, d_qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    snprintf(what, sizeof what, "bf16 attention_forward out (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    if (T <= 32) ct_mostly_close(what, d_out, out, nc, 2e-5, 0.95, 1e-2);
    else ct_mostly_close(what, d_out, out, nc, 1e-2, 0.95, 0.2); /* (rounded against other maxima: bf16's noise) */
    snprintf(what, sizeof what, "bf16 attention_forward lse (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_close(what, d_lse, lse, nl, TOL_GEMM);

    float *d_dout = ct_put(dout, FLOATS(nc)), *d_dqkv = ct_nan(n3);
    float *d_lse0 = ct_put(lse, FLOATS(nl)), *d_out0 = ct_put(out, FLOATS(nc));
    cpu_device.attention_backward(PREC_BF16, dqkv, dqkv + NH * HS, dout, out, qkv, qkv + NH * HS, W, lse, B, T, 0, 0,
                                  T, NH, NKV, HS, ATT_CAUSAL);
    cuda_attention_backward(1, d_dqkv, d_dqkv + NH * HS, d_dout, d_out0, d_qkv, d_qkv + NH * HS, W, d_lse0, B, T, 0,
                            0, T, NH, NKV, HS, ATT_CAUSAL);
    snprintf(what, sizeof what, "bf16 attention_backward dqkv (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_mostly_close(what, d_dqkv, dqkv, n3, 2e-5, 0.95, 1e-2);

    /* the rounding is what they share: the fp32 kernel's gradients are further off */
    ct_copy_in(d_dqkv, dqkv, FLOATS(n3));
    cuda_attention_backward(0, d_dqkv, d_dqkv + NH * HS, d_dout, d_out0, d_qkv, d_qkv + NH * HS, W, d_lse0, B, T, 0,
                            0, T, NH, NKV, HS, ATT_CAUSAL);
    float *g = ct_get(d_dqkv, FLOATS(n3));
    size_t near = 0;
    for (size_t i = 0; i < n3; i++) near += fabs(g[i] - dqkv[i]) <= 2e-5 * fabs(dqkv[i]);
    tap_ok(near < n3 / 2, "bf16 attention_backward: the GPU's fp32 attention is not the bf16 one (%zu of %zu close)",
           near, n3);
    free(g);
    free(qkv), free(out), free(lse), free(dout), free(dqkv);
    ct_free_all();
}

/* Attention over a cache: S sequences of T rows, as one call of all rows
 * (a prefill) and then again a row at a time (decode steps, sequences
 * interleaved), against the CPU kernel; the caches the rows filled equal
 * the CPU's bit for bit (a copy). */
static void test_attention_cached(int NH, int NKV, int HS, int T)
{
    int S = 3, N = S * T, W = (NH + 2 * NKV) * HS, C = NH * HS, KV = NKV * HS;
    size_t nq = (size_t)N * W, no = (size_t)N * C, nk = (size_t)N * KV;
    float *qkv = ct_frand(nq, 1, 0), *out = ct_alloc(FLOATS(no)), *kc = ct_alloc(FLOATS(nk)), *vc = ct_alloc(FLOATS(nk));
    int32_t *seq = ct_alloc((size_t)N * sizeof *seq), *pos = ct_alloc((size_t)N * sizeof *pos);
    for (int r = 0; r < N; r++) seq[r] = r / T, pos[r] = r % T;
    float *d_qkv = ct_put(qkv, FLOATS(nq)), *d_out = ct_nan(no), *d_kc = ct_nan(nk), *d_vc = ct_nan(nk);
    int32_t *d_seq = ct_put(seq, (size_t)N * sizeof *seq), *d_pos = ct_put(pos, (size_t)N * sizeof *pos);
    char what[128];
    attention_cached(out, qkv, W, kc, vc, seq, pos, N, T, NH, NKV, HS);
    cuda_attention_cached(d_out, d_qkv, W, d_kc, d_vc, d_seq, d_pos, N, T, NH, NKV, HS);
    snprintf(what, sizeof what, "attention_cached, all rows in one call (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_close(what, d_out, out, no, TOL_GEMM);
    snprintf(what, sizeof what, "attention_cached: the caches (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_equal(what, d_kc, kc, nk);
    d_out = ct_nan(no), d_kc = ct_nan(nk), d_vc = ct_nan(nk);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < S; b++) {
            int r = b * T + t;
            cuda_attention_cached(d_out + (size_t)r * C, d_qkv + (size_t)r * W, W, d_kc, d_vc, d_seq + r, d_pos + r, 1,
                                  T, NH, NKV, HS);
        }
    snprintf(what, sizeof what, "attention_cached, a row at a time (NH %d, NKV %d, HS %d, T %d)", NH, NKV, HS, T);
    ct_close(what, d_out, out, no, TOL_GEMM);
    free(qkv), free(out), free(kc), free(vc), free(seq), free(pos);
    ct_free_all();
}

/* ------------------------------------------------------------ llama's kernels */

static void test_llama_kernels(void)
{
    int N = 70, C = 300, B = 2, T = 37, NH = 4, NKV = 2, HS = 10, F = 333;
    size_t NC = (size_t)N * C, nq = (size_t)B * T * (NH + 2 * NKV) * HS, nt = (size_t)T * HS / 2, NF = (size_t)N * F;
    float *inp = ct_frand(NC, 2, 0.5), *w = ct_frand(C, 1, 1), *out = ct_alloc(FLOATS(NC)), *rstd = ct_alloc(FLOATS(N));
    float *d_inp = ct_put(inp, FLOATS(NC)), *d_w = ct_put(w, FLOATS(C)), *d_out = ct_nan(NC), *d_rstd = ct_nan(N);
    rmsnorm_forward(out, rstd, inp, w, N, C, 1e-6f);
    cuda_rmsnorm_forward(d_out, d_rstd, d_inp, d_w, N, C, 1e-6f);
    ct_close("rmsnorm_forward out", d_out, out, NC, TOL_F32);
    ct_close("rmsnorm_forward rstd", d_rstd, rstd, N, TOL_F32);
    float *dout = ct_frand(NC, 1, 0), *dinp = ct_frand(NC, 1, 0), *dw = ct_frand(C, 1, 0);
    float *d_dout = ct_put(dout, FLOATS(NC)), *d_dinp = ct_put(dinp, FLOATS(NC)), *d_dw = ct_put(dw, FLOATS(C));
    float *d_rstd0 = ct_put(rstd, FLOATS(N)); /* both sides from the CPU's rstd */
    rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C);
    cuda_rmsnorm_backward(d_dinp, d_dw, d_dout, d_inp, d_w, d_rstd0, N, C);
    ct_close("rmsnorm_backward dinp (+=)", d_dinp, dinp, NC, TOL_F32);
    ct_close("rmsnorm_backward dweight (+=)", d_dw, dw, C, TOL_F32);

    float *qkv = ct_frand(nq, 1, 0), *cs = ct_frand(nt, 1, 0), *sn = ct_frand(nt, 1, 0);
    float *d_qkv = ct_put(qkv, FLOATS(nq)), *d_cs = ct_put(cs, FLOATS(nt)), *d_sn = ct_put(sn, FLOATS(nt));
    rope_forward(qkv, cs, sn, B, T, NH, NKV, HS);
    cuda_rope_forward(d_qkv, d_cs, d_sn, B, T, NH, NKV, HS);
    ct_close("rope_forward (in place; v heads untouched)", d_qkv, qkv, nq, TOL_F32);
    rope_backward(qkv, cs, sn, B, T, NH, NKV, HS);
    cuda_rope_backward(d_qkv, d_cs, d_sn, B, T, NH, NKV, HS);
    ct_close("rope_backward (in place)", d_qkv, qkv, nq, TOL_F32);

    float *gu = ct_frand(2 * NF, 4, 0), *h = ct_alloc(FLOATS(NF)), *dh = ct_frand(NF, 1, 0);
    float *dgu = ct_alloc(FLOATS(2 * NF));
    float *d_gu = ct_put(gu, FLOATS(2 * NF)), *d_h = ct_nan(NF), *d_dh = ct_put(dh, FLOATS(NF)), *d_dgu = ct_nan(2 * NF);
    swiglu_forward(h, gu, (size_t)N, F);
    cuda_swiglu_forward(d_h, d_gu, (size_t)N, F);
    ct_close("swiglu_forward", d_h, h, NF, TOL_F32);
    swiglu_backward(dgu, gu, dh, (size_t)N, F);
    cuda_swiglu_backward(d_dgu, d_gu, d_dh, (size_t)N, F);
    ct_close("swiglu_backward", d_dgu, dgu, 2 * NF, TOL_F32);
    free(inp), free(w), free(out), free(rstd), free(dout), free(dinp), free(dw), free(qkv), free(cs), free(sn);
    free(gu), free(h), free(dh), free(dgu);
    ct_free_all();
}

/* ------------------------------------------------------------ tensor cores */

static const char *format_name(enum precision p) { return p == PREC_BF16 ? "bf16" : "fp16"; }
static enum cuda_lp lp_of(enum precision p) { return p == PREC_BF16 ? CUDA_BF16 : CUDA_FP16; }

/* A copy of the n floats at x rounded to format p: what the products of a
 * tensor-core kernel given x must see. */
static float *rounded(enum precision p, const float *x, size_t n)
{
    float *r = ct_alloc(FLOATS(n));
    memcpy(r, x, FLOATS(n));
    lp_round(p, r, n);
    return r;
}

/* The GPU gets fp32 inputs, the CPU the same rounded to the format: they
 * agree only if the kernels multiply 16-bit copies of the right format. */
static void test_matmul_tc(enum precision p)
{
    int N = 65, C = 96, OC = 130;
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    float *inp = ct_frand(NC, 1, 0), *w = ct_frand(OCC, 1, 0), *bias = ct_frand(OC, 1, 0);
    float *inp_r = rounded(p, inp, NC), *w_r = rounded(p, w, OCC), *out = ct_alloc(FLOATS(NO));
    float *d_inp = ct_put(inp, FLOATS(NC)), *d_w = ct_put(w, FLOATS(OCC)), *d_bias = ct_put(bias, FLOATS(OC));
    float *d_out = ct_nan(NO);
    char what[96];
    matmul_forward(out, inp_r, w_r, bias, N, C, OC);
    cuda_matmul_forward_tc(lp_of(p), d_out, d_inp, d_w, d_bias, N, C, OC);
    snprintf(what, sizeof what, "matmul_forward_tc (%s)", format_name(p));
    ct_close(what, d_out, out, NO, TOL_GEMM);

    float *dout = ct_frand(NO, 1, 0), *dout_r = rounded(p, dout, NO), *dinp = ct_alloc(FLOATS(NC));
    float *dw = ct_frand(OCC, 1, 0), *db = ct_frand(OC, 1, 0), *dw_scratch = ct_alloc(FLOATS(OCC));
    float *d_dout = ct_put(dout, FLOATS(NO)), *d_dinp = ct_nan(NC);
    float *d_dw = ct_put(dw, FLOATS(OCC)), *d_db = ct_put(db, FLOATS(OC));
    matmul_backward(dinp, dw, NULL, dout_r, inp_r, w_r, N, C, OC);
    matmul_backward(NULL, dw_scratch, db, dout, inp, w, N, C, OC); /* the bias sums the fp32 gradients */
    cuda_matmul_backward_tc(lp_of(p), d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC);
    snprintf(what, sizeof what, "matmul_backward_tc dinp (%s)", format_name(p));
    ct_close(what, d_dinp, dinp, NC, TOL_GEMM);
    snprintf(what, sizeof what, "matmul_backward_tc dweight (+= in fp32, %s)", format_name(p));
    ct_close(what, d_dw, dw, OCC, TOL_GEMM);
    snprintf(what, sizeof what, "matmul_backward_tc dbias (+=, fp32, %s)", format_name(p));
    ct_close(what, d_db, db, OC, TOL_F32);
    free(inp), free(w), free(bias), free(inp_r), free(w_r), free(out);
    free(dout), free(dout_r), free(dinp), free(dw), free(db), free(dw_scratch);
    ct_free_all();
}

/* ------------------------------------------------------------ peak rate */

/* The program's MFU reference: a timed product in each mode (small here;
 * the program times 4096^3). */
static void test_peak(void)
{
    const int modes[3] = {-1, CUDA_BF16, CUDA_FP16};
    const char *names[3] = {"fp32", "bf16", "fp16"};
    for (int i = 0; i < 3; i++) {
        double g = cuda_peak_gflops(modes[i], 64);
        tap_ok(isfinite(g) && g > 0, "cuda_peak_gflops (%s, 64^3): %.3g GFLOP/s, finite and positive", names[i], g);
    }
    tap_ok(strlen(cuda_device_name()) > 0, "cuda_device_name: \"%s\"", cuda_device_name());
}

/* ------------------------------------------------------------ elementwise */

static void test_elementwise(void)
{
    size_t n = 100003;
    float *x = ct_frand(n, 6, 0), *y = ct_frand(n, 1, 0), *out = ct_alloc(FLOATS(n));
    float *d_x = ct_put(x, FLOATS(n)), *d_y = ct_put(y, FLOATS(n)), *d_out = ct_nan(n);
    gelu_forward(out, x, n);
    cuda_gelu_forward(d_out, d_x, n);
    ct_close("gelu_forward", d_out, out, n, TOL_F32);
    gelu_backward(out, x, y, n);
    cuda_gelu_backward(d_out, d_x, d_y, n);
    ct_close("gelu_backward", d_out, out, n, TOL_F32);
    residual_forward(out, x, y, n);
    cuda_residual_forward(d_out, d_x, d_y, n);
    ct_equal("residual_forward", d_out, out, n);
    scale_inplace(x, n, 0.37f);
    cuda_scale_inplace(d_x, n, 0.37f);
    ct_equal("scale_inplace", d_x, x, n);

    size_t big = ((size_t)1 << 20) + 7; /* more than one grid-stride pass per thread */
    float *z = ct_frand(big, 3, 0.1);
    double want = sumsq(z, big), got = cuda_sumsq(ct_put(z, FLOATS(big)), big);
    double e = fabs(got - want) / want;
    tap_ok(e <= TOL_SUMSQ, "sumsq: GPU %.17g vs CPU %.17g (rel err %.1e <= %.0e)", got, want, e,
           TOL_SUMSQ);
    free(x), free(y), free(out), free(z);
    ct_free_all();
}

/* ------------------------------------------------------------ cross-entropy */

/* One shard [v0, v0+Vs) of a vocabulary of V real ids. */
static void test_crossentropy(int v0, int Vs, int V)
{
    int N = 37;
    size_t NV = (size_t)N * Vs;
    char what[128];
    float *logits = ct_frand(NV, 4, 0);
    int32_t *tg = ct_tokens(N, V);
    float *mx = ct_alloc(FLOATS(N)), *sums = ct_alloc(FLOATS(N)), *tl = ct_alloc(FLOATS(N)), *loss = ct_alloc(FLOATS(N));
    float *dl = ct_alloc(FLOATS(NV));
    float *d_logits = ct_put(logits, FLOATS(NV));
    int32_t *d_tg = ct_put(tg, N * sizeof(int32_t));
    float *d_mx = ct_nan(N), *d_sums = ct_nan(N), *d_tl = ct_nan(N), *d_loss = ct_nan(N);
    float *d_dl = ct_nan(NV);
    float dloss = 1.0f / N;

    crossentropy_max(mx, logits, N, Vs, v0, V);
    cuda_crossentropy_max(d_mx, d_logits, N, Vs, v0, V);
    snprintf(what, sizeof what, "crossentropy_max, shard [%d,%d) of V=%d", v0, v0 + Vs, V);
    ct_equal(what, d_mx, mx, N);
    crossentropy_sumexp(sums, tl, logits, mx, tg, N, Vs, v0, V);
    cuda_crossentropy_sumexp(d_sums, d_tl, d_logits, d_mx, d_tg, N, Vs, v0, V);
    if (v0 >= V) { /* no real column: max -inf, sums and tlogit 0, gradient 0 */
        ct_equal("crossentropy_sumexp sums, empty shard", d_sums, sums, N);
    } else {
        snprintf(what, sizeof what, "crossentropy_sumexp sums, shard at %d", v0);
        ct_close(what, d_sums, sums, N, TOL_F32);
        crossentropy_loss(loss, mx, sums, tl, N);
        cuda_crossentropy_loss(d_loss, d_mx, d_sums, d_tl, N);
        snprintf(what, sizeof what, "crossentropy_loss, shard at %d", v0);
        ct_close(what, d_loss, loss, N, TOL_F32);
    }
    snprintf(what, sizeof what, "crossentropy_sumexp tlogit, shard at %d", v0);
    ct_equal(what, d_tl, tl, N);
    /* the exponentials left over the real columns; the padding's logits as they were */
    snprintf(what, sizeof what, "crossentropy_sumexp exponentials over the logits, shard at %d", v0);
    ct_close(what, d_logits, logits, NV, TOL_F32);

    /* both sides from their own exponentials and the CPU's sums */
    float *d_sums0 = ct_put(sums, FLOATS(N));
    crossentropy_backward(dl, logits, sums, tg, dloss, N, Vs, v0, V);
    cuda_crossentropy_backward(d_dl, d_logits, d_sums0, d_tg, dloss, N, Vs, v0, V);
    snprintf(what, sizeof what, "crossentropy_backward, shard at %d (padding 0)", v0);
    ct_close(what, d_dl, dl, NV, TOL_F32);
    cuda_crossentropy_backward(d_logits, d_logits, d_sums0, d_tg, dloss, N, Vs, v0, V);
    snprintf(what, sizeof what, "crossentropy_backward in place (dlogits = exps), shard at %d", v0);
    ct_close(what, d_logits, dl, NV, TOL_F32);

    free(logits), free(tg), free(mx), free(sums), free(tl), free(loss), free(dl);
    ct_free_all();
}

/* ------------------------------------------------------------ AdamW */

/* Parameters of the size of one step (lr 1e-2, values ~1e-2), so the
 * comparison of param sees an error in the step itself. */
static void test_adamw(void)
{
    size_t n = 100003;
    float *p = ct_frand(n, 1e-2, 0), *g = ct_frand(n, 1, 0), *m = ct_frand(n, 0.1, 0);
    float *v = ct_frand(n, 0.05, 0.06);
    float *d_p = ct_put(p, FLOATS(n)), *d_g = ct_put(g, FLOATS(n)), *d_m = ct_put(m, FLOATS(n)), *d_v = ct_put(v, FLOATS(n));
    for (int t = 1; t <= 3; t++) {
        adamw_update(p, g, 0.5f, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0);
        cuda_adamw_update(d_p, d_g, 0.5f, d_m, d_v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t, 0);
    }
    ct_close("adamw_update param (3 steps, gradient scale 0.5)", d_p, p, n, TOL_F32);
    ct_close("adamw_update m", d_m, m, n, TOL_F32);
    ct_close("adamw_update v", d_v, v, n, TOL_F32);
    adamw_update(p, g, 1.0f, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 4, 0);
    cuda_adamw_update(d_p, d_g, 1.0f, d_m, d_v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 4, 0);
    ct_close("adamw_update param, wd 0", d_p, p, n, TOL_F32);
    adamw_update(p, g, 1.0f, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 5, 1);
    cuda_adamw_update(d_p, d_g, 1.0f, d_m, d_v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, 5, 1);
    ct_close("adamw_update param, the gradient cleared", d_p, p, n, TOL_F32);
    float *cleared = ct_get(d_g, FLOATS(n));
    int zeros = 1;
    for (size_t i = 0; i < n; i++) zeros &= f32_bits(cleared[i]) == 0 && f32_bits(g[i]) == 0;
    tap_ok(zeros, "adamw_update with clear: every gradient left +0, on the GPU and the CPU");
    free(cleared);
    free(p), free(g), free(m), free(v);
    ct_free_all();
}

int main(void)
{
    cuda_test_start();
    test_encoder();
    test_layernorm();
    test_matmul(0);
    test_matmul(1);
    test_attention(4, 4, 24, 67);
    test_attention(4, 2, 24, 67);
    test_attention(2, 1, 64, 90);  /* two values a lane; chunks of 40 rows: two tiles */
    test_attention(2, 2, 128, 75); /* the kernel's largest head */
    test_attention_cached(4, 2, 24, 37);
    test_attention_cached(2, 1, 128, 70); /* four values a lane; three tiles of keys */
    test_llama_kernels();
    test_matmul_tc(PREC_BF16);
    test_matmul_tc(PREC_FP16);
    test_elementwise();
    test_crossentropy(0, 300, 250);   /* one shard, 50 padded columns */
    test_crossentropy(300, 300, 520); /* second shard, 80 padded */
    test_crossentropy(600, 300, 520); /* a shard of padding only */
    test_adamw();
    test_peak();
    test_attention_bf16(4, 2, 24, 29); /* (last: the others' random inputs stay as they were) */
    test_attention_bf16(4, 2, 24, 67);
    test_attention_bf16(2, 1, 64, 90);
    cuda_backend_finalize();
    return tap_done();
}
