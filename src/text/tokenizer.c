/* tokenizer.c -- a tokenizer.json read into its pipeline, and the pipeline
 * run (tokenizer.h).  The component semantics follow Hugging Face's
 * tokenizers library; each function names the component it implements. */
#define _GNU_SOURCE /* memmem */
#include "tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "json.h"
#include "log.h"
#include "tok_unicode.h"
#include "tokenizer_internal.h"

/* ------------------------------------------------------------ small helpers */

static int put_cp(struct bytes *b, uint32_t cp)
{
    utf8proc_uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char((utf8proc_int32_t)cp, u);
    return tok_put(b, u, (size_t)k);
}

/* Python's str.isspace: general category Zs, or bidirectional class WS, B or S. */
static int is_space(utf8proc_int32_t cp)
{
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

size_t tok_rstrip(const char *text, size_t len)
{
    while (len > 0) {
        size_t at = len - 1;
        while (at > 0 && ((unsigned char)text[at] & 0xC0) == 0x80) at--; /* the last character's first byte */
        utf8proc_int32_t cp;
        if (utf8proc_iterate((const utf8proc_uint8_t *)text + at, (utf8proc_ssize_t)(len - at), &cp) !=
                (utf8proc_ssize_t)(len - at) ||
            !is_space(cp))
            break; /* (a character cut short is kept) */
        len = at;
    }
    return len;
}

size_t tok_lstrip(const char *text, size_t len)
{
    size_t at = 0;
    while (at < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + at, (utf8proc_ssize_t)(len - at), &cp);
        if (k <= 0 || !is_space(cp)) break;
        at += (size_t)k;
    }
    return at;
}

/* Text as the library's callers hand it over: each maximal ill-formed
 * subsequence (the WHATWG / Unicode "substitution of maximal subparts")
 * replaced by U+FFFD. */
static int well_formed(const char *s, size_t len, struct bytes *out)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        int need = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
        if (need == 0) {
            if (tok_put(out, p++, 1)) return -1;
            continue;
        }
        size_t k = 1;
        if (need > 0) { /* as many continuation bytes as fit the lead byte's range */
            unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
            while ((int)k <= need && p + k < end && p[k] >= (k == 1 ? lo : 0x80) && p[k] <= (k == 1 ? hi : 0xBF)) k++;
        }
        if (need > 0 && (int)k == need + 1) {
            if (tok_put(out, p, k)) return -1;
        } else if (tok_put(out, "\xEF\xBF\xBD", 3)) {
            return -1;
        }
        p += k;
    }
    return tok_put(out, "", 0);
}

/* GPT-2's byte alphabet: printable bytes stand for themselves, the rest are
 * shifted to U+0100 on, in byte order. */
void tok_byte_alphabet(struct tokenizer *t)
{
    int n = 0;
    for (int i = 0; i < 324; i++) t->char_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        t->byte_char[b] = printable ? (uint32_t)b : 256u + (uint32_t)n++;
        t->char_byte[t->byte_char[b]] = b;
    }
}

/* ------------------------------------------------------------ normalizers */

/* A normal form as the library computes it: with Unicode 9.0's data (its
 * unicode-normalization-alignments crate).  A character assigned later has
 * no decomposition and class 0 there, so it blocks reordering and
 * composition: the runs between such characters go through utf8proc, and
 * they are copied as they are. */
static int normal_form(enum norm_kind kind, const struct bytes *s, struct bytes *out)
{
    static const utf8proc_option_t form[] = {
        UTF8PROC_STABLE | UTF8PROC_COMPOSE, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE,
        UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT};
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s->p;
    utf8proc_ssize_t n = (utf8proc_ssize_t)s->n, from = 0, at = 0;
    int rc = tok_put(out, "", 0);
    while (rc == 0 && from < n) {
        utf8proc_int32_t cp = 0;
        utf8proc_ssize_t l = at < n ? utf8proc_iterate(p + at, n - at, &cp) : 0;
        if (l < 0) return -1; /* (well_formed made it UTF-8) */
        /* U+11A7 too: utf8proc 2.8 composes a Hangul LV syllable with it (the TBase, no trailing consonant)
         * and drops it; a class-0 starter without a decomposition, it is copied as it is, as the library does */
        if (at < n && (cp < 0x80 || (tok_unicode9((uint32_t)cp) && cp != 0x11A7))) { /* (ASCII: Unicode 1.1) */
            at += l;
            continue;
        }
        if (at > from) { /* the run of Unicode 9.0 characters */
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t k = utf8proc_map(p + from, at - from, &dst, form[kind]);
            rc = k < 0 ? -1 : tok_put(out, dst, (size_t)k);
            free(dst);
        }
        if (rc == 0 && at < n) rc = tok_put(out, p + at, (size_t)l); /* a later character, as it is */
        from = at = at + l;
    }
    return rc;
}

