/* rng.c -- Philox-4x32-10 (Salmon et al., SC'11), counter-based. */
#include "rng.h"

#include <math.h>
#include <string.h>

#include "hash.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void philox4x32(uint64_t seed, uint64_t stream, uint64_t index, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32);
    uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static inline double u53(uint32_t hi, uint32_t lo)
{
    /* (0,1): 53 random bits, offset by half an ulp so 0 never occurs */
    uint64_t bits = ((uint64_t)hi << 21) ^ (lo >> 11);
    bits &= (1ull << 53) - 1;
    return ((double)bits + 0.5) * (1.0 / 9007199254740992.0);
}

double rng_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t r[4];
    philox4x32(seed, stream, index, r);
    return u53(r[0], r[1]);
}

double rng_normal(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint32_t r[4];
    philox4x32(seed, stream, index, r);
    double u1 = u53(r[0], r[1]), u2 = u53(r[2], r[3]);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

uint64_t rng_stream_id(const char *name)
{
    return fnv1a(FNV1A_INIT, name, strlen(name));
}
