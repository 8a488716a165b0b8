/* test_kernels.c -- the kernels of backend.h (attention and the llama
 * family's: test_block_kernels.c), against calculus and against references
 * written out longhand.
 *
 *  (a) each double backward (_f64) against central finite differences of the
 *      double forward, L = sum(out * w) with random w; step 1e-5, tolerance
 *      FD_TOL relative (errors divided by max(|ref|, 1e-2 max|ref|));
 *  (b) each float kernel against the double one on the same (float-rounded)
 *      inputs, tolerance F32_TOL relative in the same sense;
 *  (c) exact references: layernorm moments, log(V) for zero logits, sharded
 *      cross-entropy, AdamW by hand;
 *  (d) "+=" outputs accumulate (a second call doubles them) and overwritten
 *      outputs ignore their old contents (pre-filled with NaN);
 *  (e) parallel results are bitwise independent of the thread count;
 *  (f) the CPU table's matmuls per precision: a bf16 run's in gemm_bf16's
 *      arithmetic, fp32's and fp16's in gemm_f32's.
 */
#include "backend.h"
#include "cpu.h"
#include "device.h"
#include "gemm.h"
#include "kernel_check.h"
#include "precision.h"
#include "rng.h"
#include "slow_thread.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ encoder */

struct enc {
    double *out, *wte, *wpe, *w;
    int32_t *inp;
    int B, T, C, v0, Vs;
};
static double enc_loss(void *p)
{
    struct enc *e = p;
    encoder_forward_f64(e->out, e->inp, e->wte, e->wpe, e->B, e->T, e->C, e->v0, e->Vs);
    return dot(e->out, e->w, (size_t)e->B * e->T * e->C);
}

static void test_encoder(void)
{
    int B = 2, T = 5, C = 13, v0 = 3, Vs = 7, N = B * T; /* shard holds tokens 3..9 */
    struct enc e = {.B = B, .T = T, .C = C, .v0 = v0, .Vs = Vs};
    e.inp = xalloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) e.inp[n] = irand(12);
    e.inp[0] = 1; e.inp[1] = 11; e.inp[2] = 5; e.inp[3] = 5; e.inp[7] = 5; /* outside; repeats */
    e.out = dnew((size_t)N * C);
    e.wte = drand_new((size_t)Vs * C, 1, 0);
    e.wpe = drand_new((size_t)T * C, 1, 0);
    e.w = drand_new((size_t)N * C, 1, 0);
    double *dwte0 = drand_new((size_t)Vs * C, 1, 0), *dwpe0 = drand_new((size_t)T * C, 1, 0);
    double *dwte = dcopy(dwte0, (size_t)Vs * C), *dwpe = dcopy(dwpe0, (size_t)T * C);
    encoder_backward_f64(dwte, dwpe, e.w, e.inp, B, T, C, v0, Vs);
    double *gte = ddiff(dwte, dwte0, (size_t)Vs * C), *gpe = ddiff(dwpe, dwpe0, (size_t)T * C);
    check_fd("encoder dwte (+=)", gte, e.wte, (size_t)Vs * C, enc_loss, &e);
    check_fd("encoder dwpe (+=)", gpe, e.wpe, (size_t)T * C, enc_loss, &e);

    /* (c) tokens outside the shard contribute nothing; wpe may be NULL. */
    enc_loss(&e);
    int ok = 1;
    for (int n = 0; n < N; n++) {
        int tok = e.inp[n] - v0, in = tok >= 0 && tok < Vs;
        for (int c = 0; c < C; c++) {
            double want = (in ? e.wte[tok * C + c] : 0.0) + e.wpe[(n % T) * C + c];
            ok &= e.out[n * C + c] == want;
        }
    }
    tap_ok(ok, "encoder_forward: out = wte[tok-v0] + wpe[t]; tokens outside [v0,v0+Vs) give wpe only");
    encoder_forward_f64(e.out, e.inp, e.wte, NULL, B, T, C, v0, Vs);
    ok = 1;
    for (int n = 0; n < N; n++) {
        int tok = e.inp[n] - v0, in = tok >= 0 && tok < Vs;
        for (int c = 0; c < C; c++) ok &= e.out[n * C + c] == (in ? e.wte[tok * C + c] : 0.0);
    }
    tap_ok(ok, "encoder_forward: wpe NULL adds no position embedding");
    double *dwte2 = dcopy(dwte0, (size_t)Vs * C);
    encoder_backward_f64(dwte2, NULL, e.w, e.inp, B, T, C, v0, Vs);
    tap_ok(memcmp(dwte2, dwte, (size_t)Vs * C * sizeof(double)) == 0,
           "encoder_backward: dwpe NULL skipped, dwte unchanged");

    /* (b) float */
    float *fout = fnew((size_t)N * C), *fwte = tof(e.wte, (size_t)Vs * C),
          *fwpe = tof(e.wpe, (size_t)T * C), *fw = tof(e.w, (size_t)N * C);
    float *fdwte = tof(dwte0, (size_t)Vs * C), *fdwpe = tof(dwpe0, (size_t)T * C);
    enc_loss(&e);
    encoder_forward(fout, e.inp, fwte, fwpe, B, T, C, v0, Vs);
    encoder_backward(fdwte, fdwpe, fw, e.inp, B, T, C, v0, Vs);
    check_f32("encoder_forward", fout, e.out, (size_t)N * C);
    check_f32("encoder_backward dwte", fdwte, dwte, (size_t)Vs * C);
    check_f32("encoder_backward dwpe", fdwpe, dwpe, (size_t)T * C);

    free(e.inp); free(e.out); free(e.wte); free(e.wpe); free(e.w);
    free(dwte0); free(dwpe0); free(dwte); free(dwpe); free(gte); free(gpe); free(dwte2);
    free(fout); free(fwte); free(fwpe); free(fw); free(fdwte); free(fdwpe);
}

/* ------------------------------------------------------------ layernorm */

struct ln {
    double *out, *mean, *rstd, *inp, *weight, *bias, *w;
    int N, C;
};
static double ln_loss(void *p)
{
    struct ln *l = p;
    layernorm_forward_f64(l->out, l->mean, l->rstd, l->inp, l->weight, l->bias, l->N, l->C);
    return dot(l->out, l->w, (size_t)l->N * l->C);
}

