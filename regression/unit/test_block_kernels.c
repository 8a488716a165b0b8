/* test_block_kernels.c -- the attention kernels (multi-head and grouped-
 * query) and the llama family's: the rotary embedding, RMSNorm, SwiGLU; the
 * same checks as test_kernels.c:
 *
 *  (a) each double backward against central finite differences of the
 *      double forward, L = sum(out * w);
 *  (b) each float kernel against the double one on the same inputs;
 *  (c) exact references written out longhand: attention by scalar loops
 *      (each query head on its group's kv head) and its causality, the
 *      rotary turn by Hugging Face's formula q*cos + rotate_half(q)*sin,
 *      RMSNorm and SwiGLU by their definitions; "+=" outputs accumulate,
 *      overwritten ones ignore their old contents (NaN-filled);
 *  (d) a bf16 run's attention (the CPU table in PREC_BF16) against the
 *      same loops with its probabilities and dS rounded to bf16. */
#include "backend.h"
#include "device.h"
#include "kernel_check.h"
#include "precision.h"

/* ------------------------------------------------------------ attention */

/* Scalar-loop reference: query head h of NH reads kv head h / (NH / NKV). */
static void attention_ref(double *out, double *lse, const double *qkv, int B, int T, int NH, int NKV, int HS)
{
    int W = (NH + 2 * NKV) * HS, C = NH * HS, G = NH / NKV;
    double sc = 1.0 / sqrt(HS);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * W + h * HS;
                double a[T];
                double mx = -INFINITY, s = 0;
                for (int j = 0; j < T; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * W + (NH + h / G) * HS;
                    a[j] = 0;
                    if (j > i) continue;
                    for (int d = 0; d < HS; d++) a[j] += q[d] * k[d];
                    a[j] *= sc;
                    mx = a[j] > mx ? a[j] : mx;
                }
                for (int j = 0; j <= i; j++) s += a[j] = exp(a[j] - mx);
                for (int j = 0; j <= i; j++) a[j] /= s;
                lse[((size_t)b * NH + h) * T + i] = mx + log(s);
                for (int d = 0; d < HS; d++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += a[j] * qkv[((size_t)b * T + j) * W + (NH + NKV + h / G) * HS + d];
                    out[((size_t)b * T + i) * C + h * HS + d] = o;
                }
            }
}

struct at {
    double *out, *lse, *qkv, *w;
    int B, T, NH, NKV, HS;
};
static double at_loss(void *p)
{
    struct at *a = p;
    att_fwd64(a->out, a->lse, a->qkv, a->B, a->T, a->NH, a->NKV, a->HS);
    return dot(a->out, a->w, (size_t)a->B * a->T * a->NH * a->HS);
}

