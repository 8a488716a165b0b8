/* tok_bpe.c -- the BPE model (tok_bpe.h). */
#include "tok_bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "log.h"

/* ------------------------------------------------------------ string -> id */

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = fnv1a(FNV1A_INIT, s, len);
    return h ^ (h >> 29);
}

static int map_grow(struct tok_map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 1024;
    struct tok_map g = {calloc(cap, sizeof *g.key), calloc(cap, sizeof *g.klen), calloc(cap, sizeof *g.val), cap, 0};
    if (!g.key || !g.klen || !g.val) return free(g.key), free(g.klen), free(g.val), -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->key[i]) {
            size_t j = hash_bytes(m->key[i], m->klen[i]) & (cap - 1);
            while (g.key[j]) j = (j + 1) & (cap - 1);
            g.key[j] = m->key[i], g.klen[j] = m->klen[i], g.val[j] = m->val[i], g.n++;
        }
    free(m->key), free(m->klen), free(m->val);
    *m = g;
    return 0;
}

int tok_map_put(struct tok_map *m, const char *s, size_t len, int32_t v)
{
    if (2 * (m->n + 1) > m->cap && map_grow(m) != 0) return -1;
    size_t j = hash_bytes(s, len) & (m->cap - 1);
    while (m->key[j] && !(m->klen[j] == len && memcmp(m->key[j], s, len) == 0)) j = (j + 1) & (m->cap - 1);
    if (!m->key[j]) {
        if (!(m->key[j] = malloc(len + 1))) return -1;
        memcpy(m->key[j], s, len);
        m->key[j][len] = 0;
        m->klen[j] = len;
        m->n++;
    }
    m->val[j] = v;
    return 0;
}

