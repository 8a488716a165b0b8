/* test_rng.c -- Philox known answers and the counter-based properties. */
#include <math.h>
#include <stdint.h>

#include "rng.h"
#include "tap.h"

static int philox_kat(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                      const uint32_t want[4])
{
    uint32_t out[4];
    philox4x32(((uint64_t)k1 << 32) | k0, ((uint64_t)c3 << 32) | c2, ((uint64_t)c1 << 32) | c0, out);
    return out[0] == want[0] && out[1] == want[1] && out[2] == want[2] && out[3] == want[3];
}

int main(void)
{
    /* Known-answer vectors of Philox-4x32-10 (Random123 distribution). */
    const uint32_t z[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    const uint32_t f[4] = {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu};
    const uint32_t p[4] = {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u};
    tap_ok(philox_kat(0, 0, 0, 0, 0, 0, z), "Philox-4x32-10 known answer: zero counter and key");
    tap_ok(philox_kat(~0u, ~0u, ~0u, ~0u, ~0u, ~0u, f), "Philox-4x32-10 known answer: all ones");
    tap_ok(philox_kat(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, p),
           "Philox-4x32-10 known answer: digits of pi");

    tap_ok(rng_normal(1, 2, 3) == rng_normal(1, 2, 3), "a number is a pure function of (seed, stream, index)");
    tap_ok(rng_normal(1, 2, 3) != rng_normal(1, 2, 4) && rng_normal(1, 2, 3) != rng_normal(1, 3, 3) &&
               rng_normal(1, 2, 3) != rng_normal(2, 2, 3),
           "seed, stream and index each change the number");

    const int n = 1 << 20;
    double s = 0, s2 = 0, umin = 1, umax = 0, us = 0;
    for (int i = 0; i < n; i++) {
        double x = rng_normal(42, 7, (uint64_t)i);
        s += x;
        s2 += x * x;
        double u = rng_uniform(42, 8, (uint64_t)i);
        umin = u < umin ? u : umin;
        umax = u > umax ? u : umax;
        us += u;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    tap_diag("normal: mean %.5f var %.5f over %d draws; uniform in [%.3g, %.6f], mean %.5f", mean, var, n, umin,
             umax, us / n);
    /* 5 standard errors: sd(mean) = 1/sqrt(n) ~ 1e-3, sd(var) ~ sqrt(2/n) ~ 1.4e-3 */
    tap_ok(fabs(mean) < 5e-3 && fabs(var - 1) < 7e-3, "normal draws have mean 0 and variance 1");
    tap_ok(umin > 0 && umax < 1 && fabs(us / n - 0.5) < 3e-3, "uniform draws lie in (0,1) with mean 1/2");
    tap_ok(rng_stream_id("h.0/qkv_w") != rng_stream_id("h.1/qkv_w"), "tensor names give distinct streams");
    return tap_done();
}
