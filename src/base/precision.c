/* precision.c -- bf16 and fp16 conversions, rounding and storage. */
#include "precision.h"

#include "cpu.h"
#include "team.h"

#include <math.h>
#include <omp.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_F16C_PATH 1
#include "bf16_simd.h" /* bf16_bits16, bf16_bits8: bf16_bits on 16 and 8 lanes */
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
    /* (cpuid leaf 1, ECX: clang 14's __builtin_cpu_supports knows no "f16c"; AVX2's path implies AVX, the OS's
     * saving of its registers checked) */
    unsigned a, b, c, d;
    return isa_active() >= ISA_AVX2 && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
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

/* The bf16 arrays: the same rounding as bf16_bits, 16 or 8 lanes at a time
 * on the avx512 and avx2 paths (integer operations: the same bits on every
 * path), the scalar code for the rest and on the generic path.  Each
 * returns how many leading elements it did: BF16_ROUND x = round(in) (in
 * may be x), BF16_PACK h = the bf16 of in, BF16_UNPACK x = h.
 * BF16_PACK_FAR packs too, for lp_pack_far: on avx512 it streams h past
 * the caches where h is 32-byte aligned. */
enum bf16_op { BF16_ROUND, BF16_PACK, BF16_PACK_FAR, BF16_UNPACK };
#ifdef HAVE_F16C_PATH
__attribute__((target("avx512f,avx512bw"))) static size_t bf16_avx512(enum bf16_op op, float *x, const float *in,
                                                                       uint16_t *h, size_t n)
{
    size_t i = 0;
    const int stream = op == BF16_PACK_FAR && !((uintptr_t)h & 31);
    for (; i + 16 <= n; i += 16) {
        if (op == BF16_UNPACK) {
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i)));
            _mm512_storeu_si512(x + i, _mm512_slli_epi32(w, 16));
            continue;
        }
        __m512i r = bf16_bits16(_mm512_loadu_si512(in + i));
        if (op == BF16_ROUND) _mm512_storeu_si512(x + i, r);
        else if (stream) _mm256_stream_si256((__m256i *)(h + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
        else _mm256_storeu_si256((__m256i *)(h + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
    }
    if (stream) _mm_sfence();
    return i;
}

/* bf16_round_rows on 16 lanes at a time, the rows' tails masked. */
__attribute__((target("avx512f,avx512bw"))) static void bf16_rows_avx512(float *x, size_t ld, size_t rows, size_t n)
{
    __mmask16 tail = (__mmask16)((1u << (n % 16)) - 1);
    for (size_t r = 0; r < rows; r++) {
        float *row = x + r * ld;
        size_t i = 0;
        for (; i + 16 <= n; i += 16) _mm512_storeu_si512(row + i, bf16_bits16(_mm512_loadu_si512(row + i)));
        if (tail) _mm512_mask_storeu_epi32(row + i, tail, bf16_bits16(_mm512_maskz_loadu_epi32(tail, row + i)));
    }
}

__attribute__((target("avx2"))) static size_t bf16_avx2(enum bf16_op op, float *x, const float *in, uint16_t *h,
                                                        size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        if (op == BF16_UNPACK) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
            _mm256_storeu_si256((__m256i *)(x + i), _mm256_slli_epi32(w, 16));
            continue;
        }
        __m256i r = bf16_bits8(_mm256_loadu_si256((const __m256i *)(in + i)));
        if (op == BF16_ROUND) _mm256_storeu_si256((__m256i *)(x + i), r);
        else {
            __m256i w = _mm256_srli_epi32(r, 16);
            _mm_storeu_si128((__m128i *)(h + i), _mm_packus_epi32(_mm256_castsi256_si128(w),
                                                                  _mm256_extracti128_si256(w, 1)));
        }
    }
    return i;
}

static size_t bf16_simd(enum bf16_op op, float *x, const float *in, uint16_t *h, size_t n)
{
    enum isa a = isa_active();
    if (a >= ISA_AVX512) return bf16_avx512(op, x, in, h, n);
    if (a >= ISA_AVX2) return bf16_avx2(op, x, in, h, n);
    return 0;
}
#else
static size_t bf16_simd(enum bf16_op op, float *x, const float *in, uint16_t *h, size_t n)
{
    return (void)op, (void)x, (void)in, (void)h, (void)n, 0;
}
#endif

