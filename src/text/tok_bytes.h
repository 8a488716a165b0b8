/* tok_bytes.h -- the tokenizer's growable buffers: a byte string and an
 * array of ids, grown by doubling. */
#ifndef TRIAD_TOK_BYTES_H
#define TRIAD_TOK_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* A growable byte string, kept NUL-terminated. */
struct bytes {
    char *p;
    size_t n, cap;
};
int tok_put(struct bytes *b, const void *p, size_t n); /* -1: out of memory */
/* Room for `need` elements of `size` bytes in *p (capacity *cap, doubled);
 * tok_grow: one more id. */
int tok_grow_size(void **p, size_t *cap, size_t need, size_t size);
int tok_grow(int32_t **ids, size_t *cap);
void tok_drop(struct bytes *b);

#endif
