/* tok_bytes.c -- the tokenizer's growable buffers (tok_bytes.h). */
#include "tok_bytes.h"

#include <stdlib.h>
#include <string.h>

int tok_put(struct bytes *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *g = realloc(b->p, cap);
        if (!g) return -1;
        b->p = g, b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

int tok_grow_size(void **p, size_t *cap, size_t need, size_t size)
{
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *g = realloc(*p, c * size);
    if (!g) return -1;
    *p = g, *cap = c;
    return 0;
}

int tok_grow(int32_t **ids, size_t *cap) { return tok_grow_size((void **)ids, cap, *cap + 1, sizeof **ids); }

void tok_drop(struct bytes *b) { free(b->p), memset(b, 0, sizeof *b); }