static void test_layernorm(int N, int C, int do_fd)
{
    size_t NC = (size_t)N * C;
    struct ln l = {.N = N, .C = C};
    l.out = dnew(NC); l.mean = dnew(N); l.rstd = dnew(N);
    l.inp = drand_new(NC, 1.5, 0.3);
    l.weight = drand_new(C, 0.5, 1.0);
    l.bias = drand_new(C, 0.5, 0);
    l.w = drand_new(NC, 1, 0);
    double *di0 = drand_new(NC, 1, 0), *dw0 = drand_new(C, 1, 0), *db0 = drand_new(C, 1, 0);
    double *di = dcopy(di0, NC), *dw = dcopy(dw0, C), *db = dcopy(db0, C);
    ln_loss(&l);
    layernorm_backward_f64(di, dw, db, l.w, l.inp, l.weight, l.mean, l.rstd, N, C);
    double *gi = ddiff(di, di0, NC), *gw = ddiff(dw, dw0, C), *gb = ddiff(db, db0, C);
    char what[96];
    if (do_fd) {
        snprintf(what, sizeof what, "layernorm N=%d C=%d dinp (+=)", N, C);
        check_fd(what, gi, l.inp, NC, ln_loss, &l);
        snprintf(what, sizeof what, "layernorm N=%d C=%d dweight (+=)", N, C);
        check_fd(what, gw, l.weight, C, ln_loss, &l);
        snprintf(what, sizeof what, "layernorm N=%d C=%d dbias (+=)", N, C);
        check_fd(what, gb, l.bias, C, ln_loss, &l);
    }

    /* (b) float */
    float *fo = fnew(NC), *fm = fnew(N), *fr = fnew(N), *fx = tof(l.inp, NC),
          *fwt = tof(l.weight, C), *fb = tof(l.bias, C), *fd = tof(l.w, NC);
    float *fdi = tof(di0, NC), *fdw = tof(dw0, C), *fdb = tof(db0, C);
    ln_loss(&l);
    layernorm_forward(fo, fm, fr, fx, fwt, fb, N, C);
    layernorm_backward(fdi, fdw, fdb, fd, fx, fwt, fm, fr, N, C);
    snprintf(what, sizeof what, "layernorm N=%d C=%d forward out", N, C);
    check_f32(what, fo, l.out, NC);
    snprintf(what, sizeof what, "layernorm N=%d C=%d forward mean, rstd", N, C);
    double e1 = relerr_f(fm, l.mean, N), e2 = relerr_f(fr, l.rstd, N);
    tap_ok(e1 <= F32_TOL && e2 <= F32_TOL, "%s (rel err %.1e, %.1e)", what, e1, e2);
    snprintf(what, sizeof what, "layernorm N=%d C=%d backward dinp", N, C);
    check_f32(what, fdi, di, NC);
    snprintf(what, sizeof what, "layernorm N=%d C=%d backward dweight, dbias", N, C);
    e1 = relerr_f(fdw, dw, C), e2 = relerr_f(fdb, db, C);
    tap_ok(e1 <= F32_TOL && e2 <= F32_TOL, "%s (rel err %.1e, %.1e)", what, e1, e2);

    /* (c) before the affine map every row has mean 0 and biased variance
     * var/(var+eps); mean and rstd are the row's own. */
    for (int c = 0; c < C; c++) l.weight[c] = 1, l.bias[c] = 0;
    ln_loss(&l);
    double worst = 0;
    for (int n = 0; n < N; n++) {
        const double *x = l.inp + (size_t)n * C, *o = l.out + (size_t)n * C;
        double m = 0, v = 0, om = 0, ov = 0;
        for (int c = 0; c < C; c++) m += x[c];
        m /= C;
        for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
        v /= C;
        for (int c = 0; c < C; c++) om += o[c], ov += o[c] * o[c];
        om /= C, ov /= C;
        double errs[4] = {fabs(om), fabs(ov / (v / (v + 1e-5)) - 1), fabs(l.mean[n] - m),
                          fabs(l.rstd[n] * sqrt(v + 1e-5) - 1)};
        for (int k = 0; k < 4; k++) worst = errs[k] > worst ? errs[k] : worst;
    }
    tap_ok(worst <= EXACT_TOL, "layernorm N=%d C=%d: mean 0, var v/(v+1e-5), saved mean/rstd (err %.1e)",
           N, C, worst);

    free(l.out); free(l.mean); free(l.rstd); free(l.inp); free(l.weight); free(l.bias); free(l.w);
    free(di0); free(dw0); free(db0); free(di); free(dw); free(db); free(gi); free(gw); free(gb);
    free(fo); free(fm); free(fr); free(fx); free(fwt); free(fb); free(fd);
    free(fdi); free(fdw); free(fdb);
}

/* ------------------------------------------------------------ matmul */

struct mm {
    double *out, *inp, *weight, *bias, *w;
    int N, C, OC;
};
static double mm_loss(void *p)
{
    struct mm *m = p;
    matmul_forward_f64(m->out, m->inp, m->weight, m->bias, m->N, m->C, m->OC);
    return dot(m->out, m->w, (size_t)m->N * m->OC);
}

static void test_matmul(void)
{
    int N = 7, C = 13, OC = 11;
    struct mm m = {.N = N, .C = C, .OC = OC};
    m.out = dnew((size_t)N * OC);
    m.inp = drand_new((size_t)N * C, 1, 0);
    m.weight = drand_new((size_t)OC * C, 1, 0);
    m.bias = drand_new(OC, 1, 0);
    m.w = drand_new((size_t)N * OC, 1, 0);

    /* (c) forward against the triple loop, with and without bias */
    double *ref = dnew((size_t)N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0;
            for (int c = 0; c < C; c++) s += m.inp[n * C + c] * m.weight[o * C + c];
            ref[n * OC + o] = s;
        }
    matmul_forward_f64(m.out, m.inp, m.weight, NULL, N, C, OC);
    double e1 = relerr(m.out, ref, (size_t)N * OC);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) ref[n * OC + o] += m.bias[o];
    mm_loss(&m);
    double e2 = relerr(m.out, ref, (size_t)N * OC);
    tap_ok(e1 <= EXACT_TOL && e2 <= EXACT_TOL,
           "matmul_forward = inp weight^T (+ bias) by loops (rel err %.1e, %.1e)", e1, e2);

    double *di = dnew((size_t)N * C), *dw0 = drand_new((size_t)OC * C, 1, 0),
           *db0 = drand_new(OC, 1, 0);
    double *dw = dcopy(dw0, (size_t)OC * C), *db = dcopy(db0, OC);
    dnan(di, (size_t)N * C); /* overwritten */
    matmul_backward_f64(di, dw, db, m.w, m.inp, m.weight, N, C, OC);
    double *gw = ddiff(dw, dw0, (size_t)OC * C), *gb = ddiff(db, db0, OC);
    check_fd("matmul dinp (overwritten)", di, m.inp, (size_t)N * C, mm_loss, &m);
    check_fd("matmul dweight (+=)", gw, m.weight, (size_t)OC * C, mm_loss, &m);
    check_fd("matmul dbias (+=)", gb, m.bias, OC, mm_loss, &m);

    double *dw2 = dcopy(dw0, (size_t)OC * C);
    matmul_backward_f64(NULL, dw2, NULL, m.w, m.inp, m.weight, N, C, OC);
    tap_ok(relerr(dw2, dw, (size_t)OC * C) <= EXACT_TOL,
           "matmul_backward: dinp and dbias NULL skipped, dweight unchanged");

    free(m.out); free(m.inp); free(m.weight); free(m.bias); free(m.w); free(ref);
    free(di); free(dw0); free(db0); free(dw); free(db); free(gw); free(gb); free(dw2);
}

/* (b) at a size that exercises the gemm's blocking and the tails. */
static void test_matmul_f32(int N, int C, int OC)
{
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    double *x = drand_new(NC, 1, 0), *wt = drand_new(OCC, 0.2, 0), *b = drand_new(OC, 1, 0),
           *d = drand_new(NO, 1, 0);
    double *out = dnew(NO), *di = dnew(NC), *dw = drand_new(OCC, 1, 0), *db = drand_new(OC, 1, 0);
    float *fx = tof(x, NC), *fwt = tof(wt, OCC), *fb = tof(b, OC), *fd = tof(d, NO);
    float *fout = fnew(NO), *fdi = fnew(NC), *fdw = tof(dw, OCC), *fdb = tof(db, OC);
    fnan(fdi, NC);
    matmul_forward_f64(out, x, wt, b, N, C, OC);
    matmul_backward_f64(di, dw, db, d, x, wt, N, C, OC);
    matmul_forward(fout, fx, fwt, fb, N, C, OC);
    matmul_backward(fdi, fdw, fdb, fd, fx, fwt, N, C, OC);
    char what[96];
    snprintf(what, sizeof what, "matmul N=%d C=%d OC=%d forward", N, C, OC);
    check_f32(what, fout, out, NO);
    snprintf(what, sizeof what, "matmul N=%d C=%d OC=%d dinp", N, C, OC);
    check_f32(what, fdi, di, NC);
    snprintf(what, sizeof what, "matmul N=%d C=%d OC=%d dweight", N, C, OC);
    check_f32(what, fdw, dw, OCC);
    snprintf(what, sizeof what, "matmul N=%d C=%d OC=%d dbias", N, C, OC);
    check_f32(what, fdb, db, OC);
    free(x); free(wt); free(b); free(d); free(out); free(di); free(dw); free(db);
    free(fx); free(fwt); free(fb); free(fd); free(fout); free(fdi); free(fdw); free(fdb);
}

/* The CPU table's matmul_forward / matmul_backward in each precision, on
 * operands holding bf16 values, bitwise against their definition: gemm_bf16
 * (bf16) or gemm_f32 (fp32, fp16) and the bias and its gradient in float as
 * the fp32 kernels add them; bf16's products differ from fp32's. */
static float *frand_new(size_t n, double scale)
{
    double *x = drand_new(n, scale, 0);
    float *f = tof(x, n);
    free(x);
    return f;
}

