/* deck.c -- the Fortran-namelist reader (see deck.h).
 *
 * Two passes: lex() cuts the text into tokens that remember line and column,
 * then a recursive-descent parser turns them into groups and entries.  The
 * first error stops both and is reported with its position and a fix. */
#include "deck.h"
#include "log.h"
#include "utf8.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_REPEAT 65536 /* r in r*c: no key takes more values; larger is a typo */

enum tok_type { TK_GROUP, TK_END, TK_EQ, TK_COMMA, TK_STR, TK_WORD, TK_EOF };

struct token {
    enum tok_type type;
    const char *p; /* TK_GROUP: at '&'; TK_STR: at the opening quote */
    int len;
    int line, col;
};

struct parser {
    const struct token *t;
    int pos;
    struct deck *d;
    int cap_groups, cap_entries;
    struct deck_error *err;
};

/* ------------------------------------------------------------ errors */

void deck_error_set(struct deck_error *err, int line, int col, const char *fmt, ...)
{
    va_list ap;
    err->line = line;
    err->col = col;
    err->hint[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(err->what, sizeof err->what, fmt, ap);
    va_end(ap);
    text_printable(err->what);
}

int(deck_error_hint)(struct deck_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof err->hint, fmt, ap);
    va_end(ap);
    text_printable(err->hint);
    return -1;
}

static int out_of_memory(struct deck_error *err)
{
    deck_error_set(err, 0, 0, "out of memory while reading the deck");
    return deck_error_hint(err, "the deck is too large for the memory available");
}

/* A token for messages, shortened: 'abc', '/', the string 'x y'. */
static const char *tok_show(const struct token *t, char *buf, size_t n)
{
    int len = t->len > 40 ? 40 : t->len;
    const char *more = t->len > 40 ? "..." : "";
    if (t->type == TK_EOF)
        snprintf(buf, n, "the end of the input");
    else if (t->type == TK_STR)
        snprintf(buf, n, "the string %.*s%s", len, t->p, more);
    else
        snprintf(buf, n, "'%.*s%s'", len, t->p, more);
    return buf;
}

/* A character outside ASCII in the n bytes at p where only a string may
 * hold one (a key, a number, a logical, between tokens): the first is
 * named in err, what it is and what to write, for those that look like
 * ASCII or show nothing (a no-break space, a zero-width space, a byte order
 * mark, typographic quotes, a dash for a minus).  1 with err's message
 * extended and its hint set, 0 where there is none. */
static int odd_char(struct deck_error *err, const char *p, int n)
{
    int at = 0;
    while (at < n && (unsigned char)p[at] < 0x80) at++;
    if (at == n) return 0;
    /* one UTF-8 sequence, as the standard bounds it (no overlong form, surrogate or code point past U+10FFFF) */
    const unsigned char *u = (const unsigned char *)p + at;
    int len = utf8_length(u, (size_t)(n - at)), valid = len > 0;
    unsigned cp = valid ? utf8_code_point(u, len) : 0;
    size_t used = strlen(err->what);
    if (!valid) {
        snprintf(err->what + used, sizeof err->what - used, " (it holds the byte 0x%02X, which is not UTF-8, %s%.*s%s)",
                 u[0], at ? "after '" : "at its start", at > 40 ? 40 : at, p + (at > 40 ? at - 40 : 0), at ? "'" : "");
        text_printable(err->what);
        deck_error_hint(err, "save the deck as UTF-8 (is it Latin-1, or another 8-bit encoding?); keys, numbers and "
                             "logicals are ASCII");
        return 1;
    }
    static const struct { unsigned cp; const char *what, *fix; } known[] = {
        {0x00A0, "a no-break space", "type a plain space"},
        {0x202F, "a narrow no-break space", "type a plain space"},
        {0x2007, "a figure space", "type a plain space"},
        {0x2009, "a thin space", "type a plain space"},
        {0x3000, "an ideographic space", "type a plain space"},
        {0x200B, "a zero-width space", "delete it (it shows as nothing: retype the line)"},
        {0x200C, "a zero-width non-joiner", "delete it (it shows as nothing: retype the line)"},
        {0x200D, "a zero-width joiner", "delete it (it shows as nothing: retype the line)"},
        {0x2060, "a word joiner", "delete it (it shows as nothing: retype the line)"},
        {0xFEFF, "a byte order mark", "delete it (it shows as nothing; one is skipped only at the deck's start)"},
        {0x2018, "a typographic single quote", "quote strings with the ASCII ' (an editor's smart quotes)"},
        {0x2019, "a typographic single quote", "quote strings with the ASCII ' (an editor's smart quotes)"},
        {0x201C, "a typographic double quote", "quote strings with the ASCII \" (an editor's smart quotes)"},
        {0x201D, "a typographic double quote", "quote strings with the ASCII \" (an editor's smart quotes)"},
        {0x2212, "a minus sign", "write the ASCII hyphen-minus -"},
        {0x2013, "an en dash", "write the ASCII hyphen-minus -"},
        {0x2014, "an em dash", "write the ASCII hyphen-minus -"},
    };
    const char *what = "a character outside ASCII",
               *fix = "keys, numbers and logicals are ASCII; only a quoted string may hold other characters";
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].cp == cp) what = known[i].what, fix = known[i].fix;
    if (at == 0) snprintf(err->what + used, sizeof err->what - used, " (it starts with U+%04X, %s)", cp, what);
    else
        snprintf(err->what + used, sizeof err->what - used, " (it holds U+%04X, %s, after '%.*s')", cp, what,
                 at > 40 ? 40 : at, p + (at > 40 ? at - 40 : 0));
    text_printable(err->what); /* (the ASCII before it: a control character shown as such) */
    deck_error_hint(err, "%s", fix);
    return 1;
}

