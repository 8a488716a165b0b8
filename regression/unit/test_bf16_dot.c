/* test_bf16_dot.c -- gemm_bf16's arithmetic (src/kernels/gemm_kernels.h)
 * against an independent model, and against the instructions it follows.
 *
 * Everywhere: gemm_bf16_round on crafted values (ties, overflow,
 * subnormals, NaN); gemm_fma_ftz and gemm_mul_ftz on crafted values (the
 * window below FLT_MIN where flushing after rounding and gradual underflow
 * disagree) and on random bf16 x bf16 + fp32 sums against an exact model
 * in double (the sum computed exactly, rounded to 24 bits with the
 * exponent scaled out of the way, tiny when below FLT_MIN).
 *
 * x86 with AVX2: vfmadd and vmul under gemm_mxcsr_ftz_enter (how the avx2
 * and avx512 kernels emulate) equal gemm_fma_ftz / gemm_mul_ftz, on
 * random and crafted operands, bf16 ones and any fp32 ones.
 *
 * x86 with AVX512-BF16: VDPBF16PS on random and crafted lanes equals two
 * gemm_fma_ftz per pair, the odd element's product first (subnormal
 * bf16 inputs and accumulators as zeros of their sign); VCVTNE2PS2BF16
 * equals gemm_bf16_round on random bit patterns of every class.  Crafted
 * lanes tell apart each other reading of the SDM: the order of the two
 * products, the pair summed before rounding, tininess before rounding,
 * no flushing, overflow inside a pair. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "gemm_kernels.h"
#include "tap.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define X86 1
#else
#define X86 0
#endif

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Equal bits, or both NaN (payloads are not part of the arithmetic). */
static int same(float x, float y) { return bits(x) == bits(y) || (isnan(x) && isnan(y)); }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* A random bf16 value (as a float) of one of four kinds: any bits, an
 * exponent near 1, one near 2^-63 (products near FLT_MIN), a subnormal. */
static float rand_bf16(int kind)
{
    uint32_t h = (uint32_t)next() & 0xffffu;
    if (kind == 1) h = (h & 0x807fu) | ((0x3f00u + (h & 0x0f80u)) & 0x7f80u);
    if (kind == 2) h = (h & 0x807fu) | ((0x1f00u + (h & 0x0380u)) & 0x7f80u);
    if (kind == 3) h &= 0x807fu;
    return of_bits(h << 16);
}

/* A random fp32 accumulator: any bits, near 1, near FLT_MIN (normal). */
static float rand_acc(int kind)
{
    uint32_t u = (uint32_t)next();
    if (kind == 1) u = (u & 0x807fffffu) | 0x3f800000u;
    if (kind == 2) u = (u & 0x80ffffffu) | 0x00800000u;
    return of_bits(u);
}

/* ------------------------------------------------------------ the model */

/* x*y + z exactly in double, or 0 in *exact when double cannot hold it. */
static double exact_sum(float x, float y, float z, int *exact)
{
    double p = (double)x * y, s = p + z, bb = s - p;
    *exact = (p - (s - bb)) + (z - bb) == 0.0 && isfinite(s);
    return s;
}

/* The flushing FMA from its definition: v rounded to nearest even at 24
 * bits with an unbounded exponent (v scaled into fp32's normal range,
 * converted, scaled back), a zero of v's sign when that is below FLT_MIN. */
static float model_ftz(double v)
{
    if (v == 0.0) return (float)v;
    int e;
    frexp(v, &e);
    double scaled = ldexp(v, 1 - e);           /* in [1, 2) */
    double r24 = ldexp((double)(float)scaled, e - 1);
    if (fabs(r24) < FLT_MIN) return v < 0 ? -0.0f : 0.0f;
    return (float)r24;
}

