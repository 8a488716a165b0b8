/* safetensors.c -- the safetensors container (safetensors.h). */
#include "safetensors.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "precision.h"

/* The format's own bound on the header (the Rust reader's MAX_HEADER_SIZE). */
enum { ST_MAX_HEADER = 100000000 };

/* Every dtype of the format, with its width in bits (for the byte count of
 * a tensor triad does not read); the first three are the ones it reads. */
static const struct { const char *name; int bits; } dtypes[] = {
    {"F32", 32},     {"F16", 16},     {"BF16", 16},    {"F64", 64},     {"I64", 64}, {"U64", 64}, {"I32", 32},
    {"U32", 32},     {"I16", 16},     {"U16", 16},     {"I8", 8},       {"U8", 8},   {"BOOL", 8}, {"F8_E4M3", 8},
    {"F8_E5M2", 8},  {"F8_E8M0", 8},  {"F6_E2M3", 6},  {"F6_E3M2", 6},  {"F4", 4},
};
enum { ST_READABLE = 3 }; /* dtypes[0 .. 3): enum st_dtype */

const char *st_dtype_name(enum st_dtype d) { return dtypes[d].name; }
size_t st_dtype_size(enum st_dtype d) { return (size_t)dtypes[d].bits / 8; }

static int bad(char *err, size_t errlen, const char *path, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int bad(char *err, size_t errlen, const char *path, const char *name, const char *fmt, ...)
{
    int n = name ? snprintf(err, errlen, "%s: tensor '%s': ", path, name) : snprintf(err, errlen, "%s: ", path);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < errlen) vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    text_printable(err);
    return -1;
}

/* A JSON number that is a whole number in [0, 2^53] (exact in a double). */
static int whole(const struct json *v, uint64_t *out)
{
    if (v->kind != JSON_NUMBER || !(v->number >= 0) || v->number > 9007199254740992.0 ||
        v->number != (double)(uint64_t)v->number)
        return 0;
    *out = (uint64_t)v->number;
    return 1;
}

/* One header member: {"dtype": ..., "shape": [...], "data_offsets": [b, e]},
 * its byte count that of its dtype and shape (products checked for overflow). */
static int parse_tensor(struct st_tensor *t, const char *name, const struct json *v, uint64_t data_size,
                        const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return bad(err, errlen, path, NULL, "out of memory");
    const struct json *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
    if (v->kind != JSON_OBJECT || !dt || dt->kind != JSON_STRING || !sh || sh->kind != JSON_ARRAY || !off ||
        off->kind != JSON_ARRAY || off->n != 2)
        return bad(err, errlen, path, name, "malformed header entry: it needs \"dtype\" (a string), \"shape\" (an "
                   "array) and \"data_offsets\" (two numbers)");
    size_t k = 0;
    while (k < sizeof dtypes / sizeof dtypes[0] && strcmp(dtypes[k].name, dt->string) != 0) k++;
    if (k == sizeof dtypes / sizeof dtypes[0])
        return bad(err, errlen, path, name, "dtype \"%.40s\" is not one of the format's", dt->string);
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", dtypes[k].name);
    t->readable = k < ST_READABLE;
    t->dtype = t->readable ? (enum st_dtype)k : ST_F32;
    if (sh->n > 8) return bad(err, errlen, path, name, "%d dimensions; triad reads at most 8", sh->n);
    t->rank = sh->n;
    uint64_t elems = 1, bits;
    for (int i = 0; i < sh->n; i++) {
        uint64_t x;
        if (!whole(&sh->item[i], &x)) return bad(err, errlen, path, name, "shape entry %d is not a non-negative integer", i);
        t->shape[i] = (int64_t)x;
        if (__builtin_mul_overflow(elems, x, &elems))
            return bad(err, errlen, path, name, "the shape's element count overflows 64 bits");
    }
    uint64_t b, e;
    if (!whole(&off->item[0], &b) || !whole(&off->item[1], &e))
        return bad(err, errlen, path, name, "a data offset is not a non-negative integer");
    t->begin = b, t->end = e;
    if (b > e) return bad(err, errlen, path, name, "data_offsets [%llu, %llu) end before they begin",
                          (unsigned long long)b, (unsigned long long)e);
    if (e > data_size)
        return bad(err, errlen, path, name, "data_offsets [%llu, %llu) reach past the end of the data (%llu bytes): "
                   "the file is truncated or its header is wrong", (unsigned long long)b, (unsigned long long)e,
                   (unsigned long long)data_size);
    if (__builtin_mul_overflow(elems, (uint64_t)dtypes[k].bits, &bits) || bits % 8 != 0 || e - b != bits / 8)
        return bad(err, errlen, path, name, "%llu bytes of data for %llu %s elements of its shape",
                   (unsigned long long)(e - b), (unsigned long long)elems, dtypes[k].name);
    return 0;
}

static int cmp_offsets(const void *a, const void *b)
{
    const struct st_tensor *x = a, *y = b;
    return x->begin != y->begin ? (x->begin > y->begin ? 1 : -1) : (x->end > y->end) - (x->end < y->end);
}

