/* tok_load.c -- a tokenizer.json (or GPT-2's vocab.json + merges.txt) read
 * into the pipeline of tokenizer.c.  Every component is checked against
 * what triad implements; anything else is refused by name. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file.h"
#include "json.h"
#include "log.h"
#include "tok_unicode.h"
#include "tokenizer_internal.h"

enum { TOK_FILE_MAX = 256 << 20 }; /* a tokenizer.json of over 256 MiB is not one */

/* GPT-2's pre-tokenizer regex (ByteLevel's use_regex). */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

struct loader {
    const char *path;
    char *err;
    size_t errlen;
};

static int refuse(const struct loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(const struct loader *L, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return errorf(L->err, L->errlen, "%s: %s", L->path, what);
}

static const char *str_of(const struct json *o, const char *key)
{
    const struct json *v = json_get(o, key);
    return v && v->kind == JSON_STRING ? v->string : NULL;
}

/* A switch: absent or null is def; anything but true/false is an error. */
static int flag(const struct loader *L, const struct json *o, const char *what, const char *key, int def, int *out)
{
    const struct json *v = json_get(o, key);
    if (!v || v->kind == JSON_NULL) return *out = def, 0;
    if (v->kind != JSON_TRUE && v->kind != JSON_FALSE) return refuse(L, "%s: \"%s\" is not true or false", what, key);
    *out = v->kind == JSON_TRUE;
    return 0;
}

static int set_bytes(struct bytes *b, const char *s) { return tok_put(b, s, strlen(s)); }

/* A Split regex compiled with the library's Unicode classes (tok_unicode.h);
 * an error names the place in the file's own pattern. */
static int compile(const struct loader *L, const char *pattern, pcre2_code **re)
{
    int code;
    PCRE2_SIZE at;
    char *ours = NULL, why[400];
    *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
    if (*re) {
        pcre2_code_free(*re);
        if (tok_regex_for_pcre2(pattern, &ours, why, sizeof why)) return *re = NULL, refuse(L, "%s", why);
        *re = pcre2_compile((PCRE2_SPTR)ours, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
        free(ours);
        if (!*re && code != PCRE2_ERROR_HEAP_FAILED) /* (its offset is in the rewritten text, not the file's) */
            return refuse(L, "the Split regex, its classes rewritten as the library's Unicode, does not compile: a "
                          "construct triad does not rewrite (please report the pattern)");
    }
    if (!*re && code == PCRE2_ERROR_HEAP_FAILED) return refuse(L, "out of memory compiling a pre-tokenizer's regex");
    if (!*re) {
        PCRE2_UCHAR msg[200];
        pcre2_get_error_message(code, msg, sizeof msg);
        return refuse(L, "the Split regex does not compile at offset %zu: %s", (size_t)at, (char *)msg);
    }
    pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE); /* (without JIT, the interpreter: the same matches) */
    return 0;
}

/* ------------------------------------------------------------ the components */

static int load_normalizer(struct tokenizer *t, const struct loader *L, const struct json *n)
{
    if (!n || n->kind == JSON_NULL) return 0;
    const char *type = str_of(n, "type");
    if (!type) return refuse(L, "a normalizer without a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const struct json *list = json_get(n, "normalizers");
        if (!list || list->kind != JSON_ARRAY) return refuse(L, "normalizer Sequence without \"normalizers\"");
        for (int i = 0; i < list->n; i++)
            if (load_normalizer(t, L, &list->item[i])) return -1;
        return 0;
    }
    if (t->nnorm == MAX_STEPS) return refuse(L, "more than %d normalizers", MAX_STEPS);
    struct norm_step *s = &t->norm[t->nnorm];
    static const char *const forms[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int k = 0; k < 4; k++)
        if (strcmp(type, forms[k]) == 0) return s->kind = (enum norm_kind)k, t->nnorm++, 0;
    if (strcmp(type, "Prepend") == 0) {
        const char *p = str_of(n, "prepend");
        if (!p) return refuse(L, "normalizer Prepend without a \"prepend\" string");
        s->kind = NORM_PREPEND;
        return set_bytes(&s->a, p) ? refuse(L, "out of memory") : (t->nnorm++, 0);
    }
    if (strcmp(type, "Replace") == 0) {
        const char *from = str_of(json_get(n, "pattern"), "String"), *to = str_of(n, "content");
        if (json_get(json_get(n, "pattern"), "Regex"))
            return refuse(L, "normalizer Replace with a Regex pattern: triad implements Replace of a String");
        if (!from || !to) return refuse(L, "normalizer Replace needs a \"pattern\" {\"String\"} and a \"content\"");
        s->kind = NORM_REPLACE;
        t->nnorm++; /* (counted first: tok_close frees what the step holds) */
        return set_bytes(&s->a, from) || set_bytes(&s->b, to) ? refuse(L, "out of memory") : 0;
    }
    return refuse(L, "normalizer %.40s: triad implements NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence", type);
}

static int load_pre(struct tokenizer *t, const struct loader *L, const struct json *p)
{
    if (!p || p->kind == JSON_NULL) return 0;
    const char *type = str_of(p, "type");
    if (!type) return refuse(L, "a pre_tokenizer without a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const struct json *list = json_get(p, "pretokenizers");
        if (!list || list->kind != JSON_ARRAY) return refuse(L, "pre_tokenizer Sequence without \"pretokenizers\"");
        for (int i = 0; i < list->n; i++)
            if (load_pre(t, L, &list->item[i])) return -1;
        return 0;
    }
    if (t->npre == MAX_STEPS) return refuse(L, "more than %d pre_tokenizers", MAX_STEPS);
    struct pre_step *s = &t->pre[t->npre];
    if (strcmp(type, "ByteLevel") == 0) {
        int regex = 1;
        if (flag(L, p, "pre_tokenizer ByteLevel", "add_prefix_space", 1, &s->add_prefix_space) ||
            flag(L, p, "pre_tokenizer ByteLevel", "use_regex", 1, &regex))
            return -1;
        s->kind = PRE_BYTELEVEL;
        s->how = SPLIT_ISOLATED;
        if (regex && compile(L, gpt2_regex, &s->re)) return -1;
        t->npre++;
        return 0;
    }
    if (strcmp(type, "Split") == 0) {
        const struct json *pat = json_get(p, "pattern");
        const char *re = str_of(pat, "Regex"), *lit = str_of(pat, "String"), *how = str_of(p, "behavior");
        int invert = 0;
        if (flag(L, p, "pre_tokenizer Split", "invert", 0, &invert)) return -1;
        if (invert) return refuse(L, "pre_tokenizer Split with \"invert\": true: triad implements invert false");
        static const char *const hows[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext"};
        int k = 0;
        while (how && k < 4 && strcmp(how, hows[k]) != 0) k++;
        if (!how || k == 4)
            return refuse(L, "pre_tokenizer Split with behavior %.40s: triad implements Isolated, Removed, "
                          "MergedWithPrevious and MergedWithNext", how ? how : "(none)");
        if (!re && !lit) return refuse(L, "pre_tokenizer Split needs a \"pattern\" {\"Regex\"} or {\"String\"}");
        s->kind = PRE_SPLIT;
        s->how = (enum split_how)k;
        if (re ? compile(L, re, &s->re) : set_bytes(&s->literal, lit)) return -1;
        t->npre++;
        return 0;
    }
    return refuse(L, "pre_tokenizer %.40s: triad implements Split, ByteLevel and Sequence", type);
}

/* The single-sequence template: its special tokens' ids around the sequence. */
static int load_post(struct tokenizer *t, const struct loader *L, const struct json *p)
{
    if (!p || p->kind == JSON_NULL) return 0;
    const char *type = str_of(p, "type");
    if (!type) return refuse(L, "a post_processor without a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const struct json *list = json_get(p, "processors");
        if (!list || list->kind != JSON_ARRAY) return refuse(L, "post_processor Sequence without \"processors\"");
        for (int i = 0; i < list->n; i++)
            if (load_post(t, L, &list->item[i])) return -1;
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) return 0; /* (offsets only: the ids stay) */
    if (strcmp(type, "TemplateProcessing") != 0)
        return refuse(L, "post_processor %.40s: triad implements TemplateProcessing, ByteLevel and Sequence", type);
    const struct json *single = json_get(p, "single"), *special = json_get(p, "special_tokens");
    if (!single || single->kind != JSON_ARRAY) return refuse(L, "TemplateProcessing without a \"single\" template");
    t->ntmpl = 0;
    for (int i = 0; i < single->n; i++) {
        const struct json *sp = json_get(&single->item[i], "SpecialToken"), *seq = json_get(&single->item[i], "Sequence");
        if (seq) {
            if (t->ntmpl == MAX_TEMPLATE) return refuse(L, "a template of over %d pieces", MAX_TEMPLATE);
            t->tmpl[t->ntmpl++] = -1;
            continue;
        }
        const char *name = str_of(sp, "id");
        const struct json *ids = json_get(json_get(special, name ? name : ""), "ids");
        if (!name || !ids || ids->kind != JSON_ARRAY)
            return refuse(L, "TemplateProcessing: the special token %.60s is not in \"special_tokens\"", name ? name : "?");
        for (int k = 0; k < ids->n; k++) {
            long long id = (long long)ids->item[k].number;
            if (ids->item[k].kind != JSON_NUMBER || id < 0 || id != ids->item[k].number || id >= TOK_MAX_IDS)
                return refuse(L, "TemplateProcessing: special token %.60s has an id that is not one", name);
            if (t->ntmpl == MAX_TEMPLATE) return refuse(L, "a template of over %d pieces", MAX_TEMPLATE);
            t->tmpl[t->ntmpl++] = (int32_t)id;
        }
    }
    int seqs = 0;
    for (int i = 0; i < t->ntmpl; i++) seqs += t->tmpl[i] < 0;
    if (seqs != 1) return refuse(L, "TemplateProcessing's single template holds %d sequences, not one", seqs);
    return 0;
}

static int load_decoder(struct tokenizer *t, const struct loader *L, const struct json *d)
{
    if (!d || d->kind == JSON_NULL) return 0;
    const char *type = str_of(d, "type");
    if (!type) return refuse(L, "a decoder without a \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const struct json *list = json_get(d, "decoders");
        if (!list || list->kind != JSON_ARRAY) return refuse(L, "decoder Sequence without \"decoders\"");
        for (int i = 0; i < list->n; i++)
            if (load_decoder(t, L, &list->item[i])) return -1;
        return 0;
    }
    if (t->ndec == MAX_STEPS) return refuse(L, "more than %d decoders", MAX_STEPS);
    struct dec_step *s = &t->dec[t->ndec];
    if (strcmp(type, "ByteLevel") == 0) s->kind = DEC_BYTELEVEL;
    else if (strcmp(type, "ByteFallback") == 0) s->kind = DEC_BYTEFALLBACK;
    else if (strcmp(type, "Fuse") == 0) s->kind = DEC_FUSE;
    else if (strcmp(type, "Replace") == 0) {
        const char *from = str_of(json_get(d, "pattern"), "String"), *to = str_of(d, "content");
        if (!from || !to) return refuse(L, "decoder Replace needs a \"pattern\" {\"String\"} and a \"content\"");
        s->kind = DEC_REPLACE;
        if (set_bytes(&s->a, from) || set_bytes(&s->b, to)) {
            t->ndec++; /* (counted: tok_close frees what the step holds) */
            return refuse(L, "out of memory");
        }
    } else if (strcmp(type, "Strip") == 0) {
        const char *c = str_of(d, "content");
        const struct json *a = json_get(d, "start"), *b = json_get(d, "stop");
        if (!c || !a || !b || a->kind != JSON_NUMBER || b->kind != JSON_NUMBER || a->number < 0 || b->number < 0 ||
            a->number > 1e6 || b->number > 1e6)
            return refuse(L, "decoder Strip needs a \"content\" and counts \"start\" and \"stop\"");
        s->kind = DEC_STRIP;
        s->start = (int)a->number, s->stop = (int)b->number;
        if (set_bytes(&s->a, c)) return refuse(L, "out of memory");
    } else {
        return refuse(L, "decoder %.40s: triad implements ByteLevel, Replace, ByteFallback, Fuse, Strip and Sequence",
                      type);
    }
    t->ndec++;
    return 0;
}

/* ------------------------------------------------------------ the model and the added tokens */

static int load_bpe(struct tokenizer *t, const struct loader *L, const struct json *m)
{
    const char *type = str_of(m, "type");
    if (!type || strcmp(type, "BPE") != 0)
        return refuse(L, "model %.40s: triad implements the BPE model", type ? type : "(none)");
    const struct json *drop = json_get(m, "dropout");
    if (drop && drop->kind != JSON_NULL && !(drop->kind == JSON_NUMBER && drop->number == 0))
        return refuse(L, "BPE with dropout: triad tokenizes deterministically (dropout null)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const struct json *v = json_get(m, affixes[i]);
        if (v && v->kind != JSON_NULL && !(v->kind == JSON_STRING && !v->string[0]))
            return refuse(L, "BPE with a %s: triad implements none", affixes[i]);
    }
    struct bpe *b = &t->bpe;
    if (flag(L, m, "BPE", "byte_fallback", 0, &b->byte_fallback) || flag(L, m, "BPE", "fuse_unk", 0, &b->fuse_unk) ||
        flag(L, m, "BPE", "ignore_merges", 0, &b->ignore_merges))
        return -1;
    const struct json *vocab = json_get(m, "vocab"), *merges = json_get(m, "merges");
    if (!vocab || vocab->kind != JSON_OBJECT) return refuse(L, "BPE without a \"vocab\" object");
    if (!merges || merges->kind != JSON_ARRAY) return refuse(L, "BPE without a \"merges\" list");
    for (int i = 0; i < vocab->n; i++) {
        const struct json *v = &vocab->item[i];
        if (v->kind != JSON_NUMBER || v->number < 0 || v->number != (double)(int32_t)v->number)
            return refuse(L, "vocab['%.60s'] is not an id", vocab->key[i]);
        char why[300];
        if (bpe_add_token(b, vocab->key[i], strlen(vocab->key[i]), (int32_t)v->number, why, sizeof why))
            return refuse(L, "%s", why);
    }
    for (int i = 0; i < merges->n; i++) {
        const struct json *v = &merges->item[i];
        const char *l = NULL, *r = NULL;
        size_t ll = 0, rl = 0;
        if (v->kind == JSON_STRING) { /* "left right" */
            const char *sp = strchr(v->string, ' ');
            if (sp && !strchr(sp + 1, ' ')) l = v->string, ll = (size_t)(sp - v->string), r = sp + 1, rl = strlen(r);
        } else if (v->kind == JSON_ARRAY && v->n == 2 && v->item[0].kind == JSON_STRING && v->item[1].kind == JSON_STRING) {
            l = v->item[0].string, ll = strlen(l), r = v->item[1].string, rl = strlen(r);
        }
        if (!l) return refuse(L, "merges[%d] is not a pair of tokens (\"a b\" or [\"a\", \"b\"])", i);
        char why[300];
        if (bpe_add_merge(b, l, ll, r, rl, i, why, sizeof why)) return refuse(L, "%s", why);
    }
    const char *unk = str_of(m, "unk_token");
    b->unk = unk ? tok_map_get(&b->vocab, unk, strlen(unk)) : -1;
    if (unk && b->unk < 0) return refuse(L, "BPE's unk_token '%.60s' is not in its vocabulary", unk);
    bpe_index_bytes(b);
    if (b->byte_fallback)
        for (int i = 0; i < 256; i++)
            if (b->byte_id[i] < 0) return refuse(L, "BPE with byte_fallback, but <0x%02X> is not in its vocabulary", i);
    return 0;
}

/* The bucket of an added token: its first two bytes, or 65536 for one byte. */
static unsigned added_key(const struct bytes *s)
{
    return s->n > 1 ? (unsigned)((unsigned char)s->p[0] << 8 | (unsigned char)s->p[1]) : 65536u;
}

static int cmp_added(const void *a, const void *b)
{
    const struct bytes *x = &((const struct added *)a)->s, *y = &((const struct added *)b)->s;
    unsigned kx = added_key(x), ky = added_key(y);
    return kx != ky ? (kx < ky ? -1 : 1) : (x->n < y->n) - (x->n > y->n); /* longest first */
}

/* The added tokens sorted into their buckets (first2), for added_at. */
static void index_added(struct tokenizer *t)
{
    qsort(t->added, (size_t)t->nadded, sizeof *t->added, cmp_added);
    for (unsigned k = 0, i = 0; k <= 65536; k++) {
        while (i < (unsigned)t->nadded && added_key(&t->added[i].s) < k) i++;
        t->first2[k] = (int)i;
    }
}

static int load_added(struct tokenizer *t, const struct loader *L, const struct json *list, int identity_norm)
{
    if (!list || list->kind == JSON_NULL) return 0;
    if (list->kind != JSON_ARRAY) return refuse(L, "\"added_tokens\" is not a list");
    t->added = calloc((size_t)list->n + 1, sizeof *t->added);
    if (!t->added) return refuse(L, "out of memory");
    for (int i = 0; i < list->n; i++) {
        const struct json *a = &list->item[i], *id = json_get(a, "id");
        const char *content = str_of(a, "content");
        if (!content || !content[0] || !id || id->kind != JSON_NUMBER || id->number < 0 || id->number >= TOK_MAX_IDS ||
            id->number != (double)(int32_t)id->number)
            return refuse(L, "added_tokens[%d] needs a \"content\" and an \"id\"", i);
        static const char *const unsupported[] = {"single_word", "lstrip", "rstrip"};
        for (int k = 0; k < 3; k++) {
            int on = 0;
            if (flag(L, a, "an added token", unsupported[k], 0, &on)) return -1;
            if (on) return refuse(L, "added token '%.60s' has %s: true: triad implements added tokens without it",
                                  content, unsupported[k]);
        }
        int normalized = 0, special = 0;
        if (flag(L, a, "an added token", "normalized", 0, &normalized) || flag(L, a, "an added token", "special", 0, &special))
            return -1;
        if (normalized && !identity_norm)
            return refuse(L, "added token '%.60s' is matched after normalization (\"normalized\": true): triad "
                          "implements added tokens matched on the text as written", content);
        struct added *d = &t->added[t->nadded++];
        d->id = (int32_t)id->number;
        d->special = special;
        if (set_bytes(&d->s, content)) return refuse(L, "out of memory");
        if (d->id >= t->nid) t->nid = d->id + 1;
    }
    index_added(t);
    return 0;
}

/* The id of the first of names that is an added token, or -1. */
static int32_t added_named(const struct tokenizer *t, const char *const *names)
{
    for (; *names; names++)
        for (int i = 0; i < t->nadded; i++)
            if (t->added[i].s.p && strcmp(t->added[i].s.p, *names) == 0) return t->added[i].id;
    return -1;
}

/* ------------------------------------------------------------ the files */

static struct json *read_json_file(const struct loader *L, const char *path)
{
    struct json *j;
    json_read_file(path, TOK_FILE_MAX, "a tokenizer file", &j, L->err, L->errlen);
    return j;
}

static int load_tokenizer_json(struct tokenizer *t, const struct loader *L)
{
    struct json *j = read_json_file(L, L->path);
    if (!j) return -1;
    static const char *const unused[] = {"truncation", "padding"};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        const struct json *v = json_get(j, unused[i]);
        if (v && v->kind != JSON_NULL) rc = refuse(L, "\"%s\" is set: triad encodes whole texts (set it to null)", unused[i]);
    }
    const struct json *norm = json_get(j, "normalizer");
    if (rc == 0) rc = load_bpe(t, L, json_get(j, "model"));
    if (rc == 0) rc = load_normalizer(t, L, norm);
    if (rc == 0) rc = load_added(t, L, json_get(j, "added_tokens"), t->nnorm == 0);
    if (rc == 0) rc = load_pre(t, L, json_get(j, "pre_tokenizer"));
    if (rc == 0) rc = load_post(t, L, json_get(j, "post_processor"));
    if (rc == 0) rc = load_decoder(t, L, json_get(j, "decoder"));
    json_free(j);
    return rc;
}

/* GPT-2's vocab.json and merges.txt: byte-level BPE with GPT-2's regex,
 * <|endoftext|> an added special token, as GPT2TokenizerFast builds it. */
static int load_gpt2_files(struct tokenizer *t, const struct loader *L, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/vocab.json", dir);
    struct loader V = {path, L->err, L->errlen};
    struct json *vocab = read_json_file(&V, path);
    if (!vocab) return -1;
    struct json model = {.kind = JSON_OBJECT}, merges = {.kind = JSON_ARRAY};
    snprintf(path, sizeof path, "%s/merges.txt", dir);
    struct loader M = {path, L->err, L->errlen};
    char *text = NULL, why[256];
    size_t len = 0;
    int rc = file_read_all(path, TOK_FILE_MAX, "a tokenizer file", &text, &len, why, sizeof why)
                 ? errorf(L->err, L->errlen, "%s: %s", path, why) : 0;
    /* the merges as JSON strings "a b", one a line, after the #version line */
    int lines = 0;
    for (size_t i = 0; rc == 0 && i < len; i++) lines += text[i] == '\n';
    merges.item = rc == 0 ? calloc((size_t)lines + 1, sizeof *merges.item) : NULL;
    if (rc == 0 && !merges.item) rc = refuse(&M, "out of memory for its %d lines", lines);
    for (char *line = rc == 0 ? strtok(text, "\n") : NULL; line && merges.item; line = strtok(NULL, "\n")) {
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r') line[--l] = 0;
        if (l == 0 || strncmp(line, "#version", 8) == 0) continue;
        merges.item[merges.n].kind = JSON_STRING;
        merges.item[merges.n++].string = line;
    }
    const char *keys[] = {"type", "vocab", "merges"};
    struct json items[3] = {{.kind = JSON_STRING, .string = "BPE"}, *vocab, merges};
    model.n = 3, model.key = (char **)keys, model.item = items;
    if (rc == 0) rc = load_bpe(t, &V, &model);
    free(merges.item);
    free(text);
    json_free(vocab);
    struct json bl = {.kind = JSON_OBJECT};
    const char *bkeys[] = {"type", "add_prefix_space"};
    struct json bitems[2] = {{.kind = JSON_STRING, .string = "ByteLevel"}, {.kind = JSON_FALSE}};
    bl.n = 2, bl.key = (char **)bkeys, bl.item = bitems;
    if (rc == 0) rc = load_pre(t, L, &bl);
    if (rc == 0) rc = load_decoder(t, L, &bl);
    int32_t eot = tok_map_get(&t->bpe.vocab, "<|endoftext|>", 13);
    if (rc == 0 && eot >= 0) {
        t->added = calloc(1, sizeof *t->added);
        if (!t->added || set_bytes(&t->added[0].s, "<|endoftext|>")) return refuse(L, "out of memory");
        t->added[0].id = eot, t->added[0].special = 1, t->nadded = 1;
        index_added(t);
    }
    return rc;
}

struct tokenizer *tok_open(const char *path, char *err, size_t errlen)
{
    struct tokenizer *t = calloc(1, sizeof *t);
    if (!t) return errorf(err, errlen, "out of memory"), NULL;
    t->cache = calloc(1, sizeof *t->cache); /* (without one: the model for every word) */
    tok_byte_alphabet(t);
    struct stat sb;
    char file[4200];
    snprintf(file, sizeof file, "%s", path);
    int rc = stat(path, &sb) == 0 ? 0 : errorf(err, errlen, "%s: cannot read it (%s)", path, strerror(errno));
    int gpt2 = 0;
    if (rc == 0 && S_ISDIR(sb.st_mode)) { /* a folder: tokenizer.json, else vocab.json + merges.txt */
        snprintf(file, sizeof file, "%s/tokenizer.json", path);
        if (stat(file, &sb) != 0) {
            char v[4200], m[4200];
            snprintf(v, sizeof v, "%s/vocab.json", path);
            snprintf(m, sizeof m, "%s/merges.txt", path);
            gpt2 = stat(v, &sb) == 0 && stat(m, &sb) == 0;
            if (!gpt2)
                rc = errorf(err, errlen, "%s holds no tokenizer: a tokenizer.json, or GPT-2's vocab.json and merges.txt",
                            path);
        }
    }
    const char *llmc = rc == 0 && !S_ISDIR(sb.st_mode) ? file_llmc_kind_of(path) : NULL;
    if (llmc) rc = errorf(err, errlen, "%s is %s", path, llmc);
    struct loader L = {file, err, errlen};
    if (rc == 0) rc = gpt2 ? load_gpt2_files(t, &L, path) : load_tokenizer_json(t, &L);
    if (rc) return tok_close(t), NULL;
    if (t->bpe.nid > t->nid) t->nid = t->bpe.nid;
    /* a document's first and last ids: the template's, else the family's usual names */
    static const char *const bos[] = {"<|begin_of_text|>", "<s>", "<bos>", NULL};
    static const char *const eos[] = {"<|end_of_text|>", "<|endoftext|>", "</s>", "<eos>", NULL};
    t->bos = t->ntmpl > 0 && t->tmpl[0] >= 0 ? t->tmpl[0] : added_named(t, bos);
    t->eos = t->ntmpl > 0 && t->tmpl[t->ntmpl - 1] >= 0 ? t->tmpl[t->ntmpl - 1] : added_named(t, eos);
    return t;
}

void tok_close(struct tokenizer *t)
{
    if (!t) return;
    bpe_free(&t->bpe);
    if (t->cache) tok_map_free(&t->cache->map), free(t->cache->ids), free(t->cache->at), free(t->cache);
    for (int i = 0; i < t->nnorm; i++) tok_drop(&t->norm[i].a), tok_drop(&t->norm[i].b);
    for (int i = 0; i < t->npre; i++) pcre2_code_free(t->pre[i].re), tok_drop(&t->pre[i].literal);
    for (int i = 0; i < t->ndec; i++) tok_drop(&t->dec[i].a), tok_drop(&t->dec[i].b);
    for (int i = 0; i < t->nadded; i++) tok_drop(&t->added[i].s);
    free(t->added);
    free(t);
}
