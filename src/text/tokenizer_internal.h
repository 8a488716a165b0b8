/* tokenizer_internal.h -- the parts of a tokenizer's pipeline (tokenizer.h),
 * shared by the reader of tokenizer.json (tok_load.c) and the pipeline
 * (tokenizer.c). */
#ifndef TRIAD_TOKENIZER_INTERNAL_H
#define TRIAD_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tok_bpe.h"
#include "tok_bytes.h"
#include "tokenizer.h"


enum norm_kind { NORM_NFC, NORM_NFD, NORM_NFKC, NORM_NFKD, NORM_PREPEND, NORM_REPLACE };
struct norm_step {
    enum norm_kind kind;
    struct bytes a, b; /* Prepend: a; Replace: a -> b */
};

enum split_how { SPLIT_ISOLATED, SPLIT_REMOVED, SPLIT_WITH_PREVIOUS, SPLIT_WITH_NEXT };
enum pre_kind { PRE_SPLIT, PRE_BYTELEVEL };
struct pre_step {
    enum pre_kind kind;
    pcre2_code *re;       /* Split with a Regex, ByteLevel's use_regex */
    struct bytes literal; /* Split with a String */
    enum split_how how;
    int add_prefix_space;
};

enum dec_kind { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP };
struct dec_step {
    enum dec_kind kind;
    struct bytes a, b; /* Replace: a -> b; Strip: a is the character */
    int start, stop;
};

struct added {
    struct bytes s;
    int32_t id;
    int special;
};

enum { MAX_STEPS = 16, MAX_TEMPLATE = 16 };

/* Words seen before and their ids (the library keeps such a cache too):
 * most words of a text repeat. */
struct word_cache {
    struct tok_map map; /* word -> its entry */
    int32_t *ids;       /* every entry's ids, back to back */
    size_t *at, n, nids, cap_at, cap_ids;
};

struct tokenizer {
    struct bpe bpe;
    struct word_cache *cache; /* (mutable through a const tokenizer: one thread at a time) */
    struct norm_step norm[MAX_STEPS];
    struct pre_step pre[MAX_STEPS];
    struct dec_step dec[MAX_STEPS];
    int nnorm, npre, ndec;
    struct added *added;     /* sorted by (first two bytes, then longest first) */
    int nadded;
    int first2[65537];       /* added[first2[k] .. first2[k+1]) start with the two bytes k */
    int32_t tmpl[MAX_TEMPLATE]; /* the single-sequence template: ids, -1 for the sequence */
    int ntmpl;
    int32_t nid, bos, eos;
    uint32_t byte_char[256]; /* ByteLevel's alphabet: byte -> code point */
    int32_t char_byte[324];  /* and back (code points < 324), -1 if none */
};

/* GPT-2's byte alphabet into byte_char and char_byte. */
void tok_byte_alphabet(struct tokenizer *t);

#endif