static int normalize(const struct tokenizer *t, struct bytes *s)
{
    for (int i = 0; i < t->nnorm; i++) {
        const struct norm_step *n = &t->norm[i];
        struct bytes out = {0};
        int rc = 0;
        if (n->kind <= NORM_NFKD) {
            rc = normal_form(n->kind, s, &out);
        } else if (n->kind == NORM_PREPEND) { /* Prepend: to a piece that is not empty */
            rc = s->n ? tok_put(&out, n->a.p, n->a.n) || tok_put(&out, s->p, s->n) : tok_put(&out, "", 0);
        } else { /* Replace: every occurrence of a string, left to right */
            for (size_t k = 0; k < s->n && rc == 0;) {
                if (n->a.n && k + n->a.n <= s->n && memcmp(s->p + k, n->a.p, n->a.n) == 0) {
                    rc = tok_put(&out, n->b.p, n->b.n);
                    k += n->a.n;
                } else {
                    rc = tok_put(&out, s->p + k++, 1);
                }
            }
            if (rc == 0) rc = tok_put(&out, "", 0);
        }
        if (rc) return tok_drop(&out), -1;
        tok_drop(s);
        *s = out;
    }
    return 0;
}

/* ------------------------------------------------------------ pre-tokenizers */

struct pieces {
    struct bytes *p;
    int n, cap;
};

static int add_piece(struct pieces *w, const char *s, size_t len)
{
    if (len == 0) return 0; /* (empty splits are dropped) */
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        struct bytes *g = realloc(w->p, (size_t)cap * sizeof *g);
        if (!g) return -1;
        w->p = g, w->cap = cap;
    }
    memset(&w->p[w->n], 0, sizeof w->p[0]);
    return tok_put(&w->p[w->n++], s, len);
}

static void free_pieces(struct pieces *w)
{
    for (int i = 0; i < w->n; i++) tok_drop(&w->p[i]);
    free(w->p);
    memset(w, 0, sizeof *w);
}