/* The tensors tile the data exactly, in offset order: each begins where the
 * one before ends, the first at 0, the last at the end of the file. */
static int check_tiling(struct st_file *f, uint64_t data_size, char *err, size_t errlen)
{
    qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_offsets);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        const struct st_tensor *t = &f->t[i];
        if (t->begin > at && i == 0)
            return bad(err, errlen, f->path, t->name, "the first tensor begins at byte %llu of the data, not 0: a hole "
                       "(the header is wrong, or its length is off)", (unsigned long long)t->begin);
        if (t->begin > at)
            return bad(err, errlen, f->path, t->name, "begins at byte %llu of the data, but tensor '%s' ends at %llu: "
                       "a hole of %llu bytes (the header is wrong)", (unsigned long long)t->begin, f->t[i - 1].name,
                       (unsigned long long)at, (unsigned long long)(t->begin - at));
        if (t->begin < at)
            return bad(err, errlen, f->path, t->name, "bytes [%llu, %llu) of the data overlap tensor '%s', which ends "
                       "at %llu", (unsigned long long)t->begin, (unsigned long long)t->end, f->t[i - 1].name,
                       (unsigned long long)at);
        at = t->end;
    }
    if (at != data_size)
        return bad(err, errlen, f->path, NULL, "%llu byte%s follow%s the last tensor's data (the data section is %llu "
                   "bytes, its tensors end at %llu): the header length or the offsets are wrong",
                   (unsigned long long)(data_size - at), data_size - at == 1 ? "" : "s", data_size - at == 1 ? "s" : "",
                   (unsigned long long)data_size, (unsigned long long)at);
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp((*(struct st_tensor *const *)a)->name, (*(struct st_tensor *const *)b)->name);
}

/* The header object: __metadata__ a map of strings, no name twice, each
 * tensor consistent, and together the tensors tile the data. */
static int parse_header(struct st_file *f, const struct json *h, uint64_t data_size, char *err, size_t errlen)
{
    const char *dup = json_duplicate_key(h);
    if (dup) return bad(err, errlen, f->path, dup, "named twice in the header");
    f->t = calloc((size_t)h->n + 1, sizeof *f->t);
    if (!f->t) return bad(err, errlen, f->path, NULL, "out of memory");
    for (int i = 0; i < h->n; i++) {
        const struct json *v = &h->item[i];
        if (strcmp(h->key[i], "__metadata__") == 0) {
            for (int j = 0; v->kind == JSON_OBJECT && j < v->n; j++)
                if (v->item[j].kind != JSON_STRING)
                    return bad(err, errlen, f->path, NULL, "__metadata__[\"%.60s\"] is not a string: the format's "
                               "metadata is a map of strings to strings", v->key[j]);
            if (v->kind != JSON_OBJECT)
                return bad(err, errlen, f->path, NULL, "__metadata__ is not an object of strings");
            continue;
        }
        int rc = parse_tensor(&f->t[f->n], h->key[i], v, data_size, f->path, err, errlen);
        f->n++;
        if (rc) return -1;
    }
    if (check_tiling(f, data_size, err, errlen) != 0) return -1;
    f->by_name = malloc(((size_t)f->n + 1) * sizeof *f->by_name);
    if (!f->by_name) return bad(err, errlen, f->path, NULL, "out of memory");
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->t[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_names);
    return 0;
}

int st_open(struct st_file *f, const char *path, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return bad(err, errlen, path, NULL, "cannot open it: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return bad(err, errlen, path, NULL, "%s, not a safetensors file", S_ISDIR(sb.st_mode) ? "a directory" :
                   "not a regular file");
    }
    unsigned char len8[8];
    uint64_t hlen = 0, size = (uint64_t)sb.st_size;
    ssize_t got = size < 8 ? 0 : pread(fd, len8, 8, 0);
    if (got != 8) {
        int e = errno;
        close(fd);
        return got < 0 ? bad(err, errlen, path, NULL, "cannot read it: %s", strerror(e))
                       : bad(err, errlen, path, NULL, "%llu bytes: shorter than the 8 bytes of a safetensors header "
                             "length", (unsigned long long)size);
    }
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > ST_MAX_HEADER || hlen + 8 > size) {
        close(fd);
        return bad(err, errlen, path, NULL, "the header length %llu does not fit the file of %llu bytes%s: not a "
                   "safetensors file, or truncated", (unsigned long long)hlen, (unsigned long long)size,
                   hlen > ST_MAX_HEADER ? " (the format allows at most 100000000)" : "");
    }
    char *text = malloc(hlen ? hlen : 1), jerr[200];
    got = text ? pread(fd, text, hlen, 8) : -1;
    if (got != (ssize_t)hlen) {
        int e = got < 0 ? errno : EIO;
        free(text);
        close(fd);
        return bad(err, errlen, path, NULL, "cannot read its header: %s", strerror(e));
    }
    struct json *h = hlen && text[0] == '{' ? json_parse_object(text, hlen, jerr, sizeof jerr) : NULL;
    if (hlen == 0 || text[0] != '{') snprintf(jerr, sizeof jerr, "not a JSON object (it does not begin with '{')");
    free(text);
    if (!h) {
        close(fd);
        return bad(err, errlen, path, NULL, "its header: %s", jerr);
    }
    f->fd = fd;
    f->path = strdup(path);
    f->data_start = 8 + hlen;
    int rc = f->path ? parse_header(f, h, size - f->data_start, err, errlen) : bad(err, errlen, path, NULL, "out of memory");
    json_free(h);
    if (rc) st_close(f);
    return rc;
}