static void test_matmul_precision(int N, int C, int OC)
{
    size_t NC = (size_t)N * C, NO = (size_t)N * OC, OCC = (size_t)OC * C;
    float *x = frand_new(NC, 1), *w = frand_new(OCC, 0.2), *b = frand_new(OC, 1);
    float *d = frand_new(NO, 1), *dw0 = frand_new(OCC, 1), *db0 = frand_new(OC, 1);
    lp_round(PREC_BF16, x, NC), lp_round(PREC_BF16, w, OCC), lp_round(PREC_BF16, d, NO);
    float *out = fnew(NO), *di = fnew(NC), *dw = fnew(OCC), *db = fnew(OC);
    float *want = fnew(NO), *wdi = fnew(NC), *wdw = fnew(OCC), *wdb = fnew(OC);
    static const enum precision ps[] = {PREC_FP32, PREC_BF16, PREC_FP16};
    int same[3], differs = 0;
    for (int i = 0; i < 3; i++) {
        void (*gemm)(int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int) =
            ps[i] == PREC_BF16 ? gemm_bf16 : gemm_f32;
        gemm(0, 1, N, OC, C, 1.0f, x, C, w, C, 0.0f, want, OC);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < OC; j++) want[(size_t)n * OC + j] += b[j];
        gemm(0, 0, N, C, OC, 1.0f, d, OC, w, C, 0.0f, wdi, C);
        memcpy(wdw, dw0, OCC * sizeof(float));
        gemm(1, 0, OC, C, N, 1.0f, d, OC, x, C, 1.0f, wdw, C);
        memcpy(wdb, db0, OC * sizeof(float));
        for (int n = 0; n < N; n++)
            for (int j = 0; j < OC; j++) wdb[j] += d[(size_t)n * OC + j];
        fnan(out, NO), fnan(di, NC);
        memcpy(dw, dw0, OCC * sizeof(float)), memcpy(db, db0, OC * sizeof(float));
        cpu_device.matmul_forward(ps[i], out, x, w, b, N, C, OC);
        cpu_device.matmul_backward(ps[i], di, dw, db, d, x, w, N, C, OC);
        same[i] = !memcmp(out, want, NO * sizeof(float)) && !memcmp(di, wdi, NC * sizeof(float)) &&
                  !memcmp(dw, wdw, OCC * sizeof(float)) && !memcmp(db, wdb, OC * sizeof(float));
        if (ps[i] == PREC_BF16) { /* against fp32's products of the same operands */
            gemm_f32(0, 1, N, OC, C, 1.0f, x, C, w, C, 0.0f, want, OC);
            for (size_t e = 0; e < NO; e++) differs += want[e] + b[e % OC] != out[e];
        }
    }
    tap_ok(same[0] && same[1] && same[2] && differs > 0,
           "cpu_device matmuls N=%d C=%d OC=%d: bf16 bitwise gemm_bf16's (%d of %zu outputs differ from fp32's "
           "products), fp32 and fp16 bitwise gemm_f32's (forward, dinp, dweight +=, dbias +=)", N, C, OC, differs, NO);
    free(x); free(w); free(b); free(d); free(dw0); free(db0);
    free(out); free(di); free(dw); free(db); free(want); free(wdi); free(wdw); free(wdb);
}

/* The CPU table's operations that round their own outputs (device.h:
 * matmul_*_rounded, and the norms' forward, the residual sum, gelu, swiglu
 * and the cross-entropy's backward, rounded a block at a time): bitwise the
 * plain operation followed by lp_round, in every precision, across the
 * blocks' edges and threads. */
static int same_floats(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof(float)); }

static void test_rounded_ops(void)
{
    static const enum precision ps[] = {PREC_FP32, PREC_BF16, PREC_FP16};
    enum { N = 70001, R = 37, F = 3001, V = 5003, Vs = 5120 };
    float *x = frand_new((size_t)R * 2 * F > N ? (size_t)R * 2 * F : N, 3), *d = frand_new((size_t)R * Vs, 1);
    size_t most = (size_t)R * 2 * F > (size_t)R * Vs ? (size_t)R * 2 * F : (size_t)R * Vs;
    float *got = fnew(most), *want = fnew(most), *mx = fnew(R), *sums = fnew(2 * R);
    float *ex = fnew((size_t)R * Vs); /* the exponentials crossentropy_sumexp leaves */
    int32_t tg[R];
    int ok = cpu_device.acts_rounded;
    for (int r = 0; r < R; r++) tg[r] = (r * 131) % V;
    memcpy(ex, x, (size_t)R * Vs * sizeof(float));
    crossentropy_max(mx, ex, R, Vs, 0, V);
    crossentropy_sumexp(sums, sums + R, ex, mx, tg, R, Vs, 0, V);
    for (int i = 0; i < 3; i++) {
        enum precision p = ps[i];
        cpu_device.gelu_forward(p, got, x, N);
        gelu_forward(want, x, N), lp_round(p, want, N);
        ok &= same_floats(got, want, N);
        cpu_device.gelu_backward(p, got, x, d, N);
        gelu_backward(want, x, d, N), lp_round(p, want, N);
        ok &= same_floats(got, want, N);
        cpu_device.swiglu_forward(p, got, x, R, F);
        swiglu_forward(want, x, R, F), lp_round(p, want, (size_t)R * F);
        ok &= same_floats(got, want, (size_t)R * F);
        cpu_device.swiglu_backward(p, got, x, d, R, F);
        swiglu_backward(want, x, d, R, F), lp_round(p, want, (size_t)R * 2 * F);
        ok &= same_floats(got, want, (size_t)R * 2 * F);
        cpu_device.residual_forward(p, got, x, d, N);
        residual_forward(want, x, d, N), lp_round(p, want, N);
        ok &= same_floats(got, want, N);
        {
            enum { NR = 301, C = 233 }; /* rows of a norm across blocks (70 rows of 233 a block) */
            float st[4 * NR];
            cpu_device.layernorm_forward(p, got, st, st + NR, x, d, d + C, NR, C);
            layernorm_forward(want, st + 2 * NR, st + 3 * NR, x, d, d + C, NR, C), lp_round(p, want, (size_t)NR * C);
            ok &= same_floats(got, want, (size_t)NR * C) && same_floats(st, st + 2 * NR, 2 * NR);
            cpu_device.rmsnorm_forward(p, got, st, x, d, NR, C, 1e-5f);
            rmsnorm_forward(want, st + NR, x, d, NR, C, 1e-5f), lp_round(p, want, (size_t)NR * C);
            ok &= same_floats(got, want, (size_t)NR * C) && same_floats(st, st + NR, NR);
        }
        cpu_device.crossentropy_backward(p, got, ex, sums, tg, 0.25f, R, Vs, 0, V);
        crossentropy_backward(want, ex, sums, tg, 0.25f, R, Vs, 0, V), lp_round(p, want, (size_t)R * Vs);
        ok &= same_floats(got, want, (size_t)R * Vs);
        float *b = d + 7;
        cpu_device.matmul_forward_rounded(p, got, x, d, b, R, 101, 300);
        cpu_device.matmul_forward(p, want, x, d, b, R, 101, 300), lp_round(p, want, (size_t)R * 300);
        ok &= same_floats(got, want, (size_t)R * 300);
        cpu_device.matmul_backward_rounded(p, got, NULL, NULL, d, NULL, x, R, 101, 300);
        cpu_device.matmul_backward(p, want, NULL, NULL, d, NULL, x, R, 101, 300), lp_round(p, want, (size_t)R * 101);
        ok &= same_floats(got, want, (size_t)R * 101);
        /* AdamW with its working copy, 2 steps, clipped, the gradient
         * cleared: param, m, v, grad and the copy, N each */
        const size_t n = N;
        float *ga = frand_new(5 * n, 4), *wa = fnew(5 * n);
        for (size_t j = n; j < 3 * n; j++) ga[j] = fabsf(ga[j]) * 1e-2f; /* m, and v >= 0 */
        memcpy(wa, ga, 5 * n * sizeof(float));
        for (int s = 0; s < 2; s++) {
            memcpy(ga + 3 * n, d, n * sizeof(float)), memcpy(wa + 3 * n, d, n * sizeof(float));
            cpu_device.adamw_update_rounded(p, ga, ga + 4 * n, ga + 3 * n, 0.37f, ga + n, ga + 2 * n, n, 1e-3f, 0.9f,
                                            0.95f, 1e-8f, 0.1f, s + 1, 1);
            cpu_device.adamw_update(p, wa, wa + 3 * n, 0.37f, wa + n, wa + 2 * n, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f,
                                    s + 1, 1);
            lp_round_to(p, wa + 4 * n, wa, n);
            ok &= same_floats(ga, wa, 5 * n) && (p == PREC_FP32 || !same_floats(ga, ga + 4 * n, n));
        }
        free(ga), free(wa);
    }
    tap_ok(ok, "cpu_device's rounded operations (matmul forward and dinp, the norms' forward, the residual sum, "
           "gelu, swiglu, cross-entropy backward, AdamW with its working copy) are the plain ones then lp_round, "
           "bitwise, in fp32, bf16 and fp16");
    free(x), free(d), free(got), free(want), free(mx), free(sums), free(ex);
}