/* arr with room for n + 1 elements of `size` (capacity *cap), or NULL when
 * out of memory (arr is then still valid). */
static void *grow(void *arr, int *cap, int n, size_t size)
{
    if (n < *cap) return arr;
    int ncap = *cap ? 2 * *cap : 8;
    void *q = realloc(arr, (size_t)ncap * size);
    if (q) *cap = ncap;
    return q;
}

/* Do the n bytes at p equal the lower-case word w, ignoring case? */
static int ci_equal(const char *p, const char *w, int n)
{
    for (int i = 0; i < n; i++)
        if (tolower((unsigned char)p[i]) != w[i]) return 0;
    return w[n] == '\0';
}

static char *dup_lower(const char *p, int len)
{
    char *s = malloc((size_t)len + 1);
    if (!s) return NULL;
    for (int i = 0; i < len; i++) s[i] = (char)tolower((unsigned char)p[i]);
    s[len] = '\0';
    return s;
}

static char *dup_n(const char *p, int len)
{
    char *s = malloc((size_t)len + 1);
    if (!s) return NULL;
    memcpy(s, p, (size_t)len);
    s[len] = '\0';
    return s;
}

/* ------------------------------------------------------------ lexer */

struct cursor {
    const char *p;
    int line, col;
};

static void advance(struct cursor *c)
{
    if (*c->p == '\n') {
        c->line++;
        c->col = 1;
    } else {
        c->col++;
    }
    c->p++;
}

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\f' || ch == '\v';
}

static int is_name_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* A character that ends an unquoted value or key. */
static int is_delim(char ch)
{
    return ch == '\0' || is_space(ch) || strchr(",/=!'\"&$", ch) != NULL;
}

static void skip_blanks_and_comments(struct cursor *c)
{
    for (;;) {
        while (is_space(*c->p)) advance(c);
        if (*c->p != '!') return;
        while (*c->p && *c->p != '\n') advance(c);
    }
}

/* A quoted string; a doubled quote stays inside it.  Strings end on their
 * line: an unclosed quote would otherwise swallow the rest of the deck. */
static int lex_string(struct cursor *c, struct token *t, struct deck_error *err)
{
    char q = *c->p;
    advance(c);
    for (;;) {
        if (*c->p == '\0' || *c->p == '\n') {
            deck_error_set(err, t->line, t->col, "unterminated string: the %c opened here is not closed on its line",
                      q);
            return deck_error_hint(err, "close the string with %c (write %c%c for a %c inside it)", q, q, q, q);
        }
        if (*c->p == q && c->p[1] == q) {
            advance(c);
            advance(c);
            continue;
        }
        if (*c->p == q) break;
        advance(c);
    }
    advance(c);
    t->type = TK_STR;
    t->len = (int)(c->p - t->p);
    return 0;
}

