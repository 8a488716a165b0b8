/* tok_bpe.h -- the BPE model of a tokenizer (tokenizer.h): a vocabulary of
 * strings and a ranked list of merges, applied to one pre-tokenized word at
 * a time as Hugging Face's tokenizers library does (its BPE model, word.rs):
 * the word's characters become symbols, then the adjacent pair of lowest
 * merge rank (leftmost among equals) is merged until none is left.  A
 * character outside the vocabulary becomes its UTF-8 bytes as <0xNN>
 * tokens (byte_fallback), or the unknown token (fused with its neighbours
 * if fuse_unk).  With ignore_merges a word that is itself in the
 * vocabulary is that token. */
#ifndef TRIAD_TOK_BPE_H
#define TRIAD_TOK_BPE_H

#include <stddef.h>
#include <stdint.h>

/* Ids at most TOK_MAX_IDS - 1: model.vocab_size's bound (the largest real
 * vocabularies hold about 262,144), so that a damaged id cannot make the
 * tables that ids index take gigabytes. */
#define TOK_MAX_IDS (1 << 24)

/* A string -> id table (open addressing); the strings are copied. */
struct tok_map {
    char **key;
    size_t *klen;
    int32_t *val;
    size_t cap, n;
};
int tok_map_put(struct tok_map *m, const char *s, size_t len, int32_t v); /* -1: out of memory */
int32_t tok_map_get(const struct tok_map *m, const char *s, size_t len);  /* -1 if absent */
void tok_map_free(struct tok_map *m);

struct bpe {
    struct tok_map vocab;
    char **token;       /* id -> its string (NULL for an id the vocabulary skips) */
    size_t *token_len;
    int32_t nid;        /* ids 0 .. nid-1 */
    uint64_t *pair;     /* merges: key (left id << 32 | right id), open addressing */
    int32_t *pair_rank, *pair_new;
    size_t pair_cap;
    int32_t unk;        /* the unknown token's id, or -1 */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_id[256]; /* <0xNN>'s id, or -1 */
};

/* Add an id's string (the vocabulary), then the merges in rank order. */
int bpe_add_token(struct bpe *b, const char *s, size_t len, int32_t id, char *err, size_t errlen);
int bpe_add_merge(struct bpe *b, const char *left, size_t llen, const char *right, size_t rlen, int32_t rank,
                  char *err, size_t errlen);
/* After the vocabulary: the <0xNN> ids. */
void bpe_index_bytes(struct bpe *b);
/* The ids of one word (UTF-8, len bytes), appended to *ids (grown as needed). */
int bpe_word(const struct bpe *b, const char *w, size_t len, int32_t **ids, size_t *n, size_t *cap);
void bpe_free(struct bpe *b);

#endif