/* The matches of step p in s as [start, end) pairs (non-empty). */
static int find_matches(const struct pre_step *p, const struct bytes *s, size_t **m, int *nm, char *err, size_t errlen)
{
    int cap = 16;
    *nm = 0;
    *m = malloc((size_t)cap * 2 * sizeof **m);
    pcre2_match_data *md = p->re ? pcre2_match_data_create_from_pattern(p->re, NULL) : NULL;
    if (!*m || (p->re && !md)) return free(*m), pcre2_match_data_free(md), errorf(err, errlen, "out of memory");
    for (size_t at = 0; at < s->n;) {
        size_t b, e;
        if (p->re) {
            int rc = pcre2_match(p->re, (PCRE2_SPTR)s->p, s->n, at, PCRE2_NO_UTF_CHECK, md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[200];
                pcre2_get_error_message(rc, msg, sizeof msg);
                free(*m), pcre2_match_data_free(md);
                if (rc == PCRE2_ERROR_NOMEMORY) /* (the interpreter's frames; JIT needs none) */
                    return errorf(err, errlen, "out of memory matching a pre-tokenizer's regex");
                return errorf(err, errlen, "the Split regex failed: %s", (char *)msg);
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            b = ov[0], e = ov[1];
        } else {
            const char *q = p->literal.n ? memmem(s->p + at, s->n - at, p->literal.p, p->literal.n) : NULL;
            if (!q) break;
            b = (size_t)(q - s->p), e = b + p->literal.n;
        }
        if (e == b) { /* an empty match: step over one character */
            at = b + 1;
            while (at < s->n && ((unsigned char)s->p[at] & 0xC0) == 0x80) at++;
            continue;
        }
        if (*nm == cap) {
            size_t *g = realloc(*m, (size_t)(cap *= 2) * 2 * sizeof **m);
            if (!g) return free(*m), pcre2_match_data_free(md), errorf(err, errlen, "out of memory");
            *m = g;
        }
        (*m)[2 * *nm] = b, (*m)[2 * *nm + 1] = e, (*nm)++;
        at = e;
    }
    pcre2_match_data_free(md);
    return 0;
}

/* Split: the text between matches and the matches, joined as `how` says
 * (the library's SplitDelimiterBehavior; a match right after a match stands
 * alone when merged). */
static int split_piece(const struct pre_step *p, const struct bytes *s, struct pieces *out, char *err, size_t errlen)
{
    size_t *m;
    int nm;
    if (find_matches(p, s, &m, &nm, err, errlen)) return -1;
    /* the parts in order: (start, end, is_match) */
    size_t (*part)[3] = malloc(((size_t)nm * 2 + 1) * sizeof *part);
    int np = 0, rc = part ? 0 : -1;
    size_t prev = 0;
    for (int i = 0; part && i < nm; i++) {
        if (m[2 * i] > prev) part[np][0] = prev, part[np][1] = m[2 * i], part[np++][2] = 0;
        part[np][0] = m[2 * i], part[np][1] = m[2 * i + 1], part[np++][2] = 1;
        prev = m[2 * i + 1];
    }
    if (part && prev < s->n) part[np][0] = prev, part[np][1] = s->n, part[np++][2] = 0;
    free(m);
    if (rc == 0 && p->how == SPLIT_WITH_PREVIOUS) { /* a match joins the part before it */
        int k = 0, last_match = 0;
        for (int i = 0; i < np; i++) {
            if (part[i][2] && !last_match && k > 0) part[k - 1][1] = part[i][1];
            else part[k][0] = part[i][0], part[k][1] = part[i][1], part[k++][2] = 0;
            last_match = (int)part[i][2];
        }
        np = k;
    } else if (rc == 0 && p->how == SPLIT_WITH_NEXT) { /* a match joins the part after it */
        int k = np, last_match = 0;
        for (int i = np - 1; i >= 0; i--) {
            if (part[i][2] && !last_match && k < np) part[k][0] = part[i][0];
            else k--, part[k][0] = part[i][0], part[k][1] = part[i][1], part[k][2] = 0;
            last_match = (int)part[i][2];
        }
        memmove(part, part + k, (size_t)(np - k) * sizeof *part);
        np -= k;
    }
    for (int i = 0; rc == 0 && i < np; i++)
        if (!(p->how == SPLIT_REMOVED && part[i][2])) rc = add_piece(out, s->p + part[i][0], part[i][1] - part[i][0]);
    free(part);
    return rc ? errorf(err, errlen, "out of memory") : 0;
}

/* ByteLevel: a leading space if asked, the regex split, then every byte as
 * its character of the byte alphabet. */
static int byte_level(const struct tokenizer *t, const struct pre_step *p, const struct bytes *s, struct pieces *out,
                      char *err, size_t errlen)
{
    struct bytes in = {0};
    if ((p->add_prefix_space && (s->n == 0 || s->p[0] != ' ') && tok_put(&in, " ", 1)) || tok_put(&in, s->p, s->n))
        return tok_drop(&in), errorf(err, errlen, "out of memory");
    struct pieces split = {0};
    int rc = p->re ? split_piece(p, &in, &split, err, errlen) /* (which says why it failed) */
                   : add_piece(&split, in.p, in.n) ? errorf(err, errlen, "out of memory") : 0;
    tok_drop(&in);
    for (int i = 0; rc == 0 && i < split.n; i++) {
        struct bytes mapped = {0};
        for (size_t k = 0; k < split.p[i].n && rc == 0; k++) rc = put_cp(&mapped, t->byte_char[(unsigned char)split.p[i].p[k]]);
        if (rc == 0) rc = add_piece(out, mapped.p, mapped.n);
        tok_drop(&mapped);
        if (rc) rc = errorf(err, errlen, "out of memory");
    }
    free_pieces(&split);
    return rc;
}

static int pre_tokenize(const struct tokenizer *t, struct bytes *s, struct pieces *words, char *err, size_t errlen)
{
    struct pieces cur = {0};
    if (add_piece(&cur, s->p, s->n)) return free_pieces(&cur), errorf(err, errlen, "out of memory");
    for (int i = 0; i < t->npre; i++) {
        struct pieces next = {0};
        int rc = 0;
        for (int k = 0; k < cur.n && rc == 0; k++)
            rc = t->pre[i].kind == PRE_SPLIT ? split_piece(&t->pre[i], &cur.p[k], &next, err, errlen)
                                             : byte_level(t, &t->pre[i], &cur.p[k], &next, err, errlen);
        free_pieces(&cur);
        if (rc) return free_pieces(&next), -1;
        cur = next;
    }
    *words = cur;
    return 0;
}

/* ------------------------------------------------------------ encoding */

/* The longest added token at s[0..len), or NULL. */
static const struct added *added_at(const struct tokenizer *t, const char *s, size_t len)
{
    if (!t->nadded) return NULL;
    unsigned k = len > 1 ? (unsigned char)s[0] << 8 | (unsigned char)s[1] : 65536;
    const struct added *best = NULL;
    for (int i = len > 1 ? t->first2[k] : 0; len > 1 && i < t->first2[k + 1]; i++)
        if (t->added[i].s.n <= len && memcmp(t->added[i].s.p, s, t->added[i].s.n) == 0) return &t->added[i];
    for (int i = t->first2[65536]; i < t->nadded && !best; i++) /* the one-byte tokens, after all others */
        if (t->added[i].s.p[0] == s[0]) best = &t->added[i];
    return best;
}

enum { CACHE_WORD_MAX = 64, CACHE_ENTRIES = 1 << 20 };

/* The ids of one word, from the cache or the model (and then cached). */
static int cached_word(const struct tokenizer *t, const char *w, size_t len, int32_t **ids, size_t *n, size_t *cap)
{
    struct word_cache *c = t->cache;
    if (!c || len > CACHE_WORD_MAX) return bpe_word(&t->bpe, w, len, ids, n, cap);
    int32_t e = tok_map_get(&c->map, w, len);
    if (e >= 0) {
        size_t k = c->at[e + 1] - c->at[e];
        if (*n + k > *cap && tok_grow_size((void **)ids, cap, *n + k, sizeof **ids)) return -1;
        memcpy(*ids + *n, c->ids + c->at[e], k * sizeof **ids);
        *n += k;
        return 0;
    }
    size_t before = *n;
    if (bpe_word(&t->bpe, w, len, ids, n, cap)) return -1;
    if (c->n + 2 > CACHE_ENTRIES) return 0; /* full: the model alone from now on */
    size_t k = *n - before;
    if ((c->n + 2 > c->cap_at && tok_grow_size((void **)&c->at, &c->cap_at, c->n + 2, sizeof *c->at)) ||
        (c->nids + k > c->cap_ids && tok_grow_size((void **)&c->ids, &c->cap_ids, c->nids + k, sizeof *c->ids)) ||
        tok_map_put(&c->map, w, len, (int32_t)c->n))
        return 0; /* (no room to remember it: no harm) */
    memcpy(c->ids + c->nids, *ids + before, k * sizeof **ids);
    c->at[c->n] = c->nids;
    c->nids += k;
    c->at[++c->n] = c->nids;
    return 0;
}

/* One piece without added tokens: normalized, pre-tokenized, each word by the model. */
static int encode_piece(const struct tokenizer *t, const char *s, size_t len, int32_t **ids, size_t *n, size_t *cap,
                        char *err, size_t errlen)
{
    struct bytes b = {0};
    struct pieces words = {0};
    if (tok_put(&b, s, len) || normalize(t, &b)) return tok_drop(&b), errorf(err, errlen, "out of memory (normalizing)");
    int rc = pre_tokenize(t, &b, &words, err, errlen);
    tok_drop(&b);
    for (int i = 0; rc == 0 && i < words.n; i++)
        if (cached_word(t, words.p[i].p, words.p[i].n, ids, n, cap)) rc = errorf(err, errlen, "out of memory");
    free_pieces(&words);
    return rc;
}

static int push(int32_t **ids, size_t *n, size_t *cap, int32_t id)
{
    if (*n == *cap && tok_grow(ids, cap)) return -1;
    (*ids)[(*n)++] = id;
    return 0;
}

int tok_encode(const struct tokenizer *t, const char *text, size_t len, int add_special, int32_t **ids, size_t *n,
               size_t *cap, char *err, size_t errlen)
{
    struct bytes s = {0};
    if (well_formed(text, len, &s)) return tok_drop(&s), errorf(err, errlen, "out of memory");
    int rc = 0;
    for (int k = 0; add_special && k < t->ntmpl && t->tmpl[k] >= 0 && rc == 0; k++)
        if (push(ids, n, cap, t->tmpl[k])) rc = errorf(err, errlen, "out of memory");
    size_t from = 0;
    for (size_t i = 0; i <= s.n && rc == 0;) { /* added tokens first: the text between them by the pipeline */
        const struct added *a = i < s.n ? added_at(t, s.p + i, s.n - i) : NULL;
        if (!a && i < s.n) {
            i++;
            continue;
        }
        if (i > from) rc = encode_piece(t, s.p + from, i - from, ids, n, cap, err, errlen);
        if (!a) break;
        if (rc == 0 && push(ids, n, cap, a->id)) rc = errorf(err, errlen, "out of memory");
        i += a->s.n;
        from = i;
    }
    int seq = 0;
    while (seq < t->ntmpl && t->tmpl[seq] >= 0) seq++;
    for (int k = seq + 1; add_special && k < t->ntmpl && rc == 0; k++)
        if (push(ids, n, cap, t->tmpl[k])) rc = errorf(err, errlen, "out of memory");
    tok_drop(&s);
    return rc;
}

/* ------------------------------------------------------------ decoding */

static int is_special(const struct tokenizer *t, int32_t id)
{
    for (int i = 0; i < t->nadded; i++)
        if (t->added[i].id == id) return t->added[i].special;
    return 0;
}

static const struct bytes *added_of(const struct tokenizer *t, int32_t id)
{
    for (int i = 0; i < t->nadded; i++)
        if (t->added[i].id == id) return &t->added[i].s;
    return NULL;
}

/* Is p[0..n) a byte-fallback token, <0xNN>?  *v: the byte. */
static int byte_token(const char *p, size_t n, unsigned *v)
{
    return n == 6 && sscanf(p, "<0x%2X>", v) == 1 && p[5] == '>';
}

/* ByteFallback: runs of <0xNN> tokens as the bytes they name, each byte
 * U+FFFD where the run is not UTF-8. */
static int byte_fallback(struct pieces *tok)
{
    struct pieces out = {0};
    int rc = 0;
    for (int i = 0; i < tok->n && rc == 0;) {
        int j = i;
        struct bytes run = {0};
        unsigned v;
        while (j < tok->n && byte_token(tok->p[j].p, (size_t)tok->p[j].n, &v)) {
            unsigned char c = (unsigned char)v;
            rc |= tok_put(&run, &c, 1), j++;
        }
        if (j == i) {
            rc = add_piece(&out, tok->p[i].p, tok->p[i].n), i++;
            continue;
        }
        struct bytes fixed = {0};
        rc |= well_formed(run.p, run.n, &fixed);
        int exact = rc == 0 && fixed.n == run.n && memcmp(fixed.p, run.p, run.n) == 0;
        if (exact) rc |= add_piece(&out, run.p, run.n);
        for (int k = i; k < j && !exact && rc == 0; k++) rc = add_piece(&out, "\xEF\xBF\xBD", 3);
        tok_drop(&run), tok_drop(&fixed);
        i = j;
    }
    free_pieces(tok);
    *tok = out;
    return rc;
}

static int decode_step(const struct tokenizer *t, const struct dec_step *d, struct pieces *tok)
{
    int rc = 0;
    if (d->kind == DEC_BYTEFALLBACK) return byte_fallback(tok);
    if (d->kind == DEC_FUSE || d->kind == DEC_BYTELEVEL) { /* one piece of all */
        struct bytes all = {0};
        for (int i = 0; i < tok->n && rc == 0; i++) {
            if (d->kind == DEC_FUSE) {
                rc = tok_put(&all, tok->p[i].p, tok->p[i].n);
                continue;
            }
            /* ByteLevel: a token whose characters are all of the alphabet is their bytes, else its own text */
            struct bytes raw = {0};
            int ok = 1;
            for (utf8proc_ssize_t k = 0; k < (utf8proc_ssize_t)tok->p[i].n && ok;) {
                utf8proc_int32_t cp;
                utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)tok->p[i].p + k,
                                                      (utf8proc_ssize_t)tok->p[i].n - k, &cp);
                ok = l > 0 && cp >= 0 && cp < 324 && t->char_byte[cp] >= 0;
                unsigned char c = ok ? (unsigned char)t->char_byte[cp] : 0;
                if (ok) rc |= tok_put(&raw, &c, 1);
                k += l > 0 ? l : 1;
            }
            rc |= ok ? tok_put(&all, raw.p, raw.n) : tok_put(&all, tok->p[i].p, tok->p[i].n);
            tok_drop(&raw);
        }
        struct bytes fixed = {0};
        if (d->kind == DEC_BYTELEVEL) rc |= well_formed(all.p ? all.p : "", all.n, &fixed); /* (from_utf8_lossy) */
        free_pieces(tok);
        rc |= d->kind == DEC_BYTELEVEL ? add_piece(tok, fixed.p, fixed.n) : add_piece(tok, all.p ? all.p : "", all.n);
        if (tok->n == 0 && rc == 0 && (rc = add_piece(tok, " ", 1)) == 0)
            tok->p[0].n = 0; /* (an empty result stays a piece) */
        tok_drop(&all), tok_drop(&fixed);
        return rc;
    }
    for (int i = 0; i < tok->n && rc == 0; i++) {
        struct bytes *s = &tok->p[i];
        if (d->kind == DEC_REPLACE) {
            struct bytes out = {0};
            for (size_t k = 0; k < s->n && rc == 0;)
                if (d->a.n && k + d->a.n <= s->n && memcmp(s->p + k, d->a.p, d->a.n) == 0) rc = tok_put(&out, d->b.p, d->b.n), k += d->a.n;
                else rc = tok_put(&out, s->p + k++, 1);
            rc |= tok_put(&out, "", 0);
            tok_drop(s);
            *s = out;
        } else { /* Strip: up to start leading and stop trailing copies of the character */
            size_t b = 0, e = s->n;
            for (int k = 0; k < d->start && e - b >= d->a.n && memcmp(s->p + b, d->a.p, d->a.n) == 0; k++) b += d->a.n;
            for (int k = 0; k < d->stop && e - b >= d->a.n && memcmp(s->p + e - d->a.n, d->a.p, d->a.n) == 0; k++) e -= d->a.n;
            memmove(s->p, s->p + b, e - b);
            s->n = e - b;
            s->p[s->n] = 0;
        }
    }
    return rc;
}