/* &name (or &end, which closes a group like '/'); $name and $end, the
 * older spelling that Fortran compilers still read, alike. */
static int lex_group(struct cursor *c, struct token *t, struct deck_error *err)
{
    char mark = *c->p;
    advance(c);
    while (is_name_char(*c->p)) advance(c);
    t->len = (int)(c->p - t->p);
    if (t->len == 1) {
        deck_error_set(err, t->line, t->col, "empty group name after '%c'", mark);
        return deck_error_hint(err, "write the group name right after the '%c', e.g. %cmodel", mark, mark);
    }
    t->type = (t->len == 4 && ci_equal(t->p + 1, "end", 3)) ? TK_END : TK_GROUP;
    return 0;
}

static int lex_one(struct cursor *c, struct token *t, struct deck_error *err)
{
    skip_blanks_and_comments(c);
    t->p = c->p;
    t->line = c->line;
    t->col = c->col;
    t->len = 1;
    switch (*c->p) {
    case '\0': t->type = TK_EOF; t->len = 0; return 0;
    case '&': case '$': return lex_group(c, t, err);
    case '\'': case '"': return lex_string(c, t, err);
    case '/': t->type = TK_END; advance(c); return 0;
    case '=': t->type = TK_EQ; advance(c); return 0;
    case ',': t->type = TK_COMMA; advance(c); return 0;
    default: break;
    }
    while (!is_delim(*c->p)) advance(c);
    t->type = TK_WORD;
    t->len = (int)(c->p - t->p);
    return 0;
}

/* Cut text into tokens, the last one TK_EOF.  Returns 0 or -1. */
static int lex(const char *text, struct token **out, struct deck_error *err)
{
    struct cursor c = { text, 1, 1 };
    if (strncmp(text, "\xef\xbb\xbf", 3) == 0) c.p += 3; /* a UTF-8 byte order mark: editors show nothing */
    struct token *t = NULL;
    int n = 0, cap = 0;
    for (;;) {
        struct token *q = grow(t, &cap, n, sizeof *t);
        if (!q) {
            free(t);
            return out_of_memory(err);
        }
        t = q;
        if (lex_one(&c, &t[n], err)) {
            free(t);
            return -1;
        }
        if (t[n++].type == TK_EOF) break;
    }
    *out = t;
    return 0;
}

/* ------------------------------------------------------------ values */

static int is_identifier(const char *p, int len)
{
    if (len == 0 || !(isalpha((unsigned char)p[0]) || p[0] == '_')) return 0;
    for (int i = 1; i < len; i++)
        if (!is_name_char(p[i])) return 0;
    return 1;
}

/* .true. .false. .t. .f. T F (any case); sets *b. */
static int is_logical(const char *p, int len, int *b)
{
    static const char *const yes[] = { ".true.", ".t.", "t" }, *const no[] = { ".false.", ".f.", "f" };
    for (int i = 0; i < 3; i++) {
        if (ci_equal(p, yes[i], len)) return *b = 1, 1;
        if (ci_equal(p, no[i], len)) return *b = 0, 1;
    }
    return 0;
}

static int count_digits(const char *p)
{
    int n = 0;
    while (isdigit((unsigned char)p[n])) n++;
    return n;
}

/* [+-]digits */
static int is_integer(const char *s)
{
    if (*s == '+' || *s == '-') s++;
    int n = count_digits(s);
    return n > 0 && s[n] == '\0';
}

/* [+-](digits[.digits] | .digits)[(e|d)[+-]digits], with a '.' or an exponent. */
static int is_real(const char *s)
{
    if (*s == '+' || *s == '-') s++;
    int mant = count_digits(s), dot = 0;
    s += mant;
    if (*s == '.') {
        dot = 1;
        s++;
        int frac = count_digits(s);
        mant += frac;
        s += frac;
    }
    if (mant == 0) return 0;
    if (*s == '\0') return dot;
    if (*s != 'e' && *s != 'E' && *s != 'd' && *s != 'D') return 0;
    s++;
    if (*s == '+' || *s == '-') s++;
    int ex = count_digits(s);
    return ex > 0 && s[ex] == '\0';
}