static void test_round(void)
{
    static const struct { uint32_t in, want; const char *what; } c[] = {
        {0x3f800000u, 0x3f800000u, "1 stays"},
        {0x3f808000u, 0x3f800000u, "1 + 2^-8: tie to even, down"},
        {0x3f818000u, 0x3f820000u, "1 + 3 2^-8: tie to even, up"},
        {0x3f808001u, 0x3f810000u, "1 + 2^-8 + 2^-23: above the tie, up"},
        {0x7f7fffffu, 0x7f800000u, "FLT_MAX: past bf16's largest, infinity"},
        {0xff7f7fffu, 0xff7f0000u, "-(largest bf16 + below half an ulp): down"},
        {0x00800000u, 0x00800000u, "FLT_MIN stays"},
        {0x007fffffu, 0x00000000u, "largest subnormal: zero"},
        {0x80000001u, 0x80000000u, "negative subnormal: -0"},
        {0x80000000u, 0x80000000u, "-0 stays"},
        {0x7f800000u, 0x7f800000u, "infinity stays"},
        {0x7f800001u, 0x7fc00000u, "signalling NaN: quiet, truncated"},
        {0xffa01234u, 0xffe00000u, "negative NaN: quiet, sign kept"},
    };
    int bad = -1, n = (int)(sizeof c / sizeof c[0]);
    for (int i = 0; i < n && bad < 0; i++)
        if (bits(gemm_bf16_round(of_bits(c[i].in))) != c[i].want) bad = i;
    if (!tap_ok(bad < 0, "gemm_bf16_round: %d crafted values (ties to even, overflow, subnormals to signed zeros, NaN)",
                n))
        tap_diag("%s: %08x -> %08x, want %08x", c[bad].what, c[bad].in, bits(gemm_bf16_round(of_bits(c[bad].in))),
                 c[bad].want);
}

/* acc = FLT_MIN + 2^-149 (24 bits), then + (-(8 + r) 2^-152), a bf16 x
 * bf16 product: FLT_MIN - r 2^-152.  At 24 bits below FLT_MIN the spacing
 * is 2^-150 = 4 units: r = 1 rounds up to FLT_MIN, r = 2 is a tie going to
 * FLT_MIN (even), r = 3 rounds to FLT_MIN - 2^-150 (tiny); gradual
 * underflow (spacing 8 units) would keep FLT_MIN up to r = 4. */
static float window_acc(void) { return FLT_MIN + 0x1p-149f; }
static float window_a(int r) { return (float)(8 + r) * 0x1p-80f; }
static const float window_b = -0x1p-72f;

static void test_ftz_crafted(void)
{
    int ok = 1;
    for (int r = -4; r <= 12; r++) {
        float got = gemm_fma_ftz(window_a(r), window_b, window_acc()), want = r <= 2 ? FLT_MIN : 0.0f;
        if (!same(got, want)) {
            ok = 0;
            tap_diag("FLT_MIN - %d 2^-152: got %a, want %a", r, got, want);
        }
    }
    tap_ok(ok, "gemm_fma_ftz: FLT_MIN - r 2^-152 kept for r <= 2 (rounds to FLT_MIN at 24 bits), flushed for r >= 3");
    ok = same(gemm_fma_ftz(0x1p-65f, 0x1p-65f, 0.0f), 0.0f) && same(gemm_fma_ftz(-0x1p-65f, 0x1p-65f, 0.0f), -0.0f) &&
         same(gemm_fma_ftz(0x1p-63f, 0x1p-63f, 0.0f), FLT_MIN) &&
         same(gemm_fma_ftz(0x1p100f, 0x1p100f, 0.0f), INFINITY) &&
         same(gemm_fma_ftz(1.0f, -1.0f, 1.0f), 0.0f) && isnan(gemm_fma_ftz(INFINITY, 0.0f, 1.0f));
    tap_ok(ok, "gemm_fma_ftz: subnormal results to zeros of their sign, FLT_MIN kept, overflow, cancellation, NaN");
    /* (1 - 2^-24) FLT_MIN: gradual underflow rounds it (a tie) to FLT_MIN, but at 24 bits it is exact and tiny */
    ok = same(gemm_mul_ftz(1.0f - 0x1p-24f, FLT_MIN), 0.0f) && same(gemm_mul_ftz(-1.0f, FLT_MIN), -FLT_MIN) &&
         same(gemm_mul_ftz(0.5f, -FLT_MIN), -0.0f) && same(gemm_mul_ftz(1.0f + 0x1p-23f, FLT_MIN), FLT_MIN + 0x1p-149f);
    tap_ok(ok, "gemm_mul_ftz: (1 - 2^-24) FLT_MIN flushed though gradual underflow rounds it to FLT_MIN; signs");
}