int tok_decode(const struct tokenizer *t, const int32_t *ids, size_t n, int skip_special, char **text, size_t *len,
               char *err, size_t errlen)
{
    struct pieces tok = {0};
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct bytes *a = ids[i] >= 0 && ids[i] < t->nid ? added_of(t, ids[i]) : NULL;
        if (a && skip_special && is_special(t, ids[i])) continue;
        if (!a && (ids[i] < 0 || ids[i] >= t->bpe.nid || !t->bpe.token[ids[i]]))
            return free_pieces(&tok), errorf(err, errlen, "token %d is not an id of the tokenizer's vocabulary (0 .. %d%s)",
                                           ids[i], t->nid - 1, ids[i] >= 0 && ids[i] < t->nid ? ", which has no token of "
                                           "that id" : "");
        rc = a ? add_piece(&tok, a->p, a->n) : add_piece(&tok, t->bpe.token[ids[i]], t->bpe.token_len[ids[i]]);
    }
    for (int i = 0; i < t->ndec && rc == 0; i++) rc = decode_step(t, &t->dec[i], &tok);
    struct bytes out = {0};
    for (int i = 0; i < tok.n && rc == 0; i++) /* (no decoder: the tokens joined by spaces, as the library does) */
        rc = (t->ndec == 0 && i > 0 && tok_put(&out, " ", 1)) || tok_put(&out, tok.p[i].p, tok.p[i].n);
    rc |= tok_put(&out, "", 0);
    free_pieces(&tok);
    if (rc) return tok_drop(&out), errorf(err, errlen, "out of memory");
    *text = out.p;
    *len = out.n;
    return 0;
}