static int bad_value(struct deck_error *err, const struct token *t, const char *p, int len, const char *why)
{
    deck_error_set(err, t->line, t->col, "'%.*s' is not a valid value%s", len > 40 ? 40 : len, p, why);
    if (odd_char(err, p, len)) return -1;
    return deck_error_hint(err, "integers look like 12 or -3, reals like 0.5, 6e-4 or 1.5d-3, "
                         "logicals .true. or .false. (T, F), strings 'text' (quoted)");
}

/* Classify the unquoted text p[0..len) of token t into *v. */
static int classify(const char *p, int len, const struct token *t, struct deck_value *v,
                    struct deck_error *err)
{
    char num[256];
    int b;
    if (is_logical(p, len, &b)) {
        v->kind = DECK_BOOL;
        v->i = b;
        return 0;
    }
    if (isalpha((unsigned char)p[0]) || p[0] == '_') {
        v->kind = DECK_WORD;
        v->s = dup_n(p, len);
        return v->s ? 0 : out_of_memory(err);
    }
    if (len >= (int)sizeof num) return bad_value(err, t, p, len, "");
    for (int i = 0; i < len; i++) num[i] = (p[i] == 'd' || p[i] == 'D') ? 'e' : p[i];
    num[len] = '\0';
    if (is_integer(num)) {
        /* r as a real key reads it, the way Fortran does: -0 is -0.0, and
         * 1000000000000000000000 (beyond 64 bits) is 1e21. */
        v->r = strtod(num, NULL);
        if (!isfinite(v->r)) return bad_value(err, t, p, len, ": the number is too large for a double");
        errno = 0;
        v->i = strtoll(num, NULL, 10);
        v->big = errno == ERANGE;
        v->kind = DECK_INT;
        return 0;
    }
    if (is_real(num)) {
        errno = 0;
        v->r = strtod(num, NULL);
        if (!isfinite(v->r)) return bad_value(err, t, p, len, ": the real is too large for a double");
        if (errno == ERANGE && fabs(v->r) < DBL_MIN)
            return bad_value(err, t, p, len, ": the real is too small for a double (it would become 0 or lose "
                                             "digits)");
        v->kind = DECK_REAL;
        return 0;
    }
    return bad_value(err, t, p, len, "");
}

/* 'it''s' -> it's */
static char *unquote(const struct token *t)
{
    char q = t->p[0], *s = malloc((size_t)t->len);
    if (!s) return NULL;
    int n = 0;
    for (int i = 1; i < t->len - 1; i++) {
        s[n++] = t->p[i];
        if (t->p[i] == q) i++; /* the second of a doubled quote */
    }
    s[n] = '\0';
    return s;
}

static void value_free(struct deck_value *v)
{
    free(v->s);
    free(v->raw);
}

void deck_values_free(struct deck_value *values, int n)
{
    for (int i = 0; i < n; i++) value_free(&values[i]);
    free(values);
}

/* Append a deep copy of *v to e->values. */
static int append_value(struct deck_entry *e, int *cap, const struct deck_value *v,
                        struct deck_error *err)
{
    struct deck_value c = *v;
    c.s = v->s ? dup_n(v->s, (int)strlen(v->s)) : NULL;
    c.raw = dup_n(v->raw, (int)strlen(v->raw));
    struct deck_value *q = grow(e->values, cap, e->nvalues, sizeof *q);
    if (q) e->values = q;
    if ((v->s && !c.s) || !c.raw || !q) {
        value_free(&c);
        return out_of_memory(err);
    }
    e->values[e->nvalues++] = c;
    return 0;
}

/* The r of r*c at the start of word t (1 if there is no '*'); *star is set
 * to the '*' or NULL.  Returns -1 on a malformed count. */