static void test_ftz_model(void)
{
    long n = 0, skipped = 0, bad = 0;
    for (long i = 0; i < 2000000; i++) {
        int kind = (int)(i % 3);
        float x = gemm_bf16_round(rand_bf16(kind)), y = gemm_bf16_round(rand_bf16(kind)), z = rand_acc(kind);
        if (!isfinite(x) || !isfinite(y) || !isfinite(z) || fabsf(z) < FLT_MIN) continue;
        int exact;
        double v = exact_sum(x, y, z, &exact);
        if (!exact) {
            skipped++;
            continue;
        }
        n++;
        if (!same(gemm_fma_ftz(x, y, z), model_ftz(v)) && bad++ < 3)
            tap_diag("fma_ftz(%a, %a, %a) = %a, the model %a", x, y, z, gemm_fma_ftz(x, y, z), model_ftz(v));
    }
    tap_ok(bad == 0 && n > 1000000, "gemm_fma_ftz equals the model on %ld random bf16 x bf16 + fp32 sums (%ld mismatches; "
           "%ld not exact in double, left out)", n, bad, skipped);
}

/* ------------------------------------------------------------ x86 MXCSR */

#if X86
__attribute__((target("avx2,fma"), noinline)) static void mxcsr_fma(const float *x, const float *y, const float *z,
                                                                     float *fma, float *mul)
{
    unsigned saved = gemm_mxcsr_ftz_enter();
    _mm256_storeu_ps(fma, _mm256_fmadd_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y), _mm256_loadu_ps(z)));
    _mm256_storeu_ps(mul, _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y)));
    gemm_mxcsr_leave(saved);
}

static void test_mxcsr(void)
{
    if (!isa_supported(ISA_AVX2)) {
        tap_skip("MXCSR.FTZ emulation: no AVX2 here");
        return;
    }
    long bad = 0, n = 0;
    for (long i = 0; i < 300000; i++) {
        float x[8], y[8], z[8], f[8], m[8];
        for (int l = 0; l < 8; l++) {
            int kind = (int)((i + l) % 4);
            if (kind == 3) { /* any fp32 (the closing beta C + alpha acc), subnormals included */
                x[l] = of_bits((uint32_t)next()), y[l] = of_bits((uint32_t)next() & 0x80ffffffu);
                z[l] = rand_acc(2);
            } else {
                x[l] = gemm_bf16_round(rand_bf16(kind)), y[l] = gemm_bf16_round(rand_bf16(kind)), z[l] = rand_acc(kind);
                if (fabsf(z[l]) < FLT_MIN) z[l] = 0.0f; /* (an accumulator is never subnormal) */
            }
        }
        if (i == 0)
            for (int r = -4; r < 4; r++) x[r + 4] = window_a(r), y[r + 4] = window_b, z[r + 4] = window_acc();
        mxcsr_fma(x, y, z, f, m);
        for (int l = 0; l < 8; l++, n++)
            if ((!same(f[l], gemm_fma_ftz(x[l], y[l], z[l])) || !same(m[l], gemm_mul_ftz(x[l], y[l]))) && bad++ < 3)
                tap_diag("under MXCSR.FTZ: fma(%a, %a, %a) = %a (emulation %a), mul %a (%a)", x[l], y[l], z[l], f[l],
                         gemm_fma_ftz(x[l], y[l], z[l]), m[l], gemm_mul_ftz(x[l], y[l]));
    }
    tap_ok(bad == 0, "vfmadd and vmul under MXCSR.FTZ equal gemm_fma_ftz and gemm_mul_ftz on %ld lanes "
           "(bf16 and any fp32 operands, the FLT_MIN window)", n);
}
#endif