/* One block of a bf16 array (x, in: the fp32 sides, h: the 16-bit one; as bf16_simd). */
static void bf16_block(enum bf16_op op, float *x, const float *in, uint16_t *h, size_t n)
{
    size_t i = bf16_simd(op, x, in, h, n);
    for (; i < n; i++) {
        if (op == BF16_ROUND) x[i] = f32_of_bits(bf16_bits(f32_bits(in[i])));
        else if (op != BF16_UNPACK) h[i] = (uint16_t)(bf16_bits(f32_bits(in[i])) >> 16);
        else x[i] = f32_from_bf16(h[i]);
    }
}

void bf16_round_rows(float *x, size_t ld, size_t rows, size_t n)
{
#ifdef HAVE_F16C_PATH
    if (isa_active() >= ISA_AVX512) {
        bf16_rows_avx512(x, ld, rows, n);
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++) bf16_block(BF16_ROUND, x + r * ld, x + r * ld, NULL, n);
}

/* Whether an array of n values is worth a parallel region of its own: more
 * than 65536 of them, outside one.  An OpenMP construct costs a
 * microsecond even with its if clause false, 2.6 us nested (libgomp makes
 * a team of one): device_cpu.c's rounded_rows rounds a block at a time
 * from inside its own region. */
static int array_par(size_t n) { return n > 65536 && omp_get_level() == 0; }

/* A bf16 array in parallel: pieces shared by a team of the threads (team.h;
 * 4 a thread, each a multiple of 32 values: no two threads write one
 * 64-byte line of a 16-bit array, which a streamed store would make a
 * partial write of the line). */
struct bf16_pieces {
    enum bf16_op op;
    float *x;
    const float *in;
    uint16_t *h;
    size_t n, per;
};

static void bf16_piece(void *ctx, int b)
{
    const struct bf16_pieces *a = ctx;
    size_t lo = (size_t)b * a->per, len = a->n - lo < a->per ? a->n - lo : a->per;
    bf16_block(a->op, a->x ? a->x + lo : NULL, a->in ? a->in + lo : NULL, a->h ? a->h + lo : NULL, len);
}

static void bf16_array(enum bf16_op op, float *x, const float *in, uint16_t *h, size_t n)
{
    if (!array_par(n)) {
        bf16_block(op, x, in, h, n);
        return;
    }
    struct bf16_pieces a = {op, x, in, h, n, 0};
    team_for(team_blocks_of(n, 32, 4, &a.per), bf16_piece, &a);
}

/* dst[at ..] = src[at ..] rounded to fp16, one block of FP16_BLOCK (cut at n). */
static void fp16_round_block(float *dst, const float *src, size_t at, size_t n)
{
    uint16_t h[FP16_BLOCK];
    fp16_pack_block(h, src + at, block_len(at, n));
    fp16_unpack_block(dst + at, h, block_len(at, n));
}

void lp_round_to(enum precision p, float *dst, const float *src, size_t n)
{
    if (p == PREC_BF16) bf16_array(BF16_ROUND, dst, src, NULL, n);
    else if (p == PREC_FP16) {
        if (array_par(n)) {
#pragma omp parallel for schedule(static)
            for (size_t at = 0; at < n; at += FP16_BLOCK) fp16_round_block(dst, src, at, n);
        } else
            for (size_t at = 0; at < n; at += FP16_BLOCK) fp16_round_block(dst, src, at, n);
    } else if (dst != src)
        memcpy(dst, src, n * sizeof *dst);
}

void lp_round(enum precision p, float *x, size_t n) { lp_round_to(p, x, x, n); }

static void lp_pack_op(enum bf16_op op, enum precision p, uint16_t *dst, const float *src, size_t n)
{
    if (p == PREC_BF16) bf16_array(op, NULL, src, dst, n);
    else {
#pragma omp parallel for schedule(static) if (n > 65536)
        for (size_t at = 0; at < n; at += FP16_BLOCK) fp16_pack_block(dst + at, src + at, block_len(at, n));
    }
}

void lp_pack(enum precision p, uint16_t *dst, const float *src, size_t n) { lp_pack_op(BF16_PACK, p, dst, src, n); }

void lp_pack_far(enum precision p, uint16_t *dst, const float *src, size_t n)
{
    lp_pack_op(BF16_PACK_FAR, p, dst, src, n);
}

void lp_unpack(enum precision p, float *dst, const uint16_t *src, size_t n)
{
    if (p == PREC_BF16) bf16_array(BF16_UNPACK, dst, NULL, (uint16_t *)src, n); /* (src only read) */
    else {
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