static int64_t repeat_count(const struct token *t, const char **star, struct deck_error *err)
{
    *star = memchr(t->p, '*', (size_t)t->len);
    if (!*star) return 1;
    int nd = (int)(*star - t->p);
    int show = t->len > 40 ? 40 : t->len;
    if (nd == 0 || nd > 18 || count_digits(t->p) != nd)
        return bad_value(err, t, t->p, t->len, ": a repeat is written count*value, e.g. 3*0.5");
    int64_t r = strtoll(t->p, NULL, 10);
    if (r < 1 || r > MAX_REPEAT) {
        deck_error_set(err, t->line, t->col, "repeat count %" PRId64 " in '%.*s' is not in [1, %d]", r, show,
                  t->p, MAX_REPEAT);
        return deck_error_hint(err, "write count*value with a positive count, e.g. 3*0.5");
    }
    return r;
}

/* One value: a string, or a word that may be a repeat r*c, whose c may be a
 * string written right after the '*' (3*'ab').  Appends r values to e. */
static int parse_value(struct parser *ps, struct deck_entry *e, int *cap)
{
    const struct token *t = &ps->t[ps->pos++];
    struct deck_error *err = ps->err;
    struct deck_value v = { .line = t->line, .col = t->col };
    const char *star = NULL, *p = t->p;
    int len = t->len, rc = 0;
    int64_t repeat = t->type == TK_WORD ? repeat_count(t, &star, err) : 1;
    if (repeat < 0) return -1;
    if (star) {
        p = star + 1;
        len = t->len - (int)(p - t->p);
        if (len == 0) {
            const struct token *s = &ps->t[ps->pos];
            if (s->type != TK_STR || s->p != p) {
                deck_error_set(err, t->line, t->col, "repeat '%.*s' has no value after the '*'",
                          t->len > 40 ? 40 : t->len, t->p);
                return deck_error_hint(err, "write count*value, e.g. 3*0.5 (empty values are not supported)");
            }
            t = &ps->t[ps->pos++];
        }
    }
    if (t->type == TK_STR) {
        v.kind = DECK_STR;
        v.s = unquote(t);
        p = t->p;
        len = t->len;
        if (!v.s) return out_of_memory(err);
    } else if (classify(p, len, t, &v, err)) {
        return -1;
    }
    v.raw = dup_n(p, len);
    if (!v.raw) rc = out_of_memory(err);
    for (int64_t r = 0; r < repeat && rc == 0; r++) rc = append_value(e, cap, &v, err);
    value_free(&v);
    return rc;
}

/* ------------------------------------------------------------ parser */

static const struct token *peek(const struct parser *ps, int ahead)
{
    const struct token *t = &ps->t[ps->pos];
    for (int i = 0; i < ahead && t->type != TK_EOF; i++) t++;
    return t;
}

static int missing_value(struct deck_error *err, const struct token *at, const char *key)
{
    char buf[80];
    if (!key) {
        deck_error_set(err, at->line, at->col, "missing value: found %s", tok_show(at, buf, sizeof buf));
        return deck_error_hint(err, "write group.key=value");
    }
    deck_error_set(err, at->line, at->col, "missing value for '%s': found %s", key, tok_show(at, buf, sizeof buf));
    return deck_error_hint(err, "write %s = value (empty values are not supported)", key);
}

/* "key = ..." without the '='. */
static int missing_equals(struct deck_error *err, const struct token *key, const struct token *found)
{
    char buf[80];
    int klen = key->len > 40 ? 40 : key->len, flen = found->len > 40 ? 40 : found->len;
    deck_error_set(err, key->line, key->col, "expected '=' after '%.*s', found %s", klen, key->p,
              tok_show(found, buf, sizeof buf));
    if (found->type != TK_STR && odd_char(err, found->p, found->len)) return -1;
    if (found->type == TK_STR || found->type == TK_WORD)
        return deck_error_hint(err, "write %.*s = %.*s", klen, key->p, flen, found->p);
    return deck_error_hint(err, "write %.*s = value; a string value needs quotes ('text')", klen, key->p);
}

/* Is token t a word that names the next key (identifier followed by '=')? */
static int starts_key(const struct parser *ps, const struct token *t)
{
    return t->type == TK_WORD && is_identifier(t->p, t->len) && peek(ps, 1)->type == TK_EQ;
}

/* The value just read runs into an &name, &end, $name or $end: gfortran
 * takes 5&end as no value at all (the key keeps its default) and fails on
 * 'x'&end, so a blank must come between them. */