/* ------------------------------------------------------------ AVX512-BF16 */

#if X86
#define BF16_TARGET __attribute__((target("avx512f,avx512bf16"), noinline))

/* 16 lanes of VDPBF16PS: acc[l] += the pair (a1, b1), then (a0, b0), as
 * the instruction does it (bf16 values given as floats). */
BF16_TARGET static void dpbf16(float *acc, const float *a0, const float *a1, const float *b0, const float *b1)
{
    const __m512i high = _mm512_set1_epi32((int)0xffff0000u);
    __m512i a = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(a0)), 16),
                                _mm512_and_si512(high, _mm512_castps_si512(_mm512_loadu_ps(a1))));
    __m512i b = _mm512_or_si512(_mm512_srli_epi32(_mm512_castps_si512(_mm512_loadu_ps(b0)), 16),
                                _mm512_and_si512(high, _mm512_castps_si512(_mm512_loadu_ps(b1))));
    _mm512_storeu_ps(acc, _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)a, (__m512bh)b));
}

/* VCVTNE2PS2BF16 of 32 floats: their bf16 bits, x[0..15] then x[16..31]. */
BF16_TARGET static void cvt_bf16(const float *x, uint16_t *h)
{
    __m512bh r = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    memcpy(h, &r, 64);
}

/* The arithmetic for one lane: bf16 and accumulator subnormals read as
 * zeros of their sign (gemm_bf16_round keeps every other bf16 value; the
 * kernels' accumulators are never subnormal), then two fma_ftz, odd first. */
static float emulate(float acc, float a0, float a1, float b0, float b1)
{
    if (fabsf(acc) < FLT_MIN) acc = copysignf(0.0f, acc);
    acc = gemm_fma_ftz(gemm_bf16_round(a1), gemm_bf16_round(b1), acc);
    return gemm_fma_ftz(gemm_bf16_round(a0), gemm_bf16_round(b0), acc);
}

/* Lanes that each other reading of the SDM gets wrong: {acc, a0, a1, b0, b1, result}. */
static const float crafted[][6] = {
    /* odd product first: (1 + 2^24) rounds to 2^24, then 0 (even first, or the pair summed first: 1) */
    {1.0f, -0x1p24f, 0x1p24f, 1.0f, 1.0f, 0.0f},
    /* each product rounded into acc: 1 + 2^-24 ties to 1, twice (the pair summed first: 1 + 2^-23) */
    {1.0f, 0x1p-24f, 0x1p-24f, 1.0f, 1.0f, 1.0f},
    /* tininess after rounding: FLT_MIN - 2^-152 kept (before rounding: 0) */
    {FLT_MIN + 0x1p-149f, 0.0f, 9 * 0x1p-80f, 0.0f, -0x1p-72f, FLT_MIN},
    /* FLT_MIN - 3 2^-152 flushed (gradual underflow without flushing: FLT_MIN) */
    {FLT_MIN + 0x1p-149f, 0.0f, 11 * 0x1p-80f, 0.0f, -0x1p-72f, 0.0f},
    /* a product 2^-130 flushed */
    {0.0f, 0x1p-65f, 0.0f, 0x1p-65f, 0.0f, 0.0f},
    /* -2^-130: -0 */
    {0.0f, -0x1p-65f, 0.0f, 0x1p-65f, 0.0f, -0.0f},
    /* overflow inside the pair stays infinite (summed first: 0) */
    {0.0f, -0x1p127f, 0x1p127f, 0x1p10f, 0x1p10f, INFINITY},
    /* a subnormal bf16 input is a zero (else 2^-30) */
    {0.0f, 0x1p-130f, 0.0f, 0x1p100f, 0.0f, 0.0f},
    /* a subnormal accumulator is a zero of its sign: -0 + -0 + -0 */
    {-0x1p-140f, -1.0f, -1.0f, 0.0f, 0.0f, -0.0f},
};

