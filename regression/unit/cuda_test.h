/* cuda_test.h -- what the CUDA unit programs share: the skip when there is
 * no GPU, seeded random inputs, device buffers, and comparisons of a
 * device result with a host reference. */
#ifndef TRIAD_CUDA_TEST_H
#define TRIAD_CUDA_TEST_H

#include "check.h"
#include "cuda_backend.h"
#include "tap.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* No GPU: the whole program is one TAP skip ("1..0 # SKIP ..."), exit 0.
 * Otherwise the backend is initialised on device 0. */
static inline void cuda_test_start(void)
{
    char why[256];
    if (cuda_device_count(why, sizeof why) == 0) {
        printf("1..0 # SKIP no CUDA device: %s\n", why);
        exit(0);
    }
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CUDA_CHECK(cudaSetDevice(0));
    tap_diag("device 0: %s, compute capability %d.%d", prop.name, prop.major, prop.minor);
    cuda_backend_init();
}

#define FLOATS(n) ((size_t)(n) * sizeof(float))

static uint64_t ct_rng = 0x2545F4914F6CDD1Dull;

static inline uint64_t ct_next(void) /* xorshift64* */
{
    ct_rng ^= ct_rng >> 12;
    ct_rng ^= ct_rng << 25;
    ct_rng ^= ct_rng >> 27;
    return ct_rng * 0x2545F4914F6CDD1Dull;
}
static inline double ct_urand(void) { return (double)(ct_next() >> 11) * 0x1.0p-52 - 1.0; } /* [-1,1) */
static inline int ct_irand(int n) { return (int)(ct_next() >> 33) % n; }

static inline void *ct_alloc(size_t bytes) { return tap_alloc(bytes); }

/* n floats uniform in [shift - scale, shift + scale). */
static inline float *ct_frand(size_t n, double scale, double shift)
{
    float *x = ct_alloc(FLOATS(n));
    for (size_t i = 0; i < n; i++) x[i] = (float)(shift + scale * ct_urand());
    return x;
}
static inline int32_t *ct_tokens(size_t n, int below)
{
    int32_t *t = ct_alloc(n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) t[i] = ct_irand(below);
    return t;
}

/* Device copies.  Every device buffer goes on one list, freed by ct_free_all. */
#define CT_MAX_BUFFERS 256
static void *ct_dev[CT_MAX_BUFFERS];
static int ct_ndev = 0;

static inline void *ct_dalloc(size_t bytes)
{
    void *d;
    if (ct_ndev == CT_MAX_BUFFERS) {
        fprintf(stderr, "cuda_test.h: more than %d device buffers\n", CT_MAX_BUFFERS);
        exit(2);
    }
    CUDA_CHECK(cudaMalloc(&d, bytes ? bytes : 1));
    return ct_dev[ct_ndev++] = d;
}
static inline void *ct_put(const void *h, size_t bytes)
{
    void *d = ct_dalloc(bytes);
    CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
/* Host h over the device array d. */
static inline void ct_copy_in(void *d, const void *h, size_t bytes)
{
    CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
}
/* n floats of NaN (all bits set): an overwritten output must not keep them. */
static inline float *ct_nan(size_t n)
{
    float *d = ct_dalloc(FLOATS(n));
    CUDA_CHECK(cudaMemset(d, 0xff, FLOATS(n)));
    return d;
}
/* A new host array with the device contents. */
static inline void *ct_get(const void *d, size_t bytes)
{
    void *h = ct_alloc(bytes);
    CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}
static inline void ct_free_all(void)
{
    while (ct_ndev > 0) CUDA_CHECK(cudaFree(ct_dev[--ct_ndev]));
}

/* Largest |a-b| / max(|b|, floor * max|b|): relative error with a floor at
 * a fraction of the array's scale, so that an element that cancels to ~0 is
 * judged on the scale of its neighbours (floor 1: every error relative to
 * the largest value).  NaN anywhere is infinite error. */
static inline double ct_relerr(const float *a, const float *b, size_t n, double floor_frac)
{
    double mx = 0, worst = 0;
    for (size_t i = 0; i < n; i++) mx = fabs(b[i]) > mx ? fabs(b[i]) : mx;
    double fl = mx * floor_frac > 1e-30 ? mx * floor_frac : 1e-30;
    for (size_t i = 0; i < n; i++) {
        double den = fabs(b[i]) > fl ? fabs(b[i]) : fl;
        double e = fabs((double)a[i] - b[i]) / den;
        if (isnan(e)) return INFINITY;
        if (e > worst) worst = e;
    }
    return worst;
}

/* Device array dev (n floats) against the host reference ref; ct_close
 * with the usual floor of 1%. */
static inline void ct_close_floor(const char *what, const float *dev, const float *ref, size_t n,
                                  double tol, double floor_frac)
{
    float *g = ct_get(dev, FLOATS(n));
    double e = ct_relerr(g, ref, n, floor_frac);
    tap_ok(e <= tol, "%s: GPU vs CPU rel err %.1e <= %.0e (floor %g of max)", what, e, tol, floor_frac);
    free(g);
}
static inline void ct_close(const char *what, const float *dev, const float *ref, size_t n, double tol)
{
    ct_close_floor(what, dev, ref, n, tol, 1e-2);
}

/* The same, equal value for value (no NaN expected). */
static inline void ct_equal(const char *what, const float *dev, const float *ref, size_t n)
{
    float *g = ct_get(dev, FLOATS(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !(g[i] == ref[i]);
    tap_ok(bad == 0, "%s: GPU equals CPU (%zu of %zu differ)", what, bad, n);
    free(g);
}

#endif