static int glued_end(const struct parser *ps, struct deck_error *err)
{
    const struct token *v = &ps->t[ps->pos - 1], *t = peek(ps, 0);
    if ((t->type != TK_GROUP && t->type != TK_END) || t->p[0] == '/' || v->p + v->len != t->p) return 0;
    int vlen = v->len > 40 ? 40 : v->len, tlen = t->len > 40 ? 40 : t->len;
    deck_error_set(err, t->line, t->col, "%.*s is written right after the value %.*s", tlen, t->p, vlen, v->p);
    return deck_error_hint(err, "put a blank before %.*s (a Fortran program reads %.*s%.*s as no value at all)",
                           tlen, t->p, vlen, v->p, tlen, t->p);
}

/* The values after "key =", separated by commas or blanks, up to the next
 * key, '/', &group or the end.  `standalone` (override values): no keys. */
static int parse_values(struct parser *ps, struct deck_entry *e, int standalone)
{
    struct deck_error *err = ps->err;
    int cap = 0, last_comma = 0, b;
    for (;;) {
        const struct token *t = peek(ps, 0);
        if (t->type == TK_COMMA) {
            if (e->nvalues == 0) return missing_value(err, t, e->key);
            if (last_comma) {
                deck_error_set(err, t->line, t->col, "empty value between two commas in '%s'", e->key ? e->key : "value");
                return deck_error_hint(err, "remove one comma (empty values are not supported)");
            }
            last_comma = 1;
            ps->pos++;
            continue;
        }
        if (t->type == TK_EQ) {
            deck_error_set(err, t->line, t->col, "unexpected '=' in the value%s%s", e->key ? " of " : "",
                      e->key ? e->key : "");
            return deck_error_hint(err, "write key = value; a string containing '=' needs quotes");
        }
        if (t->type != TK_STR && t->type != TK_WORD) break;
        if (!standalone && starts_key(ps, t)) break;
        if (!standalone && e->nvalues > 0 && t->type == TK_WORD && is_identifier(t->p, t->len) &&
            !is_logical(t->p, t->len, &b))
            return missing_equals(err, t, peek(ps, 1));
        if (parse_value(ps, e, &cap)) return -1;
        last_comma = 0;
        if (!standalone && glued_end(ps, err)) return -1;
    }
    if (e->nvalues == 0) return missing_value(err, peek(ps, 0), e->key);
    return 0;
}

static void entry_free(struct deck_entry *e)
{
    free(e->key);
    deck_values_free(e->values, e->nvalues);
}

/* key = values */
static int parse_entry(struct parser *ps)
{
    const struct token *k = &ps->t[ps->pos];
    struct deck *d = ps->d;
    struct deck_error *err = ps->err;
    char buf[80];
    if (k->type != TK_WORD || !is_identifier(k->p, k->len)) {
        deck_error_set(err, k->line, k->col, "expected a key name, found %s", tok_show(k, buf, sizeof buf));
        if (k->type != TK_STR && odd_char(err, k->p, k->len)) return -1;
        return deck_error_hint(err, "write key = value; key names are letters, digits and _, starting with a letter");
    }
    if (peek(ps, 1)->type != TK_EQ) return missing_equals(err, k, peek(ps, 1));
    ps->pos += 2;
    struct deck_entry e = { .group = d->ngroups - 1, .line = k->line, .col = k->col };
    e.key = dup_lower(k->p, k->len);
    if (!e.key) return out_of_memory(err);
    if (parse_values(ps, &e, 0)) {
        entry_free(&e);
        return -1;
    }
    struct deck_entry *q = grow(d->entries, &ps->cap_entries, d->nentries, sizeof e);
    if (!q) {
        entry_free(&e);
        return out_of_memory(err);
    }
    d->entries = q;
    d->entries[d->nentries++] = e;
    return 0;
}

/* The error for a group that is not closed before `t` (another &group or the end). */
static int unclosed_group(struct deck_error *err, const struct deck_group *g, const struct token *t)
{
    if (t->type == TK_EOF) {
        deck_error_set(err, g->line, g->col, "&%s is not closed: the input ends before its '/'", g->name);
        return deck_error_hint(err, "end the group with '/' after its last value");
    }
    deck_error_set(err, t->line, t->col, "%.*s starts before &%s (opened at line %d) is closed with '/'",
              t->len > 40 ? 40 : t->len, t->p, g->name, g->line);
    return deck_error_hint(err, "end &%s with '/' after its last value", g->name);
}