/* ------------------------------------------------------------ gelu */

struct ge {
    double *out, *inp, *w;
    size_t N;
};
static double ge_loss(void *p)
{
    struct ge *g = p;
    gelu_forward_f64(g->out, g->inp, g->N);
    return dot(g->out, g->w, g->N);
}
static double gelu_textbook(double x)
{
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static void test_gelu(void)
{
    size_t N = 37;
    struct ge g = {.N = N};
    g.out = dnew(N);
    g.inp = drand_new(N, 4, 0);
    g.w = drand_new(N, 1, 0);
    double *di = dnew(N), *ref = dnew(N);
    ge_loss(&g);
    for (size_t i = 0; i < N; i++) ref[i] = gelu_textbook(g.inp[i]);
    double e = relerr(g.out, ref, N);
    tap_ok(e <= EXACT_TOL, "gelu_forward_f64 = 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) (rel err %.1e)", e);
    dnan(di, N);
    gelu_backward_f64(di, g.inp, g.w, N);
    check_fd("gelu dinp (overwritten)", di, g.inp, N, ge_loss, &g);

    /* (b) over a wide range, tails included; float must stay finite. */
    size_t M = 10007;
    double *x = drand_new(M, 8, 0), *d = drand_new(M, 1, 0), *o = dnew(M), *dx = dnew(M);
    const double tails[] = {-1e4, -100, -30, -12, -9, 0, 9, 12, 30, 100, 1e4};
    for (size_t k = 0; k < sizeof tails / sizeof *tails; k++) x[k] = tails[k];
    float *fx = tof(x, M), *fd = tof(d, M), *fo = fnew(M), *fdx = fnew(M);
    fnan(fdx, M);
    gelu_forward_f64(o, x, M);
    gelu_backward_f64(dx, x, d, M);
    gelu_forward(fo, fx, M);
    gelu_backward(fdx, fx, fd, M);
    check_f32("gelu_forward on [-8,8] and tails to 1e4", fo, o, M);
    check_f32("gelu_backward on [-8,8] and tails to 1e4", fdx, dx, M);
    int finite = 1;
    for (size_t i = 0; i < M; i++) finite &= isfinite(fo[i]) && isfinite(fdx[i]);
    tap_ok(finite, "gelu float: finite everywhere, tails included");

    free(g.out); free(g.inp); free(g.w); free(di); free(ref);
    free(x); free(d); free(o); free(dx); free(fx); free(fd); free(fo); free(fdx);
}

/* ------------------------------------------------------------ exponentials */

/* The float exponential of the CPU kernels (kernels_cpu.c: Cephes expf,
 * each operation rounded on its own), one element at a time: the reference
 * that the kernels' exponential passes must equal bit for bit. */
static float ref_expf(float x)
{
    const float lo = -86.5f, hi = 88.7228f;
    float xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    float t = xc * 1.44269504088896341f + 12582912.0f;
    float n = t - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    uint32_t tb, sb;
    memcpy(&tb, &t, 4);
    sb = (tb - 0x4B400000u + 126u) << 23;
    float sc;
    memcpy(&sc, &sb, 4);
    y = y * sc * 2.0f;
    y = x < lo ? 0.0f : y;
    y = x > hi ? INFINITY : y;
    return y;
}

/* the same float, or both NaN */
static int same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

/* The kernels that take their exponentials a block of 256 at a time
 * (gelu, swiglu, the cross-entropy's), on every path this processor runs,
 * against the one-element formulas on ref_expf: lengths that end inside a
 * block, inputs over the whole range with the ends of the exponential's
 * (its clamps, infinities, NaN). */
static void test_exp_passes(void)
{
    const int F = 300, V = 601, R = 3;
    const size_t N = 2 * 256 + 77, NG = (size_t)R * 2 * F;
    const float ends[] = {-INFINITY, INFINITY, NAN, -86.5f, -86.49f, -86.51f, 88.7228f, 88.73f, -44.0f, 44.0f,
                          -80.0f, 80.0f, 0.0f, -0.0f, 1e-30f, -1e-30f, 3.4e38f, -3.4e38f, -9.0f, 9.0f};
    const int nends = (int)(sizeof ends / sizeof *ends);
    float *x = malloc(NG * sizeof *x), *d = malloc(NG * sizeof *d), *o = malloc(NG * sizeof *o),
          *o2 = malloc(NG * sizeof *o2), *lg = malloc((size_t)R * V * sizeof *lg), *l0 = malloc((size_t)R * V * sizeof *l0);
    float mx[3], sums[3], tl[3];
    int32_t tg[3] = {5, 300, 600};
    if (!x || !d || !o || !o2 || !lg || !l0) exit(1);
    for (size_t i = 0; i < NG; i++) {
        x[i] = (float)(rng_uniform(41, 0, i) * 60.0 - 30.0) * (i % 7 == 0 ? 4.0f : 1.0f);
        d[i] = (float)(rng_uniform(42, 0, i) * 2.0 - 1.0);
    }
    for (int k = 0; k < nends; k++) x[3 * k + 1] = ends[k], x[256 + 2 * k] = ends[k] / 2;
    for (size_t i = 0; i < (size_t)R * V; i++) l0[i] = (float)(rng_uniform(43, 0, i) * 40.0 - 20.0);
    l0[7] = -INFINITY, l0[V + 9] = -1e30f;
    const float S = (float)0.7978845608028654, A = (float)0.044715;
    const enum isa was = isa_active();
    for (int p = ISA_GENERIC; p < ISA_COUNT; p++) {
        if (!isa_supported((enum isa)p)) continue;
        isa_force((enum isa)p);
        int bad = 0;
        gelu_forward(o, x, N);
        for (size_t i = 0; i < N; i++)
            bad += !same_bits(o[i], x[i] / (1.0f + ref_expf(-2.0f * (S * (x[i] + A * x[i] * x[i] * x[i])))));
        tap_ok(!bad, "%s: gelu_forward on %zu floats = x / (1 + exp(-2u)) with the one-element exponential, "
               "bit for bit (%d differ)", isa_name((enum isa)p), N, bad);
        bad = 0;
        gelu_backward(o, x, d, N);
        for (size_t i = 0; i < N; i++) {
            float mu = -2.0f * (S * (x[i] + A * x[i] * x[i] * x[i]));
            float e = ref_expf(mu < 80.0f ? mu : 80.0f), du = S * (1.0f + 3.0f * A * x[i] * x[i]);
            float sig = 1.0f / (1.0f + e), g = sig + 2.0f * x[i] * sig * (e * sig) * du;
            bad += !same_bits(o[i], g * d[i]);
        }
        tap_ok(!bad, "%s: gelu_backward bit for bit with the one-element exponential (%d differ)",
               isa_name((enum isa)p), bad);
        bad = 0;
        swiglu_forward(o, x, (size_t)R, F);
        swiglu_backward(o2, x, d, (size_t)R, F);
        for (int r = 0; r < R; r++)
            for (int i = 0; i < F; i++) {
                const float *g = x + (size_t)r * 2 * F, *u = g + F, *dd = d + (size_t)r * F;
                float e = ref_expf(-g[i]), sg = 1.0f / (1.0f + e);
                bad += !same_bits(o[(size_t)r * F + i], g[i] / (1.0f + e) * u[i]);
                bad += !same_bits(o2[(size_t)r * 2 * F + i], dd[i] * u[i] * (sg * (1.0f + g[i] * (1.0f - sg))));
                bad += !same_bits(o2[(size_t)r * 2 * F + F + i], dd[i] * (g[i] * sg));
            }
        tap_ok(!bad, "%s: swiglu forward and backward (F = %d) bit for bit with the one-element exponential "
               "(%d differ)", isa_name((enum isa)p), F, bad);
        bad = 0;
        memcpy(lg, l0, (size_t)R * V * sizeof *lg);
        crossentropy_max(mx, lg, R, V, 0, V);
        crossentropy_sumexp(sums, tl, lg, mx, tg, R, V, 0, V);
        for (int r = 0; r < R; r++) {
            /* the sum as LANE_SUM makes it: lane j mod 16 adds term j in order, then the tree w = 8, 4, 2, 1 */
            float lane[16] = {0};
            for (int j = 0; j < V; j++) {
                float e = ref_expf(l0[(size_t)r * V + j] - mx[r]);
                bad += !same_bits(lg[(size_t)r * V + j], e);
                lane[j % 16] += e;
            }
            for (int wd = 8; wd > 0; wd /= 2)
                for (int q = 0; q < wd; q++) lane[q] += lane[q + wd];
            bad += !same_bits(sums[r], lane[0]) + !same_bits(tl[r], l0[(size_t)r * V + tg[r]]);
        }
        tap_ok(!bad, "%s: crossentropy_sumexp leaves exp(logit - max) over rows of %d and sums them in its 16 "
               "lanes, bit for bit with the one-element exponential (%d differ)", isa_name((enum isa)p), V, bad);
    }
    isa_force(was);
    free(x); free(d); free(o); free(o2); free(lg); free(l0);
}

/* ------------------------------------------------------------ residual */

static void test_residual(void)
{
    size_t N = 20011;
    double *a = drand_new(N, 1, 0), *b = drand_new(N, 1, 0), *o = dnew(N);
    float *fa = tof(a, N), *fb = tof(b, N), *fo = fnew(N);
    residual_forward_f64(o, a, b, N);
    residual_forward(fo, fa, fb, N);
    int ok = 1, fok = 1;
    for (size_t i = 0; i < N; i++) {
        ok &= o[i] == a[i] + b[i];
        fok &= fo[i] == fa[i] + fb[i];
    }
    tap_ok(ok && fok, "residual_forward: out = a + b exactly (float and double)");
    free(a); free(b); free(o); free(fa); free(fb); free(fo);
}

/* ------------------------------------------------------------ cross-entropy */

/* The three steps on one shard, as the model runs them without TP, on a
 * copy of the logits: exps (N,Vs) holds what crossentropy_sumexp leaves
 * (the exponentials of the real columns; the backward's input). */
static void ce_full_f64(double *losses, double *maxes, double *sums, double *tl, double *exps,
                        const double *logits, const int32_t *tg, int N, int Vs, int v0, int V)
{
    memcpy(exps, logits, (size_t)N * Vs * sizeof(double));
    crossentropy_max_f64(maxes, exps, N, Vs, v0, V);
    crossentropy_sumexp_f64(sums, tl, exps, maxes, tg, N, Vs, v0, V);
    crossentropy_loss_f64(losses, maxes, sums, tl, N);
}

struct ce {
    double *logits, *exps, *losses, *maxes, *sums, *tl, dloss;
    int32_t *tg;
    int N, Vs, V;
};
static double ce_lossfn(void *p)
{
    struct ce *c = p;
    ce_full_f64(c->losses, c->maxes, c->sums, c->tl, c->exps, c->logits, c->tg, c->N, c->Vs, 0, c->V);
    double s = 0;
    for (int n = 0; n < c->N; n++) s += c->losses[n];
    return c->dloss * s;
}

static void test_crossentropy_fd(void)
{
    int N = 7, V = 11, Vs = 13; /* two padding columns */
    struct ce c = {.N = N, .Vs = Vs, .V = V, .dloss = 0.37};
    c.logits = drand_new((size_t)N * Vs, 3, 0);
    c.exps = dnew((size_t)N * Vs);
    c.losses = dnew(N); c.maxes = dnew(N); c.sums = dnew(N); c.tl = dnew(N);
    c.tg = xalloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) c.tg[n] = irand(V);
    c.tg[0] = V - 1;
    double *dl = dnew((size_t)N * Vs);
    dnan(dl, (size_t)N * Vs);
    ce_lossfn(&c);
    crossentropy_backward_f64(dl, c.exps, c.sums, c.tg, c.dloss, N, Vs, 0, V);
    check_fd("crossentropy dlogits (padding included)", dl, c.logits, (size_t)N * Vs, ce_lossfn, &c);
    int pad0 = 1;
    for (int n = 0; n < N; n++)
        for (int j = V; j < Vs; j++) pad0 &= dl[n * Vs + j] == 0.0;
    tap_ok(pad0, "crossentropy_backward: padding columns (>= V) get exactly 0");

    /* loss by the definition: -log softmax(real columns)[target] */
    double worst = 0;
    ce_lossfn(&c);
    for (int n = 0; n < N; n++) {
        double s = 0;
        for (int j = 0; j < V; j++) s += exp(c.logits[n * Vs + j]);
        double want = -log(exp(c.logits[n * Vs + c.tg[n]]) / s);
        worst = fmax(worst, fabs(c.losses[n] - want) / want);
    }
    tap_ok(worst <= EXACT_TOL, "crossentropy loss = -log softmax[target] over real columns (rel err %.1e)",
           worst);

    /* the exponentials left over the real columns, the padding untouched */
    int kept = 1;
    for (int n = 0; n < N; n++)
        for (int j = 0; j < Vs; j++) {
            double x = c.logits[n * Vs + j], e = c.exps[n * Vs + j];
            kept &= j < V ? e == exp(x - c.maxes[n]) : e == x;
        }
    tap_ok(kept, "crossentropy_sumexp leaves exp(logit - max) over the real columns, the padding as it was");

    /* dlogits may alias exps */
    double *inplace = dcopy(c.exps, (size_t)N * Vs);
    crossentropy_backward_f64(inplace, inplace, c.sums, c.tg, c.dloss, N, Vs, 0, V);
    crossentropy_backward_f64(dl, c.exps, c.sums, c.tg, c.dloss, N, Vs, 0, V);
    float *fl = tof(c.logits, (size_t)N * Vs), *fdl = fnew((size_t)N * Vs), *fm = fnew(N), *fs = fnew(N),
          *ft = fnew(N);
    crossentropy_max(fm, fl, N, Vs, 0, V);
    crossentropy_sumexp(fs, ft, fl, fm, c.tg, N, Vs, 0, V);
    crossentropy_backward(fdl, fl, fs, c.tg, 0.37f, N, Vs, 0, V);
    crossentropy_backward(fl, fl, fs, c.tg, 0.37f, N, Vs, 0, V);
    tap_ok(memcmp(inplace, dl, (size_t)N * Vs * sizeof(double)) == 0 &&
               memcmp(fl, fdl, (size_t)N * Vs * sizeof(float)) == 0,
           "crossentropy_backward in place (dlogits == exps) = out of place, bitwise");

    free(c.logits); free(c.exps); free(c.losses); free(c.maxes); free(c.sums); free(c.tl); free(c.tg);
    free(dl); free(inplace); free(fl); free(fdl); free(fm); free(fs); free(ft);
}

