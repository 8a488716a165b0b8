/* json.c -- a recursive-descent JSON reader (json.h).  Depth is bounded so
 * that a hostile file cannot exhaust the stack. */
#include "json.h"

#include "file.h"
#include "log.h"
#include "utf8.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 64 };

struct parser {
    const char *s, *end, *p;
    char *err;
    size_t errlen;
    int failed;
};

static void fail(struct parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct parser *ps, const char *fmt, ...)
{
    if (ps->failed) return;
    ps->failed = 1;
    int line = 1, col = 1;
    for (const char *q = ps->s; q < ps->p && q < ps->end; q++) {
        if (*q == '\n') line++, col = 1;
        else col++;
    }
    int n = snprintf(ps->err, ps->errlen, "line %d, column %d: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < ps->errlen) vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Out of memory: the text's size, not a position (nothing is wrong there). */
static void fail_nomem(struct parser *ps)
{
    if (ps->failed) return;
    ps->failed = 1;
    size_t n = (size_t)(ps->end - ps->s);
    if (n < 1000000) snprintf(ps->err, ps->errlen, JSON_NOMEM " parsing %zu bytes of JSON", n);
    else snprintf(ps->err, ps->errlen, JSON_NOMEM " parsing %.1f MB of JSON", (double)n / 1e6);
}

/* A byte as an error message may show it: itself if printable, else its
 * code (a NUL would end the message, a control byte garble the terminal). */
static const char *shown(char c, char buf[8])
{
    unsigned char u = (unsigned char)c;
    if (u >= 0x20 && u < 0x7f) snprintf(buf, 8, "'%c'", c);
    else snprintf(buf, 8, "0x%02x", u);
    return buf;
}

static void skip_space(struct parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int literal(struct parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return 0;
    ps->p += n;
    return 1;
}

static int hex4(struct parser *ps, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        if (ps->p >= ps->end) return 0;
        char c = *ps->p;
        unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0') : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
        if (d > 15) return 0;
        *v = *v * 16 + d;
    }
    return 1;
}

/* A string after its opening quote; the UTF-8 bytes pass through, escapes are resolved. */
static char *string(struct parser *ps)
{
    size_t cap = 32, n = 0;
    char *out = malloc(cap);
    while (out && ps->p < ps->end && *ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p++;
        unsigned cp = c;
        if (c < 0x20) {
            ps->p--;
            fail(ps, "a control character (0x%02x) inside a string", c);
            break;
        }
        if (c >= 0x80) { /* a UTF-8 sequence, copied whole once it is well-formed */
            int len = utf8_length((const unsigned char *)ps->p - 1, (size_t)(ps->end - (ps->p - 1)));
            if (len == 0) {
                ps->p--;
                fail(ps, "a byte 0x%02x that is not well-formed UTF-8 inside a string", c);
                break;
            }
            if (n + (size_t)len + 1 > cap) {
                char *bigger = realloc(out, cap = 2 * cap + (size_t)len);
                if (!bigger) {
                    free(out);
                    out = NULL;
                    break;
                }
                out = bigger;
            }
            memcpy(out + n, ps->p - 1, (size_t)len);
            n += (size_t)len;
            ps->p += len - 1;
            continue;
        }
        if (c == '\\') {
            if (ps->p >= ps->end) break;
            char e = *ps->p++;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                if (!hex4(ps, &cp)) {
                    fail(ps, "a \\u escape needs 4 hexadecimal digits");
                    break;
                }
                if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
                    unsigned lo;
                    if (!literal(ps, "\\u") || !hex4(ps, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                        fail(ps, "a high surrogate \\u%04X without its low half", cp);
                        break;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    fail(ps, "a low surrogate \\u%04X without its high half", cp);
                    break;
                }
                if (cp == 0) fail(ps, "\\u0000 inside a string");
                break;
            }
            default:
                ps->p--;
                if (e > 0x20 && e < 0x7f) fail(ps, "unknown escape '\\%c'", e);
                else fail(ps, "a backslash before the byte 0x%02x, which is no escape", (unsigned char)e);
            }
            if (ps->failed) break;
        }
        char buf[4];
        int k = 0;
        if (c == '\\' && cp >= 0x80) { /* encode the escaped code point */
            if (cp < 0x800) buf[k++] = (char)(0xC0 | cp >> 6);
            else if (cp < 0x10000) buf[k++] = (char)(0xE0 | cp >> 12), buf[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
            else
                buf[k++] = (char)(0xF0 | cp >> 18), buf[k++] = (char)(0x80 | (cp >> 12 & 0x3F)),
                buf[k++] = (char)(0x80 | (cp >> 6 & 0x3F));
            buf[k++] = (char)(0x80 | (cp & 0x3F));
        } else {
            buf[k++] = (char)cp;
        }
        if (n + (size_t)k + 1 > cap) {
            char *bigger = realloc(out, cap *= 2);
            if (!bigger) {
                free(out);
                out = NULL;
                break;
            }
            out = bigger;
        }
        memcpy(out + n, buf, (size_t)k);
        n += (size_t)k;
    }
    if (!out) {
        fail_nomem(ps);
        return NULL;
    }
    if (!ps->failed && ps->p >= ps->end) fail(ps, "a string is not closed");
    if (ps->failed) {
        free(out);
        return NULL;
    }
    ps->p++; /* the closing quote */
    out[n] = '\0';
    return out;
}

static int number(struct parser *ps, double *v)
{
    const char *q = ps->p;
    if (q < ps->end && *q == '-') q++;
    if (q >= ps->end || *q < '0' || *q > '9') return 0;
    if (*q == '0') q++;
    else
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    if (q < ps->end && *q == '.') {
        q++;
        if (q >= ps->end || *q < '0' || *q > '9') return 0;
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || *q < '0' || *q > '9') return 0;
        while (q < ps->end && *q >= '0' && *q <= '9') q++;
    }
    char buf[64];
    size_t n = (size_t)(q - ps->p);
    if (n >= sizeof buf) return 0;
    memcpy(buf, ps->p, n);
    buf[n] = '\0';
    *v = strtod(buf, NULL);
    ps->p = q;
    return 1;
}

static int value(struct parser *ps, struct json *v, int depth);

/* Append one element (and its key) to an array or object. */
static struct json *grow(struct parser *ps, struct json *v, char *key)
{
    /* capacity doubles at each power of two: n + 1 elements fit in 2n */
    int grows = v->n == 0 || (v->n & (v->n - 1)) == 0;
    size_t cap = v->n == 0 ? 1 : 2 * (size_t)v->n;
    struct json *items = grows ? realloc(v->item, cap * sizeof *items) : v->item;
    if (items) v->item = items;
    if (items && v->kind == JSON_OBJECT && grows) {
        char **keys = realloc(v->key, cap * sizeof *keys);
        if (!keys) items = NULL;
        else v->key = keys;
    }
    if (items && v->kind == JSON_OBJECT) v->key[v->n] = key;
    if (!items) {
        fail_nomem(ps);
        free(key);
        return NULL;
    }
    memset(&v->item[v->n], 0, sizeof v->item[v->n]);
    return &v->item[v->n++];
}

static int container(struct parser *ps, struct json *v, int depth, char close)
{
    v->kind = close == '}' ? JSON_OBJECT : JSON_ARRAY;
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        skip_space(ps);
        if (v->kind == JSON_OBJECT) {
            if (ps->p >= ps->end || *ps->p != '"') {
                fail(ps, "expected a member name in quotes");
                return -1;
            }
            ps->p++;
            if (!(key = string(ps))) return -1;
            skip_space(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                fail(ps, "expected ':' after the member name \"%s\"", key);
                free(key);
                return -1;
            }
            ps->p++;
        }
        struct json *item = grow(ps, v, key);
        if (!item || value(ps, item, depth + 1)) return -1;
        skip_space(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return 0;
        }
        fail(ps, "expected ',' or '%c'", close);
        return -1;
    }
}