void st_close(struct st_file *f)
{
    for (int i = 0; f->t && i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f->by_name);
    free(f->path);
    if (f->fd >= 0) close(f->fd);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    struct st_tensor key = {.name = (char *)name}, *k = &key;
    struct st_tensor **t = f->by_name ? bsearch(&k, f->by_name, (size_t)f->n, sizeof k, cmp_names) : NULL;
    return t ? *t : NULL;
}

int st_pread(int fd, uint64_t at, enum st_dtype dtype, size_t n, float *dst)
{
    size_t es = st_dtype_size(dtype), bytes = n * es, done = 0;
    unsigned char *buf = dtype == ST_F32 ? (unsigned char *)dst : malloc(bytes ? bytes : 1);
    if (!buf) return -1;
    while (done < bytes) {
        ssize_t r = pread(fd, buf + done, bytes - done, (off_t)(at + done));
        if (r <= 0) {
            if (r == 0) errno = EIO; /* the file ends early */
            if (buf != (unsigned char *)dst) free(buf);
            return -1;
        }
        done += (size_t)r;
    }
    if (dtype != ST_F32) { /* little-endian 16-bit patterns, as this processor's */
        const uint16_t *h = (const uint16_t *)buf;
        for (size_t i = 0; i < n; i++) dst[i] = dtype == ST_BF16 ? f32_from_bf16(h[i]) : f32_from_fp16(h[i]);
        free(buf);
    }
    return 0;
}

/* ------------------------------------------------------------ writing */

int st_begin(struct st_writer *w, const char *path, enum st_dtype dtype, const struct st_out *t, int n,
             const char *metadata_json, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->dtype = dtype;
    size_t cap = 256 + (size_t)n * 320 + (metadata_json ? strlen(metadata_json) : 0), len = 0;
    char *h = malloc(cap);
    if (!h) return bad(err, errlen, path, NULL, "out of memory");
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":%s", metadata_json ? metadata_json : "{}");
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        uint64_t elems = 1;
        for (int d = 0; d < t[i].rank; d++) elems *= (uint64_t)t[i].shape[d];
        uint64_t end = at + elems * st_dtype_size(dtype);
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name,
                                dtypes[dtype].name);
        for (int d = 0; d < t[i].rank; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)at,
                                (unsigned long long)end);
        at = end;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8) h[len++] = ' '; /* the data starts 8-byte aligned, as Hugging Face's writer pads */
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)len >> (8 * i));
    w->fp = fopen(path, "wb");
    if (!w->fp || fwrite(len8, 1, 8, w->fp) != 8 || fwrite(h, 1, len, w->fp) != len) {
        free(h);
        if (w->fp) fclose(w->fp);
        w->fp = NULL;
        return bad(err, errlen, path, NULL, "%s", strerror(errno));
    }
    free(h);
    return 0;
}

size_t st_first_overflow(enum st_dtype dtype, const float *x, size_t n)
{
    for (size_t i = 0; dtype != ST_F32 && i < n; i++) {
        uint16_t h = dtype == ST_BF16 ? bf16_from_f32(x[i]) : fp16_from_f32(x[i]);
        if (isfinite(x[i]) && (h & 0x7fffu) == (dtype == ST_BF16 ? 0x7f80u : 0x7c00u)) return i;
    }
    return n;
}

int st_put(struct st_writer *w, const float *x, size_t n)
{
    if (w->failed) return -1;
    if (st_first_overflow(w->dtype, x, n) < n) /* (a finite weight is never written as an infinity) */
        return w->failed = ERANGE, -1;
    errno = 0;
    if (w->dtype == ST_F32) {
        w->failed = fwrite(x, sizeof *x, n, w->fp) != n ? (errno ? errno : EIO) : 0;
        return w->failed ? -1 : 0;
    }
    uint16_t buf[4096];
    for (size_t i = 0; i < n && !w->failed; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        lp_pack(w->dtype == ST_BF16 ? PREC_BF16 : PREC_FP16, buf, x + i, k);
        w->failed = fwrite(buf, sizeof *buf, k, w->fp) != k ? (errno ? errno : EIO) : 0;
    }
    return w->failed ? -1 : 0;
}

int st_end(struct st_writer *w, char *err, size_t errlen)
{
    errno = 0;
    int rc = w->failed || fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0;
    int saved = w->failed ? w->failed : errno;
    if (fclose(w->fp) != 0) rc = 1;
    w->fp = NULL;
    if (rc) snprintf(err, errlen, "writing the safetensors file failed: %s", strerror(saved ? saved : EIO));
    return rc ? -1 : 0;
}