/* Vocabulary split into S shards of Vs columns, reduced by hand (max of
 * maxes; sums and target logits added), against one shard of S*Vs. */
static void test_crossentropy_shards(int S, int Vs, int V)
{
    int N = 6, Vp = S * Vs;
    double *lg = drand_new((size_t)N * Vp, 4, 0), *lg_s = dnew((size_t)N * Vs);
    int32_t *tg = xalloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tg[n] = irand(V);
    tg[0] = 0, tg[1] = V - 1;
    double *m1 = dnew(N), *s1 = dnew(N), *t1 = dnew(N), *l1 = dnew(N), *d1 = dnew((size_t)N * Vp);
    double *e1s = dnew((size_t)N * Vp), *es = dnew((size_t)S * N * Vs); /* the exponentials: whole, per shard */
    ce_full_f64(l1, m1, s1, t1, e1s, lg, tg, N, Vp, 0, V);
    crossentropy_backward_f64(d1, e1s, s1, tg, 0.25, N, Vp, 0, V);

    double *ms = dnew((size_t)S * N), *ss = dnew((size_t)S * N), *ts = dnew((size_t)S * N);
    double *m = dnew(N), *s = dnew(N), *t = dnew(N), *l = dnew(N), *d = dnew((size_t)N * Vp);
    double *ds = dnew((size_t)N * Vs);
    int empty_ok = 1;
    for (int r = 0; r < S; r++) { /* each shard sees only its columns */
        for (int n = 0; n < N; n++)
            memcpy(lg_s + (size_t)n * Vs, lg + (size_t)n * Vp + (size_t)r * Vs, Vs * sizeof(double));
        crossentropy_max_f64(ms + (size_t)r * N, lg_s, N, Vs, r * Vs, V);
        if (r * Vs >= V)
            for (int n = 0; n < N; n++) empty_ok &= ms[(size_t)r * N + n] == -INFINITY;
    }
    for (int n = 0; n < N; n++) {
        m[n] = -INFINITY;
        for (int r = 0; r < S; r++) m[n] = fmax(m[n], ms[(size_t)r * N + n]);
    }
    for (int r = 0; r < S; r++) {
        double *e_r = es + (size_t)r * N * Vs;
        for (int n = 0; n < N; n++)
            memcpy(e_r + (size_t)n * Vs, lg + (size_t)n * Vp + (size_t)r * Vs, Vs * sizeof(double));
        crossentropy_sumexp_f64(ss + (size_t)r * N, ts + (size_t)r * N, e_r, m, tg, N, Vs, r * Vs, V);
    }
    for (int n = 0; n < N; n++) {
        s[n] = t[n] = 0;
        for (int r = 0; r < S; r++) s[n] += ss[(size_t)r * N + n], t[n] += ts[(size_t)r * N + n];
    }
    crossentropy_loss_f64(l, m, s, t, N);
    for (int r = 0; r < S; r++) {
        crossentropy_backward_f64(ds, es + (size_t)r * N * Vs, s, tg, 0.25, N, Vs, r * Vs, V);
        for (int n = 0; n < N; n++)
            memcpy(d + (size_t)n * Vp + (size_t)r * Vs, ds + (size_t)n * Vs, Vs * sizeof(double));
        if (r * Vs >= V)
            for (size_t i = 0; i < (size_t)N * Vs; i++) empty_ok &= ds[i] == 0.0;
    }
    double e1 = relerr(l, l1, N), e2 = relerr(d, d1, (size_t)N * Vp);
    int pad0 = 1;
    for (int n = 0; n < N; n++)
        for (int j = V; j < Vp; j++) pad0 &= d[(size_t)n * Vp + j] == 0.0;
    tap_ok(e1 <= EXACT_TOL && e2 <= EXACT_TOL && pad0 && empty_ok,
           "crossentropy over %d shards of %d (V=%d) = one shard (loss %.1e, dlogits %.1e), "
           "padding 0, empty shard max -inf / grad 0",
           S, Vs, V, e1, e2);

    free(lg); free(lg_s); free(tg); free(m1); free(s1); free(t1); free(l1); free(d1); free(e1s); free(es);
    free(ms); free(ss); free(ts); free(m); free(s); free(t); free(l); free(d); free(ds);
}

