/* test_cuda_lowp.c -- the low-precision kernels of cuda_backend.h.
 *
 *  - rounding, packing and unpacking, bit for bit against the CPU's
 *    round-to-nearest-even conversions (src/base/precision.c, themselves checked
 *    pattern by pattern in test_precision): every one of the
 *    65536 bf16 and fp16 patterns, the midpoint between every pair of
 *    neighbouring finite values (a tie: it goes to the even pattern) and
 *    the floats just either side of it, the overflow edges (fp16 65504 /
 *    65520, bf16 FLT_MAX), and 2^20 random float bit patterns.  NaN must
 *    stay NaN (its payload is free);
 *  - count_nonfinite on planted NaN and infinities;
 *  - the bf16 / fp16 matmul against the fp32 CPU matmul of the same 16-bit
 *    values, within one unit in the last place of the format (the GPU
 *    rounds its fp32 sum once; a sum in another order can round the other
 *    way), floor 1% of the scale.
 * No GPU: "1..0 # SKIP no CUDA device: <reason>". */
#include "backend.h"
#include "cuda_test.h"
#include "precision.h"

#include <float.h>

#define HALVES(n) ((size_t)(n) * sizeof(uint16_t))

/* ------------------------------------------------------------ helpers */

struct format {
    const char *name;
    uint16_t (*to)(float);
    float (*from)(uint16_t);
    void (*round)(float *, size_t);
    void (*pack)(uint16_t *, const float *, size_t);
    void (*unpack)(float *, const uint16_t *, size_t);
};
static const struct format BF16 = {"bf16", bf16_from_f32, f32_from_bf16, cuda_round_bf16,
                                   cuda_pack_bf16, cuda_unpack_bf16};
static const struct format FP16 = {"fp16", fp16_from_f32, f32_from_fp16, cuda_round_fp16,
                                   cuda_pack_fp16, cuda_unpack_fp16};

/* The same float, or both NaN. */
static int same_value(float a, float b) { return f32_bits(a) == f32_bits(b) || (isnan(a) && isnan(b)); }

/* ------------------------------------------------------------ conversions */

/* Pack and round the n floats x on the GPU; both must match the reference. */
static void check_conversions(const struct format *f, const char *set, const float *x, size_t n)
{
    uint16_t *d_h = ct_dalloc(HALVES(n));
    float *d_x = ct_put(x, FLOATS(n));
    f->pack(d_h, d_x, n);
    f->round(d_x, n);
    uint16_t *h = ct_get(d_h, HALVES(n));
    float *r = ct_get(d_x, FLOATS(n));
    size_t bad_pack = 0, bad_round = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = f->to(x[i]);
        int pack_ok = h[i] == want || (isnan(f->from(want)) && isnan(f->from(h[i])));
        int round_ok = same_value(r[i], f->from(want));
        bad_pack += !pack_ok;
        bad_round += !round_ok;
        if ((!pack_ok || !round_ok) && first == n) first = i;
    }
    if (first < n)
        tap_diag("first mismatch: x = %a (0x%08x): packed 0x%04x, rounded %a, reference 0x%04x", x[first],
                 f32_bits(x[first]), h[first], r[first], f->to(x[first]));
    tap_ok(bad_pack == 0, "pack_%s, %s: bit-exact RNE (%zu of %zu differ)", f->name, set, bad_pack, n);
    tap_ok(bad_round == 0, "round_%s, %s: bit-exact RNE (%zu of %zu differ)", f->name, set, bad_round, n);
    free(h), free(r);
}

