/* test_precision.c -- bf16 and fp16: every bit pattern, ties to even,
 * overflow, subnormals, and random values against the nearest neighbour. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "precision.h"
#include "rng.h"
#include "tap.h"

typedef uint16_t (*to_lp)(float);
typedef float (*from_lp)(uint16_t);

/* The value of fp16 pattern h, from its definition. */
static double fp16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double s = h & 0x8000 ? -1 : 1;
    if (e == 0) return s * ldexp(m, -24);
    if (e == 31) return m ? NAN : s * INFINITY;
    return s * ldexp(1024 + m, e - 25);
}

/* Every pattern converts to a float and back to itself (NaNs to a NaN). */
static void roundtrip(const char *name, to_lp to, from_lp from)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = from((uint16_t)h);
        uint16_t back = to(f);
        if (isnan(f) ? !isnan(from(back)) : back != h) bad++;
    }
    tap_ok(bad == 0, "%s: all 65536 patterns survive float and back (%d wrong)", name, bad);
}

/* Between each pair of neighbouring finite positive values: the midpoint
 * goes to the one with the even pattern, a float either side of it to the
 * nearer one. */
static void ties(const char *name, to_lp to, from_lp from, uint16_t last_finite)
{
    int bad = 0;
    for (uint32_t h = 0; h < last_finite; h++) {
        double lo = from((uint16_t)h), hi = from((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2); /* exact: 12 significant bits at most */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (to(mid) != even) bad++;
        if (to(nextafterf(mid, 0.0f)) != h || to(nextafterf(mid, INFINITY)) != h + 1) bad++;
        if (to(-mid) != (uint16_t)(even | 0x8000)) bad++;
    }
    tap_ok(bad == 0, "%s: ties go to even, neighbours of a tie to the nearer value (%d wrong)", name, bad);
}

/* Random float bit patterns: the result is a nearest value. */
static void nearest(const char *name, to_lp to, from_lp from)
{
    int bad = 0;
    for (uint64_t i = 0; i < 1000000; i++) {
        float f = f32_of_bits((uint32_t)(rng_uniform(7, 1, i) * 4294967296.0));
        if (isnan(f)) continue;
        uint16_t h = to(f);
        double v = from(h);
        if (isinf(v) && !isinf(f)) continue; /* overflow: checked on its own */
        for (int dir = -1; dir <= 1; dir += 2) {
            uint16_t nb = (uint16_t)(h + dir);
            if ((h & 0x7fff) == 0 && dir < 0) continue;
            double w = from(nb);
            if (!isnan(w) && !isinf(w) && (nb & 0x8000) == (h & 0x8000) && fabs(w - f) < fabs(v - f)) bad++;
        }
    }
    tap_ok(bad == 0, "%s: 1e6 random floats each go to a nearest value (%d wrong)", name, bad);
}

int main(void)
{
    roundtrip("bf16", bf16_from_f32, f32_from_bf16);
    roundtrip("fp16", fp16_from_f32, f32_from_fp16);
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = fp16_value((uint16_t)h), got = f32_from_fp16((uint16_t)h);
        if (isnan(want) ? !isnan(got) : got != want) bad++;
    }
    tap_ok(bad == 0, "fp16: every pattern decodes to the value its definition gives (%d wrong)", bad);
    ties("bf16", bf16_from_f32, f32_from_bf16, 0x7f7f);
    ties("fp16", fp16_from_f32, f32_from_fp16, 0x7bff);
    nearest("bf16", bf16_from_f32, f32_from_bf16);
    nearest("fp16", fp16_from_f32, f32_from_fp16);

    tap_ok(fp16_from_f32(65504.0f) == 0x7bff && fp16_from_f32(65519.99f) == 0x7bff &&
               fp16_from_f32(65520.0f) == 0x7c00 && fp16_from_f32(-1e6f) == 0xfc00 &&
               fp16_from_f32(INFINITY) == 0x7c00,
           "fp16 overflow: 65504 is the largest value, 65520 and beyond are infinite");
    tap_ok(bf16_from_f32(3.4028235e38f) == 0x7f80 && bf16_from_f32(3.3895314e38f) == 0x7f7f &&
               bf16_from_f32(-INFINITY) == 0xff80,
           "bf16 overflow: above the largest value rounds to infinity");
    tap_ok(fp16_from_f32(ldexpf(1, -24)) == 0x0001 && fp16_from_f32(ldexpf(1, -25)) == 0x0000 &&
               fp16_from_f32(ldexpf(3, -25)) == 0x0002 && fp16_from_f32(ldexpf(1023, -24)) == 0x03ff &&
               fp16_from_f32(ldexpf(2047, -25)) == 0x0400 && fp16_from_f32(-ldexpf(1, -26)) == 0x8000,
           "fp16 subnormals: 2^-24 is the smallest, half of it a tie to zero, the carry reaches the normals");
    tap_ok(isnan(f32_from_bf16(bf16_from_f32(NAN))) && isnan(f32_from_fp16(fp16_from_f32(-NAN))) &&
               (bf16_from_f32(f32_of_bits(0x7f800001u)) & 0x7fc0) == 0x7fc0,
           "NaN stays NaN (a signalling NaN becomes quiet, not infinite)");

    enum precision ps[2] = {PREC_BF16, PREC_FP16};
    for (int k = 0; k < 2; k++) {
        size_t n = 100003;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *z = malloc(n * sizeof *z);
        uint16_t *h = malloc(n * sizeof *h);
        for (size_t i = 0; i < n; i++) x[i] = y[i] = (float)(rng_normal(3, 4, i) * 100.0);
        lp_round(ps[k], y, n);
        lp_pack(ps[k], h, x, n);
        lp_unpack(ps[k], z, h, n);
        tap_ok(memcmp(y, z, n * sizeof *y) == 0 && memcmp(x, y, n * sizeof *y) != 0,
               "%s: rounding in place equals storing and loading, and changes the values", k ? "fp16" : "bf16");
        free(x), free(y), free(z), free(h);
    }
    /* the array functions (F16C in hardware where there is one; vectorised
     * bit arithmetic for bf16: AVX-512 and AVX2 intrinsics) against the
     * scalar definitions on every path this processor runs: every pattern,
     * and random floats of every size */
    for (int p = ISA_GENERIC; p < ISA_COUNT; p++)
    for (int k = 0; k < 2; k++) {
        if (!isa_supported((enum isa)p)) continue;
        isa_force((enum isa)p);
        enum precision pk = k ? PREC_BF16 : PREC_FP16;
        to_lp to = k ? bf16_from_f32 : fp16_from_f32;
        from_lp from = k ? f32_from_bf16 : f32_from_fp16;
        size_t n = 65536 + 1000003;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        uint16_t *hb = aligned_alloc(64, ((n + 32) * sizeof *hb + 63) / 64 * 64), *h = hb;
        for (size_t i = 0; i < 65536; i++) x[i] = from((uint16_t)i);
        for (size_t i = 65536; i < n; i++) {
            x[i] = f32_of_bits((uint32_t)(rng_uniform(9, 2, i) * 4294967296.0));
            if (i % 3 == 0) x[i] = (float)ldexp(x[i] / 3.4e38, (int)(i % 60) - 30); /* the fp16 range */
        }
        int wrong = 0;
        /* lp_pack and lp_pack_far, into an array that is not 32-byte aligned
         * and then one that is (avx512's bf16 lp_pack_far streams into it):
         * a streamed store that went missing would leave the first pass's
         * values, one element off */
        for (int f = 0; f < 2; f++)
            for (int off = 1; off >= 0; off--) {
                h = hb + off;
                (f ? lp_pack_far : lp_pack)(pk, h, x, n);
                for (size_t i = 0; i < n; i++) /* (bf16: NaNs' bits too) */
                    if (h[i] != to(x[i]) && !(!k && isnan(x[i]) && isnan(from(h[i])))) wrong++;
            }
        lp_unpack(pk, y, h, n);
        for (size_t i = 0; i < n; i++)
            if (memcmp(&y[i], &(float){from(h[i])}, sizeof(float)) != 0) wrong++;
        memcpy(y, x, n * sizeof *x);
        lp_round(pk, y, n);
        for (size_t i = 0; i < n; i++) {
            float want = from(to(x[i]));
            if (!(isnan(want) ? isnan(y[i]) : y[i] == want && signbit(y[i]) == signbit(want))) wrong++;
        }
        /* into another array: the same bits, the source untouched */
        float *z = malloc(n * sizeof *z), *x0 = malloc(n * sizeof *x0);
        memcpy(x0, x, n * sizeof *x);
        lp_round_to(pk, z, x, n);
        if (memcmp(z, y, n * sizeof *z) || memcmp(x, x0, n * sizeof *x)) wrong++;
        lp_round_to(PREC_FP32, z, x, n);
        if (memcmp(z, x, n * sizeof *z)) wrong++;
        tap_ok(wrong == 0,
               "%s, %s arrays (pack, unpack, round, round into another array) equal the scalar conversions on %zu "
               "values (%d wrong)", isa_name((enum isa)p), k ? "bf16" : "fp16", n, wrong);
        free(x), free(y), free(hb), free(z), free(x0);
    }
    /* every element of a parallel array, whatever the thread count, rounded
     * and packed (lp_pack_far, streamed into an aligned array): sizes whose
     * share per thread rounds to a multiple of 32 (or 128 bytes) */
    {
        static const size_t sizes[] = {65537, 65553, 98305, 65536 * 3 + 1};
        int missed = 0, was = omp_get_max_threads();
        for (int t = 1; t <= 16; t++)
            for (size_t q = 0; q < sizeof sizes / sizeof sizes[0]; q++) {
                size_t n = sizes[q];
                float *y = malloc(n * sizeof *y);
                uint16_t *h = aligned_alloc(64, (n * sizeof *h + 63) / 64 * 64);
                for (size_t i = 0; i < n; i++) y[i] = 1.0078125f + 0x1p-20f; /* rounds to 1.0078125 */
                omp_set_num_threads(t);
                memset(h, 0, n * sizeof *h);
                lp_pack_far(PREC_BF16, h, y, n);
                lp_round(PREC_BF16, y, n);
                for (size_t i = 0; i < n; i++) missed += (y[i] != 1.0078125f) + (h[i] != 0x3f81);
                free(y), free(h);
            }
        omp_set_num_threads(was);
        tap_ok(missed == 0, "bf16 arrays on 1..16 threads: every element rounded and packed, at sizes whose shares "
               "are whole vectors (%d missed)", missed);
    }
    float v[6] = {1, INFINITY, 2, NAN, -INFINITY, 3e38f};
    tap_ok(count_nonfinite(v, 6) == 3 && count_nonfinite(v, 1) == 0, "count_nonfinite counts NaN and both infinities");
    return tap_done();
}