static void test_crossentropy_exact(void)
{
    /* zero logits: loss = log V, dlogits = (1/V - onehot) dloss */
    int N = 5, V = 1000, Vs = 1024;
    double *lg = dnew((size_t)N * Vs), *m = dnew(N), *s = dnew(N), *t = dnew(N), *l = dnew(N);
    double *ex = dnew((size_t)N * Vs);
    float *fl = fnew((size_t)N * Vs), *fm = fnew(N), *fs = fnew(N), *ft = fnew(N), *flo = fnew(N);
    int32_t tg[5] = {0, 1, 500, 998, 999};
    ce_full_f64(l, m, s, t, ex, lg, tg, N, Vs, 0, V);
    crossentropy_max(fm, fl, N, Vs, 0, V);
    crossentropy_sumexp(fs, ft, fl, fm, tg, N, Vs, 0, V);
    crossentropy_loss(flo, fm, fs, ft, N);
    double w = 0, fw = 0;
    for (int n = 0; n < N; n++) {
        w = fmax(w, fabs(l[n] / log(V) - 1));
        fw = fmax(fw, fabs(flo[n] / log(V) - 1));
    }
    tap_ok(w <= 1e-15 && fw <= 1e-6, "crossentropy of zero logits = log(V) (rel err %.1e; float %.1e)",
           w, fw);

    /* shift invariance / no overflow at large logits */
    double *lg2 = drand_new((size_t)N * Vs, 5, 0), *l2 = dnew(N);
    ce_full_f64(l, m, s, t, ex, lg2, tg, N, Vs, 0, V);
    for (size_t i = 0; i < (size_t)N * Vs; i++) lg2[i] += 1000;
    ce_full_f64(l2, m, s, t, ex, lg2, tg, N, Vs, 0, V);
    double e = relerr(l2, l, N);
    tap_ok(e <= 1e-9, "crossentropy: logits + 1000 give the same loss (rel err %.1e)", e);

    free(lg); free(ex); free(m); free(s); free(t); free(l); free(fl); free(fm); free(fs); free(ft); free(flo);
    free(lg2); free(l2);
}

/* (b) at a realistic width: float over two shards (the second with 24
 * padding columns), reduced by hand, against one double shard. */
static void test_crossentropy_f32(void)
{
    int N = 16, V = 1000, Vp = 1024, Vs = 512;
    size_t NV = (size_t)N * Vp;
    double *lg = drand_new(NV, 4, 0), *m = dnew(N), *s = dnew(N), *t = dnew(N), *l = dnew(N),
           *d = dnew(NV);
    int32_t *tg = xalloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tg[n] = irand(V);
    tg[0] = 3, tg[1] = 999;
    double *ex = dnew(NV);
    ce_full_f64(l, m, s, t, ex, lg, tg, N, Vp, 0, V);
    crossentropy_backward_f64(d, ex, s, tg, 1.0 / N, N, Vp, 0, V);

    float *fl[2], *fm[2], *fs[2], *ft[2], *fd = fnew(NV), *fds = fnew((size_t)N * Vs);
    float *m2 = fnew(N), *s2 = fnew(N), *t2 = fnew(N), *flo = fnew(N);
    for (int r = 0; r < 2; r++) {
        fl[r] = fnew((size_t)N * Vs), fm[r] = fnew(N), fs[r] = fnew(N), ft[r] = fnew(N);
        for (size_t i = 0; i < (size_t)N * Vs; i++)
            fl[r][i] = (float)lg[(i / Vs) * Vp + (size_t)r * Vs + i % Vs];
        crossentropy_max(fm[r], fl[r], N, Vs, r * Vs, V);
    }
    for (int n = 0; n < N; n++) m2[n] = fmaxf(fm[0][n], fm[1][n]);
    for (int r = 0; r < 2; r++) crossentropy_sumexp(fs[r], ft[r], fl[r], m2, tg, N, Vs, r * Vs, V);
    for (int n = 0; n < N; n++) s2[n] = fs[0][n] + fs[1][n], t2[n] = ft[0][n] + ft[1][n];
    crossentropy_loss(flo, m2, s2, t2, N);
    for (int r = 0; r < 2; r++) {
        crossentropy_backward(fds, fl[r], s2, tg, 1.0f / N, N, Vs, r * Vs, V);
        for (size_t i = 0; i < (size_t)N * Vs; i++) fd[(i / Vs) * Vp + (size_t)r * Vs + i % Vs] = fds[i];
    }
    check_f32("crossentropy losses (2 float shards, V=1000, Vp=1024)", flo, l, N);
    check_f32("crossentropy dlogits (2 float shards, V=1000, Vp=1024)", fd, d, NV);
    free(lg); free(ex); free(m); free(s); free(t); free(l); free(d); free(tg);
    for (int r = 0; r < 2; r++) free(fl[r]), free(fm[r]), free(fs[r]), free(ft[r]);
    free(fd); free(fds); free(m2); free(s2); free(t2); free(flo);
}

/* ------------------------------------------------------------ AdamW */