static int value(struct parser *ps, struct json *v, int depth)
{
    if (depth > JSON_MAX_DEPTH) {
        fail(ps, "nested more than %d levels deep", JSON_MAX_DEPTH);
        return -1;
    }
    skip_space(ps);
    if (ps->p >= ps->end) {
        fail(ps, "the text ends where a value should be");
        return -1;
    }
    char c = *ps->p;
    if (c == '{' || c == '[') {
        ps->p++;
        return container(ps, v, depth, c == '{' ? '}' : ']');
    }
    if (c == '"') {
        ps->p++;
        v->kind = JSON_STRING;
        return (v->string = string(ps)) ? 0 : -1;
    }
    if (literal(ps, "true")) return v->kind = JSON_TRUE, 0;
    if (literal(ps, "false")) return v->kind = JSON_FALSE, 0;
    if (literal(ps, "null")) return v->kind = JSON_NULL, 0;
    v->kind = JSON_NUMBER;
    if (number(ps, &v->number)) return 0;
    char b[8];
    fail(ps, "%s does not start a value", shown(c, b));
    return -1;
}

static void release(struct json *v)
{
    for (int i = 0; i < v->n; i++) {
        release(&v->item[i]);
        if (v->key) free(v->key[i]);
    }
    free(v->item);
    free(v->key);
    free(v->string);
}

