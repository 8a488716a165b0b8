/* kernel_check.h -- what the kernel tests share (test_kernels.c,
 * test_block_kernels.c): random inputs rounded to float, NaN-filled outputs,
 * relative errors, and the two checks of every kernel: the double backward
 * against central finite differences of the double forward, and the float
 * kernel against the double one. */
#ifndef TRIAD_KERNEL_CHECK_H
#define TRIAD_KERNEL_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "tap.h"

#define FD_H 1e-5
#define FD_TOL 1e-6
#define F32_TOL 1e-4
#define EXACT_TOL 1e-12

/* ------------------------------------------------------------ helpers */

static uint64_t rng_s = 0x9E3779B97F4A7C15ull;

static inline double urand(void) /* uniform in [-1, 1) */
{
    rng_s ^= rng_s >> 12;
    rng_s ^= rng_s << 25;
    rng_s ^= rng_s >> 27;
    return (double)((rng_s * 0x2545F4914F6CDD1Dull) >> 11) * 0x1.0p-52 - 1.0;
}

static inline int irand(int n) { return (int)((urand() + 1.0) * 0.5 * n) % n; }

static inline void *xalloc(size_t n) { return tap_alloc(n); }
static inline double *dnew(size_t n) { return xalloc(n * sizeof(double)); }
static inline float *fnew(size_t n) { return xalloc(n * sizeof(float)); }

/* Random values already rounded to float, so float and double kernels see
 * identical inputs. */
static inline double *drand_new(size_t n, double scale, double shift)
{
    double *x = dnew(n);
    for (size_t i = 0; i < n; i++) x[i] = (double)(float)(shift + scale * urand());
    return x;
}
static inline float *tof(const double *x, size_t n)
{
    float *f = fnew(n);
    for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
    return f;
}
static inline double *dcopy(const double *x, size_t n)
{
    double *y = dnew(n);
    memcpy(y, x, n * sizeof(double));
    return y;
}
static inline void dnan(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}
static inline void fnan(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = NAN;
}
static inline double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}
static inline double maxabs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}
/* Relative error, each difference divided by max(|b_i|, 1e-2 max|b|). */
static inline double relerr(const double *a, const double *b, size_t n)
{
    double fl = 1e-2 * maxabs(b, n);
    return tap_max_relerr(a, b, n, fl > 1e-300 ? fl : 1e-300);
}
static inline double relerr_f(const float *a, const double *b, size_t n)
{
    double *ad = dnew(n);
    for (size_t i = 0; i < n; i++) ad[i] = a[i];
    double e = relerr(ad, b, n);
    free(ad);
    return e;
}
/* a - b, elementwise, into a new array (the increment of a "+=" output). */
static inline double *ddiff(const double *a, const double *b, size_t n)
{
    double *d = dnew(n);
    for (size_t i = 0; i < n; i++) d[i] = a[i] - b[i];
    return d;
}

/* ------------------------------------------------------------ (a) finite differences */

typedef double (*loss_fn)(void *ctx);

/* Compare an analytic gradient with central differences of f over x. */
static inline void check_fd(const char *what, const double *analytic, double *x, size_t n,
                     loss_fn f, void *ctx)
{
    double *num = dnew(n);
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_H;
        double lp = f(ctx);
        x[i] = x0 - FD_H;
        double lm = f(ctx);
        x[i] = x0;
        num[i] = (lp - lm) / (2 * FD_H);
    }
    double e = relerr(analytic, num, n);
    tap_ok(e <= FD_TOL, "%s: f64 backward vs finite differences (rel err %.1e <= %.0e)", what, e,
           FD_TOL);
    free(num);
}

static inline void check_f32(const char *what, const float *a, const double *b, size_t n)
{
    double e = relerr_f(a, b, n);
    tap_ok(e <= F32_TOL, "%s: float vs double (rel err %.1e <= %.0e)", what, e, F32_TOL);
}

/* ------------------------------------------------------------ attention */

/* Causal attention over whole sequences: one call of the kernels (backend_ops.h). */
static inline void att_fwd(float *out, float *lse, const float *qkv, int B, int T, int NH, int NKV, int HS)
{
    attention_forward(out, lse, qkv, qkv + (size_t)NH * HS, (NH + 2 * NKV) * HS, B, T, 0, 0, T, NH, NKV, HS,
                      ATT_CAUSAL);
}
static inline void att_bwd(float *dqkv, const float *dout, const float *out, const float *qkv, const float *lse,
                           int B, int T, int NH, int NKV, int HS)
{
    attention_backward(dqkv, dqkv + (size_t)NH * HS, dout, out, qkv, qkv + (size_t)NH * HS, (NH + 2 * NKV) * HS,
                       lse, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
}
static inline void att_fwd64(double *out, double *lse, const double *qkv, int B, int T, int NH, int NKV, int HS)
{
    attention_forward_f64(out, lse, qkv, qkv + (size_t)NH * HS, (NH + 2 * NKV) * HS, B, T, 0, 0, T, NH, NKV, HS,
                          ATT_CAUSAL);
}
static inline void att_bwd64(double *dqkv, const double *dout, const double *out, const double *qkv,
                             const double *lse, int B, int T, int NH, int NKV, int HS)
{
    attention_backward_f64(dqkv, dqkv + (size_t)NH * HS, dout, out, qkv, qkv + (size_t)NH * HS,
                           (NH + 2 * NKV) * HS, lse, B, T, 0, 0, T, NH, NKV, HS, ATT_CAUSAL);
}

#endif