static void test_format(const struct format *f)
{
    size_t n = 65536;
    uint16_t *pat = ct_alloc(HALVES(n));
    float *val = ct_alloc(FLOATS(n));
    for (size_t i = 0; i < n; i++) {
        pat[i] = (uint16_t)i;
        val[i] = f->from(pat[i]);
    }
    /* unpack: every pattern to its exact float */
    float *d_val = ct_dalloc(FLOATS(n));
    f->unpack(d_val, ct_put(pat, HALVES(n)), n);
    float *got = ct_get(d_val, FLOATS(n));
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += !same_value(got[i], val[i]);
    tap_ok(bad == 0, "unpack_%s: all 65536 patterns exact (%zu differ)", f->name, bad);
    check_conversions(f, "all 65536 values (round trip)", val, n);

    /* ties between neighbours of the same sign, and the floats either side */
    float *ties = ct_alloc(FLOATS(3 * n));
    size_t nt = 0;
    for (uint32_t p = 0; p < n; p++) {
        if ((p & 0x7fff) == 0x7fff) continue;
        float lo = f->from((uint16_t)p), hi = f->from((uint16_t)(p + 1));
        if (!isfinite(lo) || !isfinite(hi)) continue;
        float mid = (float)(0.5 * ((double)lo + (double)hi)); /* exact in float */
        ties[nt++] = mid;
        ties[nt++] = nextafterf(mid, INFINITY);
        ties[nt++] = nextafterf(mid, -INFINITY);
    }
    check_conversions(f, "ties and their neighbours", ties, nt);

    const float edges[] = {
        65504.0f, 65519.0f, nextafterf(65520.0f, 0.0f), 65520.0f, 65536.0f, 1e5f, FLT_MAX, INFINITY,
        f32_of_bits(0x7f7f7fffu), f32_of_bits(0x7f7f8000u), f32_of_bits(0x7f7f8001u), /* bf16 max region */
        0x1p-25f, nextafterf(0x1p-25f, 1.0f), 0x1.8p-24f, 0x1p-14f, nextafterf(0x1p-14f, 0.0f),
        f32_of_bits(1), f32_of_bits(0x007fffffu), FLT_MIN, 0.0f, NAN, f32_of_bits(0x7f800001u), f32_of_bits(0xffc12345u)};
    size_t ne = sizeof edges / sizeof edges[0];
    float both[2 * sizeof edges / sizeof edges[0]];
    for (size_t i = 0; i < ne; i++) both[2 * i] = edges[i], both[2 * i + 1] = -edges[i];
    check_conversions(f, "overflow, subnormal and NaN edges", both, 2 * ne);

    size_t nr = (size_t)1 << 20;
    float *rnd = ct_alloc(FLOATS(nr));
    for (size_t i = 0; i < nr; i++) rnd[i] = f32_of_bits((uint32_t)(ct_next() >> 32));
    check_conversions(f, "2^20 random float patterns", rnd, nr);

    free(pat), free(val), free(got), free(ties), free(rnd);
    ct_free_all();
}

/* ------------------------------------------------------------ non-finite count */

static void test_count_nonfinite(void)
{
    size_t n = 100003;
    float *x = ct_frand(n, 1e30, 0);
    float *d_x = ct_put(x, FLOATS(n));
    size_t c0 = cuda_count_nonfinite(d_x, n);
    tap_ok(c0 == 0, "count_nonfinite: finite data gives 0 (got %zu)", c0);
    const size_t at[] = {0, 17, 4095, 50000, 77777, 99999, 100002};
    const float bad[] = {NAN, INFINITY, -INFINITY, NAN, -NAN, INFINITY, NAN};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) x[at[i]] = bad[i];
    d_x = ct_put(x, FLOATS(n));
    size_t c = cuda_count_nonfinite(d_x, n);
    tap_ok(c == sizeof at / sizeof at[0], "count_nonfinite: %zu planted NaN/Inf found (got %zu)",
           sizeof at / sizeof at[0], c);
    free(x);
    ct_free_all();
}

/* ------------------------------------------------------------ 16-bit matmul */

int main(void)
{
    cuda_test_start();
    test_format(&BF16);
    test_format(&FP16);
    test_count_nonfinite();
    cuda_backend_finalize();
    return tap_done();
}