size_t tok_decode_settled(const struct tokenizer *t, const int32_t *ids, size_t n, int skip_special)
{
    int fallback = 0;
    for (int i = 0; i < t->ndec; i++) fallback |= t->dec[i].kind == DEC_BYTEFALLBACK;
    size_t k = n;
    for (size_t i = n; fallback && i > 0; i--) {
        int32_t id = ids[i - 1];
        const struct bytes *a = id >= 0 && id < t->nid ? added_of(t, id) : NULL;
        unsigned v;
        if (a && skip_special && is_special(t, id)) continue; /* (left out: the run goes on past it) */
        if (a ? !byte_token(a->p, a->n, &v)
              : id < 0 || id >= t->bpe.nid || !t->bpe.token[id] ||
                    !byte_token(t->bpe.token[id], (size_t)t->bpe.token_len[id], &v))
            break;
        k = i - 1;
    }
    return k;
}

int32_t tok_vocab_size(const struct tokenizer *t) { return t->nid; }
int tok_has_id(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->nid && ((id < t->bpe.nid && t->bpe.token[id]) || added_of(t, id));
}
int32_t tok_bos(const struct tokenizer *t) { return t->bos; }
int32_t tok_eos(const struct tokenizer *t) { return t->eos; }
int32_t tok_doc(const struct tokenizer *t) { return !t ? -1 : t->bos >= 0 ? t->bos : t->eos; }