/* &name entries... / */
static int parse_group(struct parser *ps)
{
    const struct token *t = &ps->t[ps->pos++];
    struct deck *d = ps->d;
    struct deck_group *q = grow(d->groups, &ps->cap_groups, d->ngroups, sizeof *q);
    if (!q) return out_of_memory(ps->err);
    d->groups = q;
    struct deck_group *g = &d->groups[d->ngroups];
    *g = (struct deck_group){ .line = t->line, .col = t->col, .first = d->nentries };
    g->name = dup_lower(t->p + 1, t->len - 1);
    if (!g->name) return out_of_memory(ps->err);
    d->ngroups++;
    for (;;) {
        t = peek(ps, 0);
        if (t->type == TK_COMMA) {
            ps->pos++;
        } else if (t->type == TK_END) {
            ps->pos++;
            g->count = d->nentries - g->first;
            return 0;
        } else if (t->type == TK_GROUP || t->type == TK_EOF) {
            return unclosed_group(ps->err, g, t);
        } else if (parse_entry(ps)) {
            return -1;
        }
    }
}

static int parse_top(struct parser *ps)
{
    char buf[80];
    for (;;) {
        const struct token *t = peek(ps, 0);
        if (t->type == TK_EOF) return 0;
        if (t->type == TK_GROUP) {
            if (parse_group(ps)) return -1;
            continue;
        }
        deck_error_set(ps->err, t->line, t->col, "%s outside a group: %s",
                  t->type == TK_END ? "group end" : "text", tok_show(t, buf, sizeof buf));
        if (t->type != TK_STR && odd_char(ps->err, t->p, t->len)) return -1;
        return deck_error_hint(ps->err, t->type == TK_END
                                     ? "remove it: every '/' must close a group opened with &name"
                                     : "write keys inside a group (&model n_layer = 4 /); "
                                       "comments start with '!'");
    }
}

void deck_free(struct deck *d)
{
    for (int i = 0; i < d->nentries; i++) entry_free(&d->entries[i]);
    for (int i = 0; i < d->ngroups; i++) free(d->groups[i].name);
    free(d->entries);
    free(d->groups);
    *d = (struct deck){ 0 };
}

int deck_parse(struct deck *d, const char *text, struct deck_error *err)
{
    struct token *toks;
    *d = (struct deck){ 0 };
    err->what[0] = err->hint[0] = '\0';
    if (lex(text, &toks, err)) return -1;
    struct parser ps = { .t = toks, .d = d, .err = err };
    int rc = parse_top(&ps);
    free(toks);
    if (rc) deck_free(d);
    return rc;
}

int deck_parse_values(const char *text, struct deck_value **values, int *n, struct deck_error *err)
{
    struct token *toks;
    struct deck_entry e = { 0 };
    err->what[0] = err->hint[0] = '\0';
    *values = NULL;
    *n = 0;
    if (lex(text, &toks, err)) return -1;
    struct parser ps = { .t = toks, .err = err };
    int rc = parse_values(&ps, &e, 1);
    const struct token *t = peek(&ps, 0);
    if (rc == 0 && t->type != TK_EOF) {
        char buf[80];
        deck_error_set(err, t->line, t->col, "unexpected %s in a value", tok_show(t, buf, sizeof buf));
        if (t->type != TK_STR && odd_char(err, t->p, t->len)) rc = -1;
        else
            rc = deck_error_hint(err, "a value is a number, a logical or a string; quote strings that contain %s",
                                 tok_show(t, buf, sizeof buf));
    }
    free(toks);
    if (rc) {
        deck_values_free(e.values, e.nvalues);
        return -1;
    }
    *values = e.values;
    *n = e.nvalues;
    return 0;
}

const char *deck_kind_name(enum deck_kind kind)
{
    switch (kind) {
    case DECK_INT: return "an integer";
    case DECK_REAL: return "a real";
    case DECK_BOOL: return "a logical";
    case DECK_STR: return "a string";
    case DECK_WORD: return "an unquoted word";
    }
    return "a value";
}
