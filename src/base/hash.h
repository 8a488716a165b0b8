/* hash.h -- FNV-1a, the 64-bit hash of bytes that triad uses wherever a
 * stable, portable fingerprint is enough (not cryptographic): the
 * consistency checks, the tokenizer's word cache, random streams by name,
 * the tokenizer files kept in a checkpoint.  Streamable: feed the result
 * back as h for the next piece. */
#ifndef TRIAD_HASH_H
#define TRIAD_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_INIT 1469598103934665603ull

static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

#endif