static void test_adamw(double wd)
{
    size_t n = 37;
    double lr = 0.05, b1 = 0.9, b2 = 0.95, eps = 1e-8;
    double *p0 = drand_new(n, 1, 0), *g1 = drand_new(n, 1, 0), *g2 = drand_new(n, 0.01, 0);
    double *rp = dcopy(p0, n), *rm = dnew(n), *rv = dnew(n);
    for (int t = 1; t <= 2; t++) { /* torch.optim.AdamW, written out */
        const double *g = t == 1 ? g1 : g2;
        for (size_t i = 0; i < n; i++) {
            rp[i] -= lr * wd * rp[i];
            rm[i] = b1 * rm[i] + (1 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
            double mhat = rm[i] / (1 - pow(b1, t)), vhat = rv[i] / (1 - pow(b2, t));
            rp[i] -= lr * mhat / (sqrt(vhat) + eps);
        }
    }
    double *p = dcopy(p0, n), *m = dnew(n), *v = dnew(n);
    float *fp = tof(p0, n), *fg1 = tof(g1, n), *fg2 = tof(g2, n), *fm = fnew(n), *fv = fnew(n);
    adamw_update_f64(p, g1, 1.0, m, v, n, lr, b1, b2, eps, wd, 1, 0);
    adamw_update_f64(p, g2, 1.0, m, v, n, lr, b1, b2, eps, wd, 2, 0);
    adamw_update(fp, fg1, 1.0f, fm, fv, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, 1, 0);
    adamw_update(fp, fg2, 1.0f, fm, fv, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, 2, 0);
    double e = fmax(relerr(p, rp, n), fmax(relerr(m, rm, n), relerr(v, rv, n)));
    double fe = fmax(relerr_f(fp, rp, n), fmax(relerr_f(fm, rm, n), relerr_f(fv, rv, n)));
    tap_ok(e <= EXACT_TOL, "adamw wd=%g: 2 steps = hand-computed PyTorch reference (rel err %.1e)", wd, e);
    tap_ok(fe <= 1e-5, "adamw wd=%g float: 2 steps = reference (rel err %.1e <= 1e-5)", wd, fe);
    /* the clipping coefficient applied in the update's own pass: bitwise
     * scale_inplace followed by the update, on every ISA path */
    float *ap = tof(p0, n), *am = fnew(n), *av = fnew(n), *bp = tof(p0, n), *bm = fnew(n), *bv = fnew(n);
    float *sg = tof(g1, n);
    for (int t = 1; t <= 2; t++) {
        adamw_update(ap, fg1, 0.37f, am, av, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t, 0);
        scale_inplace(sg, n, 0.37f);
        adamw_update(bp, sg, 1.0f, bm, bv, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t, 0);
        memcpy(sg, fg1, n * sizeof *sg);
    }
    tap_ok(!memcmp(ap, bp, n * sizeof *ap) && !memcmp(am, bm, n * sizeof *am) && !memcmp(av, bv, n * sizeof *av),
           "adamw wd=%g, gradient scale 0.37: bitwise scale_inplace, then the update (2 steps)", wd);
    /* clear: the same update, the gradient left +0 */
    float *cp = tof(p0, n), *cm = fnew(n), *cv = fnew(n), *cg = tof(g1, n);
    int zeros = 1;
    for (int t = 1; t <= 2; t++) {
        adamw_update(cp, cg, 0.37f, cm, cv, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t, 1);
        for (size_t i = 0; i < n; i++) zeros &= f32_bits(cg[i]) == 0;
        memcpy(cg, fg1, n * sizeof *cg);
    }
    tap_ok(zeros && !memcmp(ap, cp, n * sizeof *ap) && !memcmp(am, cm, n * sizeof *am) &&
               !memcmp(av, cv, n * sizeof *av),
           "adamw wd=%g, clear: bitwise the same update, every gradient left +0 (2 steps)", wd);
    free(cp); free(cm); free(cv); free(cg);
    free(ap); free(am); free(av); free(bp); free(bm); free(bv); free(sg);
    free(p0); free(g1); free(g2); free(rp); free(rm); free(rv); free(p); free(m); free(v);
    free(fp); free(fg1); free(fg2); free(fm); free(fv);
}

/* ------------------------------------------------------------ norms */

static void test_norms(void)
{
    size_t n = 1000003;
    double *x = drand_new(n, 1, 0);
    float *fx = tof(x, n);
    double ref = 0;
    for (size_t i = 0; i < n; i++) ref += x[i] * x[i];
    double s = sumsq_f64(x, n), fs = sumsq(fx, n);
    tap_ok(fabs(s / ref - 1) <= EXACT_TOL && fabs(fs / ref - 1) <= EXACT_TOL,
           "sumsq = sum x^2, float input accumulated in double (rel err %.1e, %.1e)",
           fabs(s / ref - 1), fabs(fs / ref - 1));
    tap_ok(sumsq(fx, 0) == 0 && sumsq(fx, 3) == (double)fx[0] * fx[0] + (double)fx[1] * fx[1] +
                                                      (double)fx[2] * fx[2],
           "sumsq of 0 and 3 elements");
    float *fy = tof(x, n);
    scale_inplace(fy, n, 0.37f);
    scale_inplace_f64(x, n, 0.37);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ok &= fy[i] == fx[i] * 0.37f && x[i] == (double)fx[i] * 0.37;
    tap_ok(ok, "scale_inplace: x *= s exactly (float and double)");
    free(x); free(fx); free(fy);
}

/* ------------------------------------------------------------ (d) accumulate */

/* Every "+=" output: a second identical call doubles it (from zero). */
static void test_accumulate(void)
{
    int B = 2, T = 5, C = 13, N = B * T, Vs = 9, OC = 11;
    double *d = drand_new((size_t)N * OC, 1, 0), *x = drand_new((size_t)N * C, 1, 0),
           *w = drand_new((size_t)OC * C, 1, 0), *g = drand_new((size_t)N * C, 1, 0);
    int32_t *tok = xalloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tok[n] = irand(Vs);
    double *mean = dnew(N), *rstd = dnew(N), *o = dnew((size_t)N * C);
    double *lw = drand_new(C, 0.5, 1), *lb = drand_new(C, 0.5, 0);
    layernorm_forward_f64(o, mean, rstd, x, lw, lb, N, C);

    struct { const char *name; size_t n; double *buf; } acc[7] = {
        {"encoder dwte", (size_t)Vs * C, NULL}, {"encoder dwpe", (size_t)T * C, NULL},
        {"layernorm dinp", (size_t)N * C, NULL}, {"layernorm dweight", C, NULL},
        {"layernorm dbias", C, NULL}, {"matmul dweight", (size_t)OC * C, NULL},
        {"matmul dbias", OC, NULL}};
    double *first[7];
    for (int k = 0; k < 7; k++) acc[k].buf = dnew(acc[k].n);
    for (int call = 0; call < 2; call++) {
        encoder_backward_f64(acc[0].buf, acc[1].buf, g, tok, B, T, C, 0, Vs);
        layernorm_backward_f64(acc[2].buf, acc[3].buf, acc[4].buf, g, x, lw, mean, rstd, N, C);
        matmul_backward_f64(NULL, acc[5].buf, acc[6].buf, d, x, w, N, C, OC);
        if (call == 0)
            for (int k = 0; k < 7; k++) first[k] = dcopy(acc[k].buf, acc[k].n);
    }
    for (int k = 0; k < 7; k++) {
        for (size_t i = 0; i < acc[k].n; i++) first[k][i] *= 2;
        double e = relerr(acc[k].buf, first[k], acc[k].n);
        tap_ok(e <= EXACT_TOL, "%s accumulates (+=): two calls give twice one (rel err %.1e)",
               acc[k].name, e);
        free(acc[k].buf); free(first[k]);
    }
    free(d); free(x); free(w); free(g); free(tok); free(mean); free(rstd); free(o); free(lw); free(lb);
}

/* ------------------------------------------------------------ (e) thread count */

static int same_f(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void test_threads(void)
{
    int B = 4, T = 96, C = 100, NH = 4, N = B * T, Vs = 50, V = 300;
    size_t NC = (size_t)N * C;
    double *src[6] = {drand_new(NC, 1, 0), drand_new(NC, 1, 0), drand_new(C, 0.5, 1),
                      drand_new(C, 0.5, 0), drand_new(3 * NC, 1, 0), drand_new((size_t)N * V, 3, 0)};
    float *x = tof(src[0], NC), *g = tof(src[1], NC), *lw = tof(src[2], C), *lb = tof(src[3], C),
          *qkv = tof(src[4], 3 * NC), *lg = tof(src[5], (size_t)N * V);
    for (int k = 0; k < 6; k++) free(src[k]);
    int32_t *tok = xalloc(N * sizeof(int32_t));
    for (int n = 0; n < N; n++) tok[n] = irand(V);
    const int nth[3] = {1, 3, 3}; /* the third run's thread 1 slow */
    enum { OPS = 17 };
    float *r[3][OPS];
    double ss[3];
    int maxthr = omp_get_max_threads(), took[OPS + 1] = {0}; /* the third run's blocks taken over, per operation */
    slow_wait_s = 0.002; /* (slow_thread.h: thread 1 waits before each unit of its own) */
#define TOOK(i) (took[i] += atomic_exchange(&slow_taken_over, 0))
    for (int k = 0; k < 3; k++) {
        omp_set_num_threads(nth[k]);
        team_hook = k == 2 ? slow_thread_1 : NULL;
        atomic_store(&slow_taken_over, 0);
        float **o = r[k];
        o[0] = fnew((size_t)Vs * C); o[1] = fnew((size_t)T * C);
        encoder_backward(o[0], o[1], g, tok, B, T, C, 0, Vs);
        o[2] = fnew(NC); o[3] = fnew(N); o[4] = fnew(N);
        layernorm_forward(o[2], o[3], o[4], x, lw, lb, N, C), TOOK(2);
        o[5] = fnew(NC + 2 * C); /* dinp, dweight, dbias */
        layernorm_backward(o[5], o[5] + NC, o[5] + NC + C, g, x, lw, o[3], o[4], N, C), TOOK(5);
        o[6] = fnew((size_t)B * NH * T + NC); /* lse, out */
        att_fwd(o[6] + (size_t)B * NH * T, o[6], qkv, B, T, NH, NH, C / NH), TOOK(6);
        o[7] = fnew(3 * NC);
        att_bwd(o[7], g, o[6] + (size_t)B * NH * T, qkv, o[6], B, T, NH, NH, C / NH), TOOK(7);
        o[8] = fnew((size_t)N * V + 3 * N); /* logits -> exps -> dlogits in place, maxes, sums, tlogit */
        float *mx = o[8] + (size_t)N * V, *sm = mx + N, *tl = sm + N;
        memcpy(o[8], lg, (size_t)N * V * sizeof(float));
        crossentropy_max(mx, o[8], N, V, 0, V), TOOK(8);
        crossentropy_sumexp(sm, tl, o[8], mx, tok, N, V, 0, V), TOOK(9);
        crossentropy_backward(o[8], o[8], sm, tok, 0.5f, N, V, 0, V), TOOK(10);
        ss[k] = sumsq(lg, (size_t)N * V), TOOK(OPS);
        o[9] = fnew(NC), o[10] = fnew(NC), o[11] = fnew(NC), o[12] = fnew(3 * NC), o[13] = fnew(NC * 3 / 2);
        gelu_forward(o[9], x, NC), TOOK(11);
        gelu_backward(o[10], x, g, NC), TOOK(12);
        residual_forward(o[11], x, g, NC), TOOK(13);
        memcpy(o[12], x, NC * sizeof(float)); /* param, m = 0, v = 0 */
        adamw_update(o[12], o[11], 0.5f, o[12] + NC, o[12] + 2 * NC, NC, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 0),
            TOOK(1);
        swiglu_forward(o[13], x, N / 2, C), TOOK(0);
        /* the CPU table's blocks (team_for): a bf16 activation rounded a
         * block at a time, AdamW with its working copy, a bf16 array */
        size_t NV = (size_t)N * V;
        o[14] = fnew(NV), o[15] = fnew(4 * NV), o[16] = fnew(NV);
        cpu_device.gelu_forward(PREC_BF16, o[14], lg, NV), TOOK(3);
        memcpy(o[15], lg, NV * sizeof(float)); /* param, m = 0, v = 0, the copy */
        cpu_device.adamw_update_rounded(PREC_BF16, o[15], o[15] + 3 * NV, o[14], 0.5f, o[15] + NV, o[15] + 2 * NV, NV,
                                        1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 0),
            TOOK(4);
        lp_round_to(PREC_BF16, o[16], lg, NV), TOOK(15);
    }
#undef TOOK
    team_hook = NULL;
    omp_set_num_threads(maxthr);
    size_t len[OPS] = {(size_t)Vs * C, (size_t)T * C, NC, N, N, NC + 2 * C,
                       (size_t)B * NH * T + NC, 3 * NC, (size_t)N * V + 3 * N, NC, NC, NC, 3 * NC, NC / 2,
                       (size_t)N * V, 4 * (size_t)N * V, (size_t)N * V};
    const char *name[OPS] = {"encoder_backward dwte", "encoder_backward dwpe", "layernorm_forward out",
                             "layernorm_forward mean", "layernorm_forward rstd", "layernorm_backward",
                             "attention_forward", "attention_backward", "crossentropy", "gelu_forward",
                             "gelu_backward", "residual_forward", "adamw_update", "swiglu_forward",
                             "cpu_device.gelu_forward bf16", "cpu_device.adamw_update_rounded bf16",
                             "lp_round_to bf16"};
    for (int k = 0; k < OPS; k++) {
        tap_ok(same_f(r[0][k], r[1][k], len[k]) && same_f(r[0][k], r[2][k], len[k]),
               "%s: bitwise equal on 1 and 3 threads, and on 3 whose thread 1 is slow", name[k]);
        free(r[0][k]); free(r[1][k]); free(r[2][k]);
    }
    /* shared by a team (team.h): the slow thread's blocks taken over */
    static const char *const teamed[OPS + 1] = {
        "swiglu_forward", "adamw_update", "layernorm_forward", "cpu_device.gelu_forward bf16",
        "cpu_device.adamw_update_rounded", "layernorm_backward", "attention_forward", "attention_backward",
        "crossentropy_max", "crossentropy_sumexp", "crossentropy_backward", "gelu_forward", "gelu_backward",
        "residual_forward", NULL, "lp_round_to bf16", NULL, "sumsq"};
    int all = 1;
    for (int i = 0; i <= OPS; i++) {
        if (!teamed[i]) continue;
        if (!took[i]) tap_diag("%s: no block of the slow thread taken over", teamed[i]);
        all &= took[i] > 0;
    }
    tap_ok(all, "attention, the norms, cross-entropy, gelu, swiglu, the residual sum, AdamW, sumsq, the CPU table's "
                "rounded blocks and bf16 arrays: "
                "blocks of the slow thread taken over by the others (attention forward %d, gelu forward %d)",
           took[6], took[11]);
    tap_ok(ss[0] == ss[1] && ss[0] == ss[2], "sumsq: bitwise equal on 1 and 3 threads");
    free(x); free(g); free(lw); free(lb); free(qkv); free(lg); free(tok);
}

/* The CPU table's zeroing (over the threads from 1 MiB): every byte, on 1
 * to 16 threads, at sizes that are no multiple of the threads' shares. */
static void test_zero(void)
{
    static const size_t sizes[] = {((size_t)1 << 20) + 4, ((size_t)1 << 20) + 68, ((size_t)3 << 20) + 4, 1000};
    int left = 0, was = omp_get_max_threads();
    for (int t = 1; t <= 16; t++)
        for (size_t q = 0; q < sizeof sizes / sizeof sizes[0]; q++) {
            unsigned char *p = malloc(sizes[q]);
            memset(p, 0xff, sizes[q]);
            omp_set_num_threads(t);
            cpu_device.zero(p, sizes[q]);
            for (size_t i = 0; i < sizes[q]; i++) left += p[i] != 0;
            free(p);
        }
    omp_set_num_threads(was);
    tap_ok(left == 0, "cpu_device.zero on 1..16 threads zeroes every byte (%d left)", left);
}

int main(void)
{
    test_encoder();
    test_layernorm(7, 13, 1);
    test_layernorm(3, 37, 1);
    test_layernorm(2, 100, 1);
    test_layernorm(64, 200, 0); /* float only: FD round-off grows with the loss */
    test_matmul();
    test_matmul_f32(33, 70, 45);
    test_matmul_f32(130, 257, 300);
    test_matmul_precision(37, 301, 70);
    test_gelu();
    test_exp_passes();
    test_rounded_ops();
    test_residual();
    test_crossentropy_fd();
    test_crossentropy_shards(2, 8, 11);
    test_crossentropy_shards(3, 8, 11); /* third shard all padding */
    test_crossentropy_exact();
    test_crossentropy_f32();
    test_adamw(0.1);
    test_adamw(0.0);
    test_norms();
    test_accumulate();
    test_threads();
    test_zero();
    return tap_done();
}
