/* data_internal.h -- what the data sources share (data.c, data_indexed.c):
 * memory-mapped token files and the error helper. */
#ifndef TRIAD_DATA_INTERNAL_H
#define TRIAD_DATA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "deck.h"

/* One memory-mapped file: `n` tokens of `width` bytes at `tok`. */
struct shard {
    char *path;
    void *map;
    size_t maplen;
    const unsigned char *tok;
    uint64_t n;
    int width;  /* bytes per token: 1 (text), 2 or 4 (llm.c shards), 1 to 8 (indexed datasets) */
    int signed_; /* the ids are signed integers (an indexed dataset's i8, i16, i32, i64) */
};

/* Fill err (file, hint, what) and return NULL. */
void *data_fail(struct deck_error *err, const char *file, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Map path read-only into s (path, map, maplen).  0, or -1 with err. */
int data_map_file(struct shard *s, const char *path, struct deck_error *err);
/* Token k of s (little-endian, as wide and signed as s says). */
int64_t data_token_at(const struct shard *s, uint64_t k);

/* A Megatron-LM indexed dataset PREFIX.idx + PREFIX.bin as one shard of
 * its sequences' tokens, in order, after the index is checked (data_indexed.c).
 * 0, or -1 with err. */
int data_indexed_open(struct shard *s, const char *prefix, struct deck_error *err);

#endif