void json_free(struct json *v)
{
    if (!v) return;
    release(v);
    free(v);
}

struct json *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct parser ps = { .s = text, .end = text + len, .p = text, .err = err, .errlen = errlen };
    struct json *v = calloc(1, sizeof *v);
    if (!v) {
        fail_nomem(&ps);
        return NULL;
    }
    if (value(&ps, v, 0) == 0) {
        skip_space(&ps);
        if (ps.p < ps.end) fail(&ps, "text after the end of the value");
    }
    if (ps.failed) {
        json_free(v);
        return NULL;
    }
    return v;
}

struct json *json_parse_object(const char *text, size_t len, char *err, size_t errlen)
{
    static const char *const kinds[] = {[JSON_NULL] = "null", [JSON_FALSE] = "false", [JSON_TRUE] = "true",
                                        [JSON_NUMBER] = "a number", [JSON_STRING] = "a string", [JSON_ARRAY] = "an array"};
    char why[256];
    struct json *v = json_parse(text, len, why, sizeof why);
    if (v && v->kind == JSON_OBJECT) return v;
    if (v) snprintf(err, errlen, "not a JSON object (it is %s)", kinds[v->kind]);
    else if (strncmp(why, JSON_NOMEM, strlen(JSON_NOMEM)) == 0) snprintf(err, errlen, "%s", why);
    else snprintf(err, errlen, "not a JSON object (%s)", why);
    json_free(v);
    return NULL;
}

int json_read_file(const char *path, size_t max, const char *what, struct json **out, char *err, size_t errlen)
{
    char *text, why[256];
    size_t len;
    *out = NULL;
    int e = file_read_all(path, max, what, &text, &len, why, sizeof why);
    if (!e) {
        *out = json_parse_object(text, len, why, sizeof why);
        free(text);
        if (!*out) e = -1;
    }
    if (e) errorf(err, errlen, "%s: %s", path, why); /* (errorf: control characters made printable) */
    return e;
}

const struct json *json_get(const struct json *obj, const char *key)
{
    if (!obj || obj->kind != JSON_OBJECT) return NULL;
    for (int i = obj->n - 1; i >= 0; i--)
        if (strcmp(obj->key[i], key) == 0) return &obj->item[i];
    return NULL;
}

static int cmp_keys(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

const char *json_duplicate_key(const struct json *obj)
{
    if (!obj || obj->kind != JSON_OBJECT || obj->n < 2) return NULL;
    char **keys = malloc((size_t)obj->n * sizeof *keys);
    if (!keys) return NULL;
    memcpy(keys, obj->key, (size_t)obj->n * sizeof *keys);
    qsort(keys, (size_t)obj->n, sizeof *keys, cmp_keys);
    const char *dup = NULL;
    for (int i = 1; i < obj->n && !dup; i++)
        if (strcmp(keys[i - 1], keys[i]) == 0) dup = keys[i];
    free(keys);
    return dup;
}

int json_int(const struct json *obj, const char *key, long long *out)
{
    const struct json *v = json_get(obj, key);
    if (!v || v->kind != JSON_NUMBER || v->number != floor(v->number) || fabs(v->number) > 9007199254740992.0)
        return -1;
    *out = (long long)v->number;
    return 0;
}