static void test_instruction(void)
{
    if (!isa_supported(ISA_AVX512BF16)) {
        tap_skip("VDPBF16PS against the emulation: this processor has no AVX512-BF16");
        tap_skip("VCVTNE2PS2BF16 against gemm_bf16_round: this processor has no AVX512-BF16");
        return;
    }
    long n = 0, bad = 0;
    int ncraft = (int)(sizeof crafted / sizeof crafted[0]), craft_bad = 0;
    for (long i = 0; i < 150000; i++) {
        float acc[16], a0[16], a1[16], b0[16], b1[16], was[16];
        for (int l = 0; l < 16; l++) {
            int kind = (int)((i + l) % 4);
            acc[l] = rand_acc(kind % 3), a0[l] = rand_bf16(kind), a1[l] = rand_bf16(kind);
            b0[l] = rand_bf16(kind == 3 ? 1 : kind), b1[l] = rand_bf16(kind);
            if (i == 0 && l < ncraft)
                acc[l] = crafted[l][0], a0[l] = crafted[l][1], a1[l] = crafted[l][2], b0[l] = crafted[l][3],
                b1[l] = crafted[l][4];
            was[l] = acc[l];
        }
        dpbf16(acc, a0, a1, b0, b1);
        for (int l = 0; l < 16; l++, n++) {
            float want = emulate(was[l], a0[l], a1[l], b0[l], b1[l]);
            if (i == 0 && l < ncraft && (!same(acc[l], crafted[l][5]) || !same(want, crafted[l][5]))) {
                craft_bad++;
                tap_diag("crafted lane %d: VDPBF16PS %a, emulation %a, expected %a", l, acc[l], want, crafted[l][5]);
            }
            if (!same(acc[l], want) && bad++ < 3)
                tap_diag("VDPBF16PS(acc %a; %a %a . %a %a) = %a, the emulation %a", was[l], a0[l], a1[l], b0[l], b1[l],
                         acc[l], want);
        }
    }
    tap_ok(bad == 0 && craft_bad == 0, "VDPBF16PS equals two gemm_fma_ftz per pair, odd first, on %ld random lanes "
           "and %d crafted ones (order, rounding per product, tininess after rounding, flushing, overflow, "
           "subnormal inputs) on %s", n, ncraft, cpu_model_name());
    long cbad = 0, cn = 0;
    for (long i = 0; i < 100000; i++) {
        float x[32];
        uint16_t h[32];
        for (int l = 0; l < 32; l++) {
            uint32_t u = (uint32_t)next();
            int kind = (int)((i + l) % 4);
            if (kind == 1) u &= 0x807fffffu;             /* zero or subnormal */
            if (kind == 2) u |= 0x7f800000u;             /* infinity or NaN */
            if (kind == 3) u = (u & 0x8000ffffu) | 0x3f7f0000u | (u & 0x8000u ? 0x7fffu : 0x8000u); /* near ties */
            x[l] = of_bits(u);
        }
        cvt_bf16(x, h);
        for (int l = 0; l < 32; l++, cn++)
            if ((uint32_t)h[l] << 16 != bits(gemm_bf16_round(x[l])) && cbad++ < 3)
                tap_diag("VCVTNE2PS2BF16(%08x) = %04x, gemm_bf16_round %08x", bits(x[l]), h[l],
                         bits(gemm_bf16_round(x[l])));
    }
    tap_ok(cbad == 0, "VCVTNE2PS2BF16 equals gemm_bf16_round bit for bit (NaNs included) on %ld values of every "
           "class", cn);
}
#endif

int main(void)
{
    test_round();
    test_ftz_crafted();
    test_ftz_model();
#if X86
    test_mxcsr();
    test_instruction();
#else
    tap_skip("MXCSR.FTZ emulation: not an x86 processor");
    tap_skip("VDPBF16PS against the emulation: not an x86 processor");
    tap_skip("VCVTNE2PS2BF16 against gemm_bf16_round: not an x86 processor");
#endif
    return tap_done();
}