static void test_attention(int B, int T, int NH, int NKV, int HS, int do_fd)
{
    int C = NH * HS, W = (NH + 2 * NKV) * HS;
    size_t BTC = (size_t)B * T * C, BTW = (size_t)B * T * W, ATT = (size_t)B * NH * T;
    struct at a = {.B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS};
    a.out = dnew(BTC);
    a.lse = dnew(ATT);
    a.qkv = drand_new(BTW, 1.5, 0);
    a.w = drand_new(BTC, 1, 0);
    char what[160], shape[96];
    snprintf(shape, sizeof shape, "attention B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);

    /* (c) against the scalar loops: the output and each row's log-sum-exp */
    double *ro = dnew(BTC), *ra = dnew(ATT);
    attention_ref(ro, ra, a.qkv, B, T, NH, NKV, HS);
    dnan(a.out, BTC);
    dnan(a.lse, ATT);
    at_loss(&a);
    double e1 = relerr(a.out, ro, BTC), e2 = relerr(a.lse, ra, ATT);
    tap_ok(e1 <= EXACT_TOL && e2 <= EXACT_TOL, "%s: fused forward = scalar reference (out %.1e, lse %.1e)", shape,
           e1, e2);

    /* (a) */
    double *dqkv = dnew(BTW);
    dnan(dqkv, BTW);
    at_loss(&a);
    att_bwd64(dqkv, a.w, a.out, a.qkv, a.lse, B, T, NH, NKV, HS);
    if (do_fd) {
        snprintf(what, sizeof what, "%s dqkv (overwritten)", shape);
        check_fd(what, dqkv, a.qkv, BTW, at_loss, &a);
    }

    /* (b) */
    float *fq = tof(a.qkv, BTW), *fw = tof(a.w, BTC), *fo = fnew(BTC), *fa = fnew(ATT), *fdq = fnew(BTW),
          *fs = fnew(BTC);
    fnan(fo, BTC);
    fnan(fa, ATT);
    fnan(fdq, BTW);
    at_loss(&a);
    att_fwd(fo, fa, fq, B, T, NH, NKV, HS);
    att_bwd(fdq, fw, fo, fq, fa, B, T, NH, NKV, HS);
    snprintf(what, sizeof what, "%s forward out", shape);
    check_f32(what, fo, a.out, BTC);
    snprintf(what, sizeof what, "%s forward lse", shape);
    check_f32(what, fa, a.lse, ATT);
    snprintf(what, sizeof what, "%s backward dqkv", shape);
    check_f32(what, fdq, dqkv, BTW);

    /* (c) causality: new k and v at position p (every head, batch 0) leave
     * float outputs before p bitwise unchanged and change position p. */
    int p = T / 2 + 1;
    memcpy(fs, fo, BTC * sizeof(float));
    for (int c = C; c < W; c++) fq[(size_t)p * W + c] += 0.5f;
    att_fwd(fo, fa, fq, B, T, NH, NKV, HS);
    int before = memcmp(fo, fs, (size_t)p * C * sizeof(float)) == 0;
    int at_p = memcmp(fo + (size_t)p * C, fs + (size_t)p * C, C * sizeof(float)) != 0;
    tap_ok(before && at_p, "%s: causal (k,v at t=%d change nothing before it, change t=%d)", shape, p, p);

    free(a.out), free(a.lse), free(a.qkv), free(a.w), free(ro), free(ra), free(dqkv);
    free(fq), free(fw), free(fo), free(fa), free(fdq), free(fs);
}

/* Attention over a cache (generation): B sequences of T rows, every row at
 * its sequence's slot and position, in one call against the scalar
 * reference (double) and the double kernel (float); then the float rows
 * one call each, positions in order and the sequences interleaved (a
 * decode), and all of them in one call in reverse order: each row bitwise
 * what the first call gave it (a row depends on its own sequence alone). */
static void test_attention_cached(int B, int T, int NH, int NKV, int HS)
{
    int C = NH * HS, W = (NH + 2 * NKV) * HS, KV = NKV * HS, N = B * T;
    size_t NC = (size_t)N * C, NW = (size_t)N * W, cache = (size_t)N * KV;
    double *qkv = drand_new(NW, 1.5, 0), *ro = dnew(NC), *ra = dnew((size_t)B * NH * T), *out = dnew(NC);
    double *kc = dnew(cache), *vc = dnew(cache);
    int32_t *seq = xalloc((size_t)N * sizeof *seq), *pos = xalloc((size_t)N * sizeof *pos);
    for (int r = 0; r < N; r++) seq[r] = r / T, pos[r] = r % T;
    char shape[96];
    snprintf(shape, sizeof shape, "attention_cached B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);
    attention_ref(ro, ra, qkv, B, T, NH, NKV, HS);
    dnan(out, NC), dnan(kc, cache), dnan(vc, cache);
    attention_cached_f64(out, qkv, W, kc, vc, seq, pos, N, T, NH, NKV, HS);
    double e = relerr(out, ro, NC);
    tap_ok(e <= EXACT_TOL, "%s: every row in one call = scalar reference (%.1e)", shape, e);

    float *fq = tof(qkv, NW), *fo = fnew(NC), *fr = fnew(NC), *fk = fnew(cache), *fv = fnew(cache);
    fnan(fo, NC), fnan(fk, cache), fnan(fv, cache);
    attention_cached(fo, fq, W, fk, fv, seq, pos, N, T, NH, NKV, HS);
    check_f32(shape, fo, out, NC);
    fnan(fr, NC), fnan(fk, cache), fnan(fv, cache);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) {
            int r = b * T + t;
            attention_cached(fr + (size_t)r * C, fq + (size_t)r * W, W, fk, fv, seq + r, pos + r, 1, T, NH, NKV, HS);
        }
    tap_ok(memcmp(fr, fo, NC * sizeof(float)) == 0, "%s: a row at a time, sequences interleaved = one call, bitwise",
           shape);
    float *rq = fnew(NW);
    int32_t *rs = xalloc((size_t)N * sizeof *rs), *rp = xalloc((size_t)N * sizeof *rp);
    for (int r = 0; r < N; r++) {
        memcpy(rq + (size_t)r * W, fq + (size_t)(N - 1 - r) * W, (size_t)W * sizeof(float));
        rs[r] = seq[N - 1 - r], rp[r] = pos[N - 1 - r];
    }
    fnan(fk, cache), fnan(fv, cache);
    attention_cached(fr, rq, W, fk, fv, rs, rp, N, T, NH, NKV, HS);
    int same = 1;
    for (int r = 0; r < N; r++) same &= memcmp(fr + (size_t)r * C, fo + (size_t)(N - 1 - r) * C, C * sizeof(float)) == 0;
    tap_ok(same, "%s: the rows of one call in reverse order: each row the same bits", shape);
    free(qkv), free(ro), free(ra), free(out), free(kc), free(vc), free(seq), free(pos);
    free(fq), free(fo), free(fr), free(fk), free(fv), free(rq), free(rs), free(rp);
}

/* Grouped-query attention is multi-head attention with each kv head copied
 * to its query heads: the same outputs, and the kv gradients the sums of
 * the copies' (float kernels, within rounding). */
static void test_gqa_is_mha_with_copies(int B, int T, int NH, int NKV, int HS)
{
    int C = NH * HS, W = (NH + 2 * NKV) * HS, W3 = 3 * C, G = NH / NKV;
    size_t BT = (size_t)B * T, ATT = (size_t)B * NH * T;
    double *qkv = drand_new(BT * W, 1.5, 0), *dout = drand_new(BT * C, 1, 0);
    double *full = dnew(BT * W3), *o1 = dnew(BT * C), *o2 = dnew(BT * C), *a1 = dnew(ATT), *a2 = dnew(ATT);
    double *d1 = dnew(BT * W), *d2 = dnew(BT * W3);
    for (size_t r = 0; r < BT; r++)
        for (int h = 0; h < NH; h++)
            for (int d = 0; d < HS; d++) {
                full[r * W3 + h * HS + d] = qkv[r * W + h * HS + d];
                full[r * W3 + C + h * HS + d] = qkv[r * W + (NH + h / G) * HS + d];
                full[r * W3 + 2 * C + h * HS + d] = qkv[r * W + (NH + NKV + h / G) * HS + d];
            }
    att_fwd64(o1, a1, qkv, B, T, NH, NKV, HS);
    att_fwd64(o2, a2, full, B, T, NH, NH, HS);
    att_bwd64(d1, dout, o1, qkv, a1, B, T, NH, NKV, HS);
    att_bwd64(d2, dout, o2, full, a2, B, T, NH, NH, HS);
    double *sum = dnew(BT * W);
    for (size_t r = 0; r < BT; r++)
        for (int h = 0; h < NH; h++)
            for (int d = 0; d < HS; d++) {
                sum[r * W + h * HS + d] = d2[r * W3 + h * HS + d];
                sum[r * W + (NH + h / G) * HS + d] += d2[r * W3 + C + h * HS + d];
                sum[r * W + (NH + NKV + h / G) * HS + d] += d2[r * W3 + 2 * C + h * HS + d];
            }
    double eo = relerr(o1, o2, BT * C), ed = relerr(d1, sum, BT * W);
    tap_ok(eo <= EXACT_TOL && ed <= EXACT_TOL,
           "attention NH=%d NKV=%d: = multi-head attention on copied kv heads (out %.1e), kv gradients = the "
           "copies' sums (%.1e)", NH, NKV, eo, ed);
    free(qkv), free(dout), free(full), free(o1), free(o2), free(a1), free(a2), free(d1), free(d2);
    free(sum);
}

/* ------------------------------------------------------------ rotary embedding */

/* Tables as the model makes them: pair i of position t turns by t * theta^(-2i/HS). */
static void rope_tables(double *cs, double *sn, int T, int HS, double theta)
{
    for (int t = 0; t < T; t++)
        for (int i = 0; i < HS / 2; i++) {
            double a = t * pow(theta, -2.0 * i / HS);
            cs[t * HS / 2 + i] = cos(a);
            sn[t * HS / 2 + i] = sin(a);
        }
}

struct rp {
    double *y, *x, *cs, *sn, *w;
    int B, T, NH, NKV, HS;
};
static double rope_loss(void *p)
{
    struct rp *r = p;
    size_t n = (size_t)r->B * r->T * (r->NH + 2 * r->NKV) * r->HS;
    memcpy(r->y, r->x, n * sizeof(double));
    rope_forward_f64(r->y, r->cs, r->sn, r->B, r->T, r->NH, r->NKV, r->HS);
    return dot(r->y, r->w, n);
}

static void test_rope(int B, int T, int NH, int NKV, int HS)
{
    int W = (NH + 2 * NKV) * HS, half = HS / 2;
    size_t n = (size_t)B * T * W, nt = (size_t)T * half;
    struct rp r = {.B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS};
    r.x = drand_new(n, 1, 0);
    r.w = drand_new(n, 1, 0);
    r.y = dnew(n);
    r.cs = dnew(nt);
    r.sn = dnew(nt);
    rope_tables(r.cs, r.sn, T, HS, 10000.0);
    char shape[96], what[160];
    snprintf(shape, sizeof shape, "rope B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);

    /* (c) Hugging Face: x*cos + rotate_half(x)*sin on q and k, cos/sin = cat(freqs, freqs); v untouched */
    rope_loss(&r);
    double worst = 0;
    int v_same = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < NH + 2 * NKV; h++)
                for (int d = 0; d < HS; d++) {
                    size_t e = ((size_t)b * T + t) * W + (size_t)h * HS + d;
                    if (h >= NH + NKV) {
                        v_same &= r.y[e] == r.x[e];
                        continue;
                    }
                    const double *x = r.x + e - d;
                    int i = d % half;
                    double rot = d < half ? -x[d + half] : x[d - half];
                    double want = x[d] * r.cs[t * half + i] + rot * r.sn[t * half + i];
                    worst = fmax(worst, fabs(r.y[e] - want));
                }
    tap_ok(worst <= EXACT_TOL && v_same, "%s: = q cos + rotate_half(q) sin on q and k (%.1e), v untouched", shape,
           worst);

    /* (a) the backward turns back: the gradient of sum(y * w) */
    double *g = dcopy(r.w, n);
    rope_backward_f64(g, r.cs, r.sn, B, T, NH, NKV, HS);
    snprintf(what, sizeof what, "%s backward", shape);
    check_fd(what, g, r.x, n, rope_loss, &r);
    rope_loss(&r); /* (the finite differences left y of a perturbed x) */
    double *back = dcopy(r.y, n);
    rope_backward_f64(back, r.cs, r.sn, B, T, NH, NKV, HS);
    tap_ok(relerr(back, r.x, n) <= EXACT_TOL, "%s: the backward of the forward is the identity (a rotation)", shape);

    /* (b) */
    float *fy = tof(r.x, n), *fc = tof(r.cs, nt), *fsn = tof(r.sn, nt), *fg = tof(r.w, n);
    rope_forward(fy, fc, fsn, B, T, NH, NKV, HS);
    rope_backward(fg, fc, fsn, B, T, NH, NKV, HS);
    snprintf(what, sizeof what, "%s forward", shape);
    check_f32(what, fy, r.y, n);
    snprintf(what, sizeof what, "%s backward", shape);
    check_f32(what, fg, g, n);
    free(r.x), free(r.w), free(r.y), free(r.cs), free(r.sn), free(g), free(back), free(fy), free(fc), free(fsn);
    free(fg);
}

/* ------------------------------------------------------------ rmsnorm */

struct rn {
    double *out, *rstd, *inp, *weight, *w;
    int N, C;
    double eps;
};
static double rn_loss(void *p)
{
    struct rn *r = p;
    rmsnorm_forward_f64(r->out, r->rstd, r->inp, r->weight, r->N, r->C, r->eps);
    return dot(r->out, r->w, (size_t)r->N * r->C);
}

static void test_rmsnorm(int N, int C, double eps)
{
    size_t NC = (size_t)N * C;
    struct rn r = {.N = N, .C = C, .eps = eps};
    r.inp = drand_new(NC, 2, 0.3);
    r.weight = drand_new(C, 1, 1);
    r.w = drand_new(NC, 1, 0);
    r.out = dnew(NC);
    r.rstd = dnew(N);
    char shape[64], what[128];
    snprintf(shape, sizeof shape, "rmsnorm N=%d C=%d eps=%g", N, C, eps);

    /* (c) the definition: x / sqrt(mean(x^2) + eps) * weight */
    dnan(r.out, NC);
    rn_loss(&r);
    double worst = 0;
    for (int n = 0; n < N; n++) {
        double ms = 0;
        for (int c = 0; c < C; c++) ms += r.inp[(size_t)n * C + c] * r.inp[(size_t)n * C + c];
        double rs = 1 / sqrt(ms / C + eps);
        for (int c = 0; c < C; c++)
            worst = fmax(worst, fabs(r.out[(size_t)n * C + c] - r.inp[(size_t)n * C + c] * rs * r.weight[c]));
        worst = fmax(worst, fabs(r.rstd[n] - rs));
    }
    tap_ok(worst <= EXACT_TOL, "%s: = x / sqrt(mean(x^2) + eps) * weight, rstd saved (%.1e)", shape, worst);

    /* (a), (c) "+=": a second backward doubles the increments */
    double *di = dnew(NC), *dw = dnew(C); /* zeros: the first increment */
    rmsnorm_backward_f64(di, dw, r.w, r.inp, r.weight, r.rstd, N, C);
    snprintf(what, sizeof what, "%s dinp", shape);
    check_fd(what, di, r.inp, NC, rn_loss, &r);
    rn_loss(&r);
    double *di2 = dcopy(di, NC), *dw2 = dcopy(dw, C);
    rmsnorm_backward_f64(di2, dw2, r.w, r.inp, r.weight, r.rstd, N, C);
    double *inc = ddiff(di2, di, NC), *incw = ddiff(dw2, dw, C);
    tap_ok(relerr(inc, di, NC) <= EXACT_TOL && relerr(incw, dw, C) <= EXACT_TOL,
           "%s: dinp and dweight accumulate (+=)", shape);
    snprintf(what, sizeof what, "%s dweight", shape);
    check_fd(what, dw, r.weight, C, rn_loss, &r);

    /* (b) */
    rn_loss(&r);
    float *fx = tof(r.inp, NC), *fwt = tof(r.weight, C), *fd = tof(r.w, NC), *fo = fnew(NC), *fr = fnew(N);
    float *fdi = fnew(NC), *fdw = fnew(C);
    rmsnorm_forward(fo, fr, fx, fwt, N, C, (float)eps);
    rmsnorm_backward(fdi, fdw, fd, fx, fwt, fr, N, C);
    snprintf(what, sizeof what, "%s forward", shape);
    check_f32(what, fo, r.out, NC);
    snprintf(what, sizeof what, "%s dinp", shape);
    check_f32(what, fdi, di, NC);
    snprintf(what, sizeof what, "%s dweight", shape);
    check_f32(what, fdw, dw, C);
    free(r.inp), free(r.weight), free(r.w), free(r.out), free(r.rstd), free(di), free(dw), free(di2), free(dw2);
    free(inc), free(incw), free(fx), free(fwt), free(fd), free(fo), free(fr), free(fdi), free(fdw);
}

/* ------------------------------------------------------------ swiglu */

struct sg {
    double *out, *inp, *w;
    size_t N;
    int F;
};
static double sg_loss(void *p)
{
    struct sg *s = p;
    swiglu_forward_f64(s->out, s->inp, s->N, s->F);
    return dot(s->out, s->w, s->N * (size_t)s->F);
}

static void test_swiglu(size_t N, int F)
{
    size_t NF = N * (size_t)F;
    struct sg s = {.N = N, .F = F};
    s.inp = drand_new(2 * NF, 4, 0);
    s.w = drand_new(NF, 1, 0);
    s.out = dnew(NF);
    char shape[64], what[128];
    snprintf(shape, sizeof shape, "swiglu N=%zu F=%d", N, F);
    dnan(s.out, NF);
    sg_loss(&s);
    double worst = 0;
    for (size_t n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            double g = s.inp[n * 2 * F + i], u = s.inp[n * 2 * F + F + i];
            worst = fmax(worst, fabs(s.out[n * F + i] - g / (1 + exp(-g)) * u));
        }
    tap_ok(worst <= EXACT_TOL, "%s: = silu(gate) * up (%.1e)", shape, worst);
    double *di = dnew(2 * NF);
    dnan(di, 2 * NF);
    swiglu_backward_f64(di, s.inp, s.w, N, F);
    snprintf(what, sizeof what, "%s dinp (overwritten)", shape);
    check_fd(what, di, s.inp, 2 * NF, sg_loss, &s);
    float *fx = tof(s.inp, 2 * NF), *fd = tof(s.w, NF), *fo = fnew(NF), *fdi = fnew(2 * NF);
    fnan(fdi, 2 * NF);
    swiglu_forward(fo, fx, N, F);
    swiglu_backward(fdi, fx, fd, N, F);
    snprintf(what, sizeof what, "%s forward", shape);
    check_f32(what, fo, s.out, NF);
    snprintf(what, sizeof what, "%s backward", shape);
    check_f32(what, fdi, di, 2 * NF);
    free(s.inp), free(s.w), free(s.out), free(di), free(fx), free(fd), free(fo), free(fdi);
}

/* Ring attention's decomposition (cp.c) from the chunk kernels alone: a
 * sequence of 2P chunks of c rows, "rank" r holding chunks r and 2P-1-r;
 * each of its query chunks against every rank's packed key/value chunks
 * (lower index whole, its own causally, higher none) in ring order, the
 * first pair starting the softmax and the rest merged into it; the
 * gradients added up (dk, dv into each block, summed at their owner).  The
 * rows must equal the whole sequence's attention and its gradients. */
static void test_ring_decomposition(int B, int P, int c, int NH, int NKV, int HS)
{
    int T = 2 * P * c, Tl = 2 * c, C = NH * HS, W = (NH + 2 * NKV) * HS, KW = 2 * NKV * HS;
    size_t BT = (size_t)B * T, BTl = (size_t)B * Tl;
    double *qkv = drand_new(BT * W, 1.5, 0), *dout = drand_new(BT * C, 1, 0);
    double *ro = dnew(BT * C), *rl = dnew((size_t)B * NH * T), *rd = dnew(BT * W);
    att_fwd64(ro, rl, qkv, B, T, NH, NKV, HS);
    att_bwd64(rd, dout, ro, qkv, rl, B, T, NH, NKV, HS);
    /* the ranks' rows: local row l of rank r is position pos(r, l) */
    double *lq = dnew((size_t)P * BTl * W), *lkv = dnew((size_t)P * BTl * KW), *ldo = dnew((size_t)P * BTl * C);
    double *lo = dnew((size_t)P * BTl * C), *ll = dnew((size_t)P * B * NH * Tl);
    double *ldq = dnew((size_t)P * BTl * W), *ldkv = dnew((size_t)P * BTl * KW);
#define POS(r, l) ((l) < c ? (r) * c + (l) : (2 * P - 1 - (r)) * c + (l) - c)
#define CHUNK(r, h) ((h) == 0 ? (r) : 2 * P - 1 - (r))
    for (int r = 0; r < P; r++)
        for (int b = 0; b < B; b++)
            for (int l = 0; l < Tl; l++) {
                size_t src = (size_t)b * T + POS(r, l), dst = (size_t)r * BTl + (size_t)b * Tl + l;
                memcpy(lq + dst * W, qkv + src * W, W * sizeof(double));
                memcpy(lkv + dst * KW, qkv + src * W + NH * HS, KW * sizeof(double));
                memcpy(ldo + dst * C, dout + src * C, C * sizeof(double));
            }
    memset(ldq, 0, (size_t)P * BTl * W * sizeof(double));
    memset(ldkv, 0, (size_t)P * BTl * KW * sizeof(double));
    for (int pass = 0; pass < 2; pass++) /* the forward of every rank, then the backward */
        for (int r = 0; r < P; r++)
            for (int hq = 0; hq < 2; hq++) {
                int started = 0;
                for (int s = 0; s < P; s++) {
                    int src = (r - s + P) % P;
                    for (int hk = 0; hk < 2; hk++) {
                        int gq = CHUNK(r, hq), gk = CHUNK(src, hk);
                        if (gk > gq) continue;
                        int flags = gk == gq ? ATT_CAUSAL : 0;
                        double *q = lq + (size_t)r * BTl * W, *kv = lkv + (size_t)src * BTl * KW;
                        if (pass == 0)
                            attention_forward_f64(lo + (size_t)r * BTl * C, ll + (size_t)r * B * NH * Tl, q, kv, KW, B,
                                                  Tl, hq * c, hk * c, c, NH, NKV, HS, flags | (started ? ATT_MERGE : 0));
                        else
                            attention_backward_f64(ldq + (size_t)r * BTl * W, ldkv + (size_t)src * BTl * KW,
                                                   ldo + (size_t)r * BTl * C, lo + (size_t)r * BTl * C, q, kv, KW,
                                                   ll + (size_t)r * B * NH * Tl, B, Tl, hq * c, hk * c, c, NH, NKV,
                                                   HS, flags | ATT_ACCUM);
                        started = 1;
                    }
                }
            }
    double eo = 0, el = 0, ed = 0, scale_o = maxabs(ro, BT * C), scale_d = maxabs(rd, BT * W);
    for (int r = 0; r < P; r++)
        for (int b = 0; b < B; b++)
            for (int l = 0; l < Tl; l++) {
                size_t g = (size_t)b * T + POS(r, l), x = (size_t)r * BTl + (size_t)b * Tl + l;
                for (int i = 0; i < C; i++) eo = fmax(eo, fabs(lo[x * C + i] - ro[g * C + i]) / scale_o);
                for (int h = 0; h < NH; h++)
                    el = fmax(el, fabs(ll[((size_t)r * B + b) * NH * Tl + (size_t)h * Tl + l] -
                                       rl[((size_t)b * NH + h) * T + POS(r, l)]));
                for (int i = 0; i < NH * HS; i++) ed = fmax(ed, fabs(ldq[x * W + i] - rd[g * W + i]) / scale_d);
                for (int i = 0; i < KW; i++) ed = fmax(ed, fabs(ldkv[x * KW + i] - rd[g * W + NH * HS + i]) / scale_d);
            }
#undef POS
#undef CHUNK
    tap_ok(eo <= EXACT_TOL && el <= EXACT_TOL && ed <= EXACT_TOL,
           "ring attention over %d ranks (B=%d, chunks of %d, NH=%d NKV=%d): chunk pairs = whole sequence (out %.1e, "
           "lse %.1e, dqkv %.1e)", P, B, c, NH, NKV, eo, el, ed);
    free(qkv), free(dout), free(ro), free(rl), free(rd), free(lq), free(lkv), free(ldo), free(lo), free(ll);
    free(ldq), free(ldkv);
}

/* ------------------------------------------------------ bf16 attention */

static double bf16d(double x) { return f32_from_bf16(bf16_from_f32((float)x)); }

/* A bf16 run's attention written out longhand (backend_ops.h): the forward
 * takes the keys in blocks of 64 (kernels_cpu.c's ATT_BLK) against the
 * running row maximum m, and multiplies the values by exp(s - m) rounded
 * to bf16, while its sum keeps them unrounded; the backward multiplies by
 * p = exp(s - lse) and dS = p (dout.v - D) scale, each rounded to bf16. */
static void attention_bf16_ref(double *out, double *lse, double *dqkv, const float *qkv, const float *dout,
                               const float *fout, const float *flse, int B, int T, int NH, int NKV, int HS)
{
    int W = (NH + 2 * NKV) * HS, C = NH * HS, G = NH / NKV;
    double sc = 1.0 / sqrt(HS);
    memset(dqkv, 0, (size_t)B * T * W * sizeof *dqkv);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const float *q = qkv + (size_t)b * T * W + h * HS, *k = qkv + (size_t)b * T * W + (NH + h / G) * HS;
            const float *v = k + NKV * HS;
            double *dq = dqkv + (size_t)b * T * W + h * HS, *dk = dqkv + (size_t)b * T * W + (NH + h / G) * HS;
            double *dv = dk + NKV * HS;
            for (int i = 0; i < T; i++) {
                double s[T], o[HS], m = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    s[j] = 0;
                    for (int d = 0; d < HS; d++) s[j] += (double)q[(size_t)i * W + d] * k[(size_t)j * W + d];
                    s[j] *= sc;
                }
                for (int d = 0; d < HS; d++) o[d] = 0;
                for (int j0 = 0; j0 <= i; j0 += 64) {
                    int j1 = j0 + 64 < i + 1 ? j0 + 64 : i + 1;
                    double mt = m;
                    for (int j = j0; j < j1; j++) mt = s[j] > mt ? s[j] : mt;
                    double corr = m == -INFINITY ? 0 : exp(m - mt);
                    sum *= corr;
                    for (int d = 0; d < HS; d++) o[d] *= corr;
                    for (int j = j0; j < j1; j++) {
                        double p = exp(s[j] - mt), pr = bf16d(p);
                        sum += p;
                        for (int d = 0; d < HS; d++) o[d] += pr * v[(size_t)j * W + d];
                    }
                    m = mt;
                }
                for (int d = 0; d < HS; d++) out[((size_t)b * T + i) * C + h * HS + d] = o[d] / sum;
                lse[((size_t)b * NH + h) * T + i] = m + log(sum);
                /* the backward, from the kernel's own out and lse (as the model passes them) */
                size_t row = ((size_t)b * T + i) * C + (size_t)h * HS;
                const float *dy = dout + row, *oy = fout + row;
                double D = 0, li = flse[((size_t)b * NH + h) * T + i];
                for (int d = 0; d < HS; d++) D += (double)dy[d] * oy[d];
                for (int j = 0; j <= i; j++) {
                    double p = exp(s[j] - li), dp = 0;
                    for (int d = 0; d < HS; d++) dp += (double)dy[d] * v[(size_t)j * W + d];
                    double ds = bf16d(p * (dp - D) * sc), pr = bf16d(p);
                    for (int d = 0; d < HS; d++) {
                        dv[(size_t)j * W + d] += pr * dy[d];
                        dq[(size_t)i * W + d] += ds * k[(size_t)j * W + d];
                        dk[(size_t)j * W + d] += ds * q[(size_t)i * W + d];
                    }
                }
            }
        }
}

