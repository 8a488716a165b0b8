/* precision.c -- bf16 and fp16 conversions, rounding and storage. */
#include "precision.h"

#include "cpu.h"

#include <math.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_F16C_PATH 1
#endif

/* The bits of f rounded to bf16 (low half zero), without a branch so that
 * the array loops vectorise: ties to the even upper half, an overflow
 * carries into Inf, a NaN stays a quiet NaN. */
static inline uint32_t bf16_bits(uint32_t u)
{
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    uint32_t quiet = (u | 0x00400000u) & 0xffff0000u;
    return (u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded;
}

uint16_t bf16_from_f32(float f) { return (uint16_t)(bf16_bits(f32_bits(f)) >> 16); }

float f32_from_bf16(uint16_t h) { return f32_of_bits((uint32_t)h << 16); }

uint16_t fp16_from_f32(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (the tie above 65504): Inf */
    if (a < 0x38800000u) /* below 2^-14: a multiple of 2^-24, scaled exactly and rounded to even */
        return (uint16_t)(sign | (uint32_t)lrintf(f32_of_bits(a) * 16777216.0f));
    uint32_t r = a - 0x38000000u; /* rebias the exponent from 127 to 15 */
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

float f32_from_fp16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (e == 0) { /* zero or subnormal: mant * 2^-24, exact in fp32 */
        float v = (float)mant * (1.0f / 16777216.0f);
        return f32_of_bits(f32_bits(v) | sign);
    }
    if (e == 31) return f32_of_bits(sign | 0x7f800000u | (mant << 13));
    return f32_of_bits(sign | ((e + 112u) << 23) | (mant << 13));
}

/* fp16 arrays go through the F16C instructions on the avx2 and avx512 paths
 * (cpu.h), where the processor has them (the generic path stays in C, so
 * TRIAD_ISA=generic tests the scalar code).  The hardware conversion is IEEE
 * round-to-nearest-even, the same results as fp16_from_f32 / f32_from_fp16
 * (test_precision checks it).  Each returns how many leading elements (a
 * multiple of 8) it did: none without F16C. */
#ifdef HAVE_F16C_PATH
static int has_f16c(void)
{
    return isa_active() >= ISA_AVX2 && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
}

__attribute__((target("avx,f16c"))) static size_t fp16_pack_f16c(uint16_t *dst, const float *src, size_t n)
{
    size_t i = 0;
    if (has_f16c())
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i),
                                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return i;
}

__attribute__((target("avx,f16c"))) static size_t fp16_unpack_f16c(float *dst, const uint16_t *src, size_t n)
{
    size_t i = 0;
    if (has_f16c())
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    return i;
}
#else
static size_t fp16_pack_f16c(uint16_t *dst, const float *src, size_t n) { return (void)dst, (void)src, (void)n, 0; }
static size_t fp16_unpack_f16c(float *dst, const uint16_t *src, size_t n) { return (void)dst, (void)src, (void)n, 0; }
#endif

/* One block of an fp16 array: F16C for what it can, the scalar conversion
 * for the rest. */
static void fp16_pack_block(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = fp16_pack_f16c(dst, src, n); i < n; i++) dst[i] = fp16_from_f32(src[i]);
}

static void fp16_unpack_block(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = fp16_unpack_f16c(dst, src, n); i < n; i++) dst[i] = f32_from_fp16(src[i]);
}

/* The fp16 arrays are done in blocks, in parallel: a block's fp16 values
 * sit on the stack between pack and unpack when rounding. */
enum { FP16_BLOCK = 4096 };

static size_t block_len(size_t at, size_t n) { return n - at < FP16_BLOCK ? n - at : FP16_BLOCK; }

void lp_round(enum precision p, float *x, size_t n)
{
    if (p == PREC_BF16) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) x[i] = f32_of_bits(bf16_bits(f32_bits(x[i])));
    } else if (p == PREC_FP16) {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t at = 0; at < n; at += FP16_BLOCK) {
            uint16_t h[FP16_BLOCK];
            fp16_pack_block(h, x + at, block_len(at, n));
            fp16_unpack_block(x + at, h, block_len(at, n));
        }
    }
}

void lp_pack(enum precision p, uint16_t *dst, const float *src, size_t n)
{
    if (p == PREC_BF16) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) dst[i] = (uint16_t)(bf16_bits(f32_bits(src[i])) >> 16);
    } else {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t at = 0; at < n; at += FP16_BLOCK) fp16_pack_block(dst + at, src + at, block_len(at, n));
    }
}

void lp_unpack(enum precision p, float *dst, const uint16_t *src, size_t n)
{
    if (p == PREC_BF16) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
        for (size_t i = 0; i < n; i++) dst[i] = f32_from_bf16(src[i]);
    } else {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t at = 0; at < n; at += FP16_BLOCK) fp16_unpack_block(dst + at, src + at, block_len(at, n));
    }
}

size_t count_nonfinite(const float *x, size_t n)
{
    size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad) if (n > 65536)
    for (size_t i = 0; i < n; i++) bad += (f32_bits(x[i]) & 0x7f800000u) == 0x7f800000u;
    return bad;
}
