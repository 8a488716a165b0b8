/* rng.h -- counter-based random numbers (Philox-4x32-10).
 *
 * A number is a pure function of (seed, stream, index): each rank draws only
 * the elements of its own shard and still gets exactly the values the serial
 * run has at those logical positions. */
#ifndef TRIAD_RNG_H
#define TRIAD_RNG_H

#include <stdint.h>

/* Four 32-bit random words for counter (stream, index) under key seed. */
void philox4x32(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4]);

/* Uniform in (0, 1), 53 bits. */
double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);

/* Standard normal (Box-Muller on one Philox block). */
double rng_normal(uint64_t seed, uint64_t stream, uint64_t index);

/* Stable 64-bit id of a string (FNV-1a), e.g. a tensor's checkpoint path. */
uint64_t rng_stream_id(const char *name);

#endif
