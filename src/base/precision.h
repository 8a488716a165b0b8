/* precision.h -- the low-precision storage formats (docs/precision.md):
 * bf16 and IEEE fp16 as real 16-bit formats with round-to-nearest-even
 * conversion, used on the CPU to store and round the
 * parameters and activations that a GPU would keep in 16 bits. */
#ifndef TRIAD_PRECISION_H
#define TRIAD_PRECISION_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The deck's train.precision becomes one of these in the run's shape
 * (config/shape.c); its words are in config/params.def. */
enum precision { PREC_FP32, PREC_BF16, PREC_FP16 };

/* The bits of a float, and the float of some bits. */
static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* One value.  Round-to-nearest-even; NaN stays a (quiet) NaN; fp16 values of
 * magnitude >= 65520 become infinities, those below 2^-24 / 2 zero, the rest
 * below 2^-14 subnormals. */
uint16_t bf16_from_f32(float f);
float f32_from_bf16(uint16_t h);
uint16_t fp16_from_f32(float f);
float f32_from_fp16(uint16_t h);

/* x[i] = the nearest value of format p (no-op for fp32). */
void lp_round(enum precision p, float *x, size_t n);
/* dst[i] = the nearest value of format p to src[i] (fp32: a copy), in one
 * pass; dst == src is lp_round. */
void lp_round_to(enum precision p, float *dst, const float *src, size_t n);
/* Store n values in format p (rounding), and load them back (exact). */
void lp_pack(enum precision p, uint16_t *dst, const float *src, size_t n);
/* lp_pack for what is read again only long after (the layers a step keeps
 * for its backward): bf16 on avx512 streams dst past the caches where dst
 * is 32-byte aligned, sparing the read of each line before its write
 * (docs/performance.md); the same values. */
void lp_pack_far(enum precision p, uint16_t *dst, const float *src, size_t n);
void lp_unpack(enum precision p, float *dst, const uint16_t *src, size_t n);

/* Each of rows rows of n floats, ld apart from x, = its bf16 rounding, on
 * the calling thread (lp_round's arithmetic, SIMD on the avx2 and avx512
 * paths): a block of a larger operation (the GEMM's epilogue on a tile). */
void bf16_round_rows(float *x, size_t ld, size_t rows, size_t n);

/* Number of NaN or infinite elements. */
size_t count_nonfinite(const float *x, size_t n);

#endif