int32_t tok_map_get(const struct tok_map *m, const char *s, size_t len)
{
    if (!m->cap) return -1;
    size_t j = hash_bytes(s, len) & (m->cap - 1);
    while (m->key[j]) {
        if (m->klen[j] == len && memcmp(m->key[j], s, len) == 0) return m->val[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void tok_map_free(struct tok_map *m)
{
    for (size_t i = 0; i < m->cap; i++) free(m->key[i]);
    free(m->key), free(m->klen), free(m->val);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ the model */

int bpe_add_token(struct bpe *b, const char *s, size_t len, int32_t id, char *err, size_t errlen)
{
    if (id < 0 || id >= TOK_MAX_IDS)
        return errorf(err, errlen, "the vocabulary's token '%.60s' has id %d, outside 0 .. %d (model.vocab_size's "
                      "bound; the largest real vocabularies hold about 262,144): the file is damaged", s, id,
                      TOK_MAX_IDS - 1);
    if (id >= b->nid) {
        size_t n = (size_t)id + 1;
        char **t = realloc(b->token, n * sizeof *t);
        size_t *l = t ? realloc(b->token_len, n * sizeof *l) : NULL;
        if (t) b->token = t;
        if (!t || !l) return errorf(err, errlen, "out of memory");
        b->token_len = l;
        memset(b->token + b->nid, 0, (n - (size_t)b->nid) * sizeof *t);
        memset(b->token_len + b->nid, 0, (n - (size_t)b->nid) * sizeof *l);
        b->nid = id + 1;
    }
    if (b->token[id]) return errorf(err, errlen, "the vocabulary gives id %d twice ('%.60s')", id, s);
    if (tok_map_get(&b->vocab, s, len) >= 0)
        return errorf(err, errlen, "the vocabulary holds the token '%.60s' twice", s);
    if (!(b->token[id] = malloc(len + 1)) || tok_map_put(&b->vocab, s, len, id) != 0)
        return errorf(err, errlen, "out of memory");
    memcpy(b->token[id], s, len);
    b->token[id][len] = 0;
    b->token_len[id] = len;
    return 0;
}

static size_t pair_slot(const struct bpe *b, uint64_t key)
{
    size_t j = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (b->pair_cap - 1);
    while (b->pair[j] != UINT64_MAX && b->pair[j] != key) j = (j + 1) & (b->pair_cap - 1);
    return j;
}

int bpe_add_merge(struct bpe *b, const char *left, size_t llen, const char *right, size_t rlen, int32_t rank,
                  char *err, size_t errlen)
{
    int32_t l = tok_map_get(&b->vocab, left, llen), r = tok_map_get(&b->vocab, right, rlen);
    char *joined = malloc(llen + rlen + 1);
    if (!joined) return errorf(err, errlen, "out of memory");
    memcpy(joined, left, llen);
    memcpy(joined + llen, right, rlen);
    int32_t id = tok_map_get(&b->vocab, joined, llen + rlen);
    free(joined);
    if (l < 0 || r < 0 || id < 0)
        return errorf(err, errlen, "merge %d ('%.*s' '%.*s') names a token outside the vocabulary", rank, (int)llen,
                      left, (int)rlen, right);
    if (2 * ((size_t)rank + 1) > b->pair_cap) { /* rehash (the ranks come in order: rank + 1 pairs so far) */
        size_t cap = b->pair_cap ? 2 * b->pair_cap : 4096;
        struct bpe g = {.pair = malloc(cap * sizeof(uint64_t)), .pair_rank = malloc(cap * sizeof(int32_t)),
                        .pair_new = malloc(cap * sizeof(int32_t)), .pair_cap = cap};
        if (!g.pair || !g.pair_rank || !g.pair_new) {
            free(g.pair), free(g.pair_rank), free(g.pair_new);
            return errorf(err, errlen, "out of memory");
        }
        memset(g.pair, 0xff, cap * sizeof(uint64_t));
        for (size_t i = 0; i < b->pair_cap; i++)
            if (b->pair[i] != UINT64_MAX) {
                size_t j = pair_slot(&g, b->pair[i]);
                g.pair[j] = b->pair[i], g.pair_rank[j] = b->pair_rank[i], g.pair_new[j] = b->pair_new[i];
            }
        free(b->pair), free(b->pair_rank), free(b->pair_new);
        b->pair = g.pair, b->pair_rank = g.pair_rank, b->pair_new = g.pair_new, b->pair_cap = cap;
    }
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    size_t j = pair_slot(b, key);
    b->pair[j] = key, b->pair_rank[j] = rank, b->pair_new[j] = id; /* (a repeated merge: its last rank, as the library's map) */
    return 0;
}

void bpe_index_bytes(struct bpe *b)
{
    for (int i = 0; i < 256; i++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", i);
        b->byte_id[i] = tok_map_get(&b->vocab, s, 6);
    }
}

/* The merge of (l, r): its rank and the new id, or 0. */
static int find_merge(const struct bpe *b, int32_t l, int32_t r, int32_t *rank, int32_t *id)
{
    if (!b->pair_cap) return 0;
    uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    size_t j = pair_slot(b, key);
    if (b->pair[j] != key) return 0;
    *rank = b->pair_rank[j], *id = b->pair_new[j];
    return 1;
}

struct symbol {
    int32_t id;
    int prev, next, alive;
};
struct merge {
    int32_t rank, id;
    int pos;
};

/* The heap's order: lower rank first, then the leftmost. */
static int before(const struct merge *a, const struct merge *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}
static void heap_push(struct merge *h, int *n, struct merge m)
{
    int i = (*n)++;
    for (; i > 0 && before(&m, &h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = m;
}
static struct merge heap_pop(struct merge *h, int *n)
{
    struct merge top = h[0], last = h[--*n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(&h[c + 1], &h[c])) c++;
        if (!before(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static int utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

static int push_id(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        int32_t *g = realloc(*ids, c * sizeof *g);
        if (!g) return -1;
        *ids = g, *cap = c;
    }
    (*ids)[(*n)++] = id;
    return 0;
}

int bpe_word(const struct bpe *b, const char *w, size_t len, int32_t **ids, size_t *n, size_t *cap)
{
    if (len == 0) return 0;
    if (b->ignore_merges) {
        int32_t id = tok_map_get(&b->vocab, w, len);
        if (id >= 0) return push_id(ids, n, cap, id);
    }
    struct symbol *s = malloc((len + 1) * sizeof *s);
    struct merge *heap = malloc((len + 1) * 2 * sizeof *heap); /* (at most symbols + merges entries at once) */
    if (!s || !heap) return free(s), free(heap), -1;
    int ns = 0, nheap = 0, unk_pending = 0;
    for (size_t i = 0; i < len;) { /* the characters as symbols */
        size_t cl = (size_t)utf8_len((unsigned char)w[i]);
        if (cl > len - i) cl = len - i;
        int32_t id = tok_map_get(&b->vocab, w + i, cl);
        if (id >= 0) {
            if (unk_pending) s[ns++] = (struct symbol){b->unk, 0, 0, 1}, unk_pending = 0;
            s[ns++] = (struct symbol){id, 0, 0, 1};
        } else {
            int all = b->byte_fallback;
            for (size_t k = 0; k < cl && all; k++) all = b->byte_id[(unsigned char)w[i + k]] >= 0;
            if (all) { /* (a pending unknown is not flushed first: the library's order) */
                for (size_t k = 0; k < cl; k++) s[ns++] = (struct symbol){b->byte_id[(unsigned char)w[i + k]], 0, 0, 1};
            } else if (b->unk >= 0) {
                if (unk_pending && !b->fuse_unk) s[ns++] = (struct symbol){b->unk, 0, 0, 1};
                unk_pending = 1;
            }
        }
        i += cl;
    }
    if (unk_pending) s[ns++] = (struct symbol){b->unk, 0, 0, 1};
    for (int i = 0; i < ns; i++) s[i].prev = i - 1, s[i].next = i + 1 < ns ? i + 1 : -1;
    int32_t rank, id;
    for (int i = 0; i + 1 < ns; i++)
        if (find_merge(b, s[i].id, s[i + 1].id, &rank, &id)) heap_push(heap, &nheap, (struct merge){rank, id, i});
    while (nheap > 0) {
        struct merge top = heap_pop(heap, &nheap);
        struct symbol *cur = &s[top.pos];
        if (!cur->alive || cur->next < 0) continue;
        struct symbol *right = &s[cur->next];
        if (!find_merge(b, cur->id, right->id, &rank, &id) || id != top.id) continue; /* stale */
        cur->id = top.id;
        right->alive = 0;
        cur->next = right->next;
        if (right->next >= 0) s[right->next].prev = top.pos;
        if (cur->prev >= 0 && find_merge(b, s[cur->prev].id, cur->id, &rank, &id))
            heap_push(heap, &nheap, (struct merge){rank, id, cur->prev});
        if (cur->next >= 0 && find_merge(b, cur->id, s[cur->next].id, &rank, &id))
            heap_push(heap, &nheap, (struct merge){rank, id, top.pos});
    }
    int rc = 0;
    for (int i = 0; i >= 0 && i < ns && rc == 0; i = s[i].next) rc = push_id(ids, n, cap, s[i].id);
    free(s);
    free(heap);
    return rc;
}

void bpe_free(struct bpe *b)
{
    tok_map_free(&b->vocab);
    for (int32_t i = 0; i < b->nid; i++) free(b->token[i]);
    free(b->token), free(b->token_len);
    free(b->pair), free(b->pair_rank), free(b->pair_new);
    memset(b, 0, sizeof *b);
}