/* The share of got's n values within tight of ref (relative, floor 1 % of
 * ref's largest), and the largest such error in *worst. */
static double share_close(const float *got, const double *ref, size_t n, double tight, double *worst)
{
    double big = maxabs(ref, n), w = 0;
    size_t near = 0;
    for (size_t i = 0; i < n; i++) {
        double sc = fabs(ref[i]) > 1e-2 * big ? fabs(ref[i]) : 1e-2 * big;
        double e = isnan(got[i]) ? INFINITY : fabs(got[i] - ref[i]) / (sc > 0 ? sc : 1);
        near += e <= tight;
        w = e > w ? e : w;
    }
    *worst = w;
    return (double)near / (double)n;
}

/* Where the kernel's fp32 probabilities and the longhand's double ones fall
 * on either side of a bf16 rounding boundary (about 1 in 10^4) the two
 * round a step apart; every other value agrees as fp32 sums do.  fp32's
 * attention on the same inputs must not. */
static void test_attention_bf16(int B, int T, int NH, int NKV, int HS)
{
    int W = (NH + 2 * NKV) * HS, C = NH * HS;
    size_t n3 = (size_t)B * T * W, nc = (size_t)B * T * C, nl = (size_t)B * NH * T;
    double *dq = drand_new(n3, 2, 0), *dd = drand_new(nc, 1, 0);
    float *qkv = tof(dq, n3), *dout = tof(dd, nc);
    free(dq), free(dd);
    lp_round(PREC_BF16, qkv, n3), lp_round(PREC_BF16, dout, nc);
    float *out = fnew(nc), *lse = fnew(nl), *dqkv = fnew(n3), *o32 = fnew(nc), *l32 = fnew(nl), *d32 = fnew(n3);
    double *ro = dnew(nc), *rl = dnew(nl), *rd = dnew(n3), wo, wd, w32o, w32d;
    fnan(out, nc), fnan(dqkv, n3);
    cpu_device.attention_forward(PREC_BF16, out, lse, qkv, qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    cpu_device.attention_backward(PREC_BF16, dqkv, dqkv + NH * HS, dout, out, qkv, qkv + NH * HS, W, lse, B, T, 0,
                                  0, T, NH, NKV, HS, ATT_CAUSAL);
    cpu_device.attention_forward(PREC_FP32, o32, l32, qkv, qkv + NH * HS, W, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
    cpu_device.attention_backward(PREC_FP32, d32, d32 + NH * HS, dout, out, qkv, qkv + NH * HS, W, lse, B, T, 0, 0,
                                  T, NH, NKV, HS, ATT_CAUSAL);
    attention_bf16_ref(ro, rl, rd, qkv, dout, out, lse, B, T, NH, NKV, HS);
    double so = share_close(out, ro, nc, 1e-5, &wo), sd = share_close(dqkv, rd, n3, 1e-5, &wd);
    double s32o = share_close(o32, ro, nc, 1e-5, &w32o), s32d = share_close(d32, rd, n3, 1e-5, &w32d);
    double el = 0;
    for (size_t i = 0; i < nl; i++) el = fabs(lse[i] - rl[i]) > el ? fabs(lse[i] - rl[i]) : el;
    tap_ok(so >= 0.99 && sd >= 0.99 && wo <= 1e-2 && wd <= 1e-2 && el <= 1e-5 && s32o < 0.5 && s32d < 0.5,
           "bf16 attention B=%d T=%d NH=%d NKV=%d HS=%d: = the longhand with bf16 probabilities and dS (out %.4f, "
           "dqkv %.4f within 1e-5; worst %.1e, %.1e; lse %.1e); fp32's attention is not (%.4f, %.4f)", B, T, NH, NKV,
           HS, so, sd, wo, wd, el, s32o, s32d);
    free(qkv), free(dout), free(out), free(lse), free(dqkv), free(o32), free(l32), free(d32);
    free(ro), free(rl), free(rd);
}

int main(void)
{
    test_attention(2, 5, 2, 2, 4, 1);
    test_attention(1, 67, 3, 3, 2, 1);   /* two row blocks of the causal gemm */
    test_attention(2, 130, 3, 3, 16, 0); /* three blocks, HS = 16 (no FD: too slow) */
    test_attention(2, 7, 4, 2, 4, 1);    /* grouped-query: 2 query heads per kv head */
    test_attention(1, 67, 6, 1, 2, 1);   /* multi-query: one kv head */
    test_gqa_is_mha_with_copies(2, 9, 6, 2, 4);
    test_attention_bf16(2, 150, 4, 2, 16); /* three blocks of keys; grouped-query */
    test_attention_bf16(1, 40, 2, 2, 64);
    test_attention_cached(3, 9, 2, 2, 4);
    test_attention_cached(2, 150, 4, 2, 16); /* three blocks of keys; grouped-query */
    test_ring_decomposition(2, 2, 5, 2, 2, 4);
    test_ring_decomposition(1, 3, 70, 2, 1, 4); /* chunks of two row blocks; multi-query */
    test_ring_decomposition(2, 4, 3, 4, 2, 8);  /* grouped-query */
    test_rope(2, 5, 2, 1, 4);
    test_rope(1, 9, 4, 2, 6);
    test_rmsnorm(5, 16, 1e-5);
    test_rmsnorm(3, 37, 1e-6);
    test_swiglu(4, 8);
    test_swiglu(3, 33);
    return tap_done();
}
