/* safetensors.c -- the safetensors container (safetensors.h). */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "precision.h"

enum { ST_MAX_HEADER = 100 << 20 }; /* the format's own bound on the header */

static const struct { const char *name; enum st_dtype d; size_t size; } dtypes[] = {
    {"F32", ST_F32, 4}, {"F16", ST_F16, 2}, {"BF16", ST_BF16, 2},
};

const char *st_dtype_name(enum st_dtype d) { return dtypes[d].name; }
size_t st_dtype_size(enum st_dtype d) { return dtypes[d].size; }

static int bad(char *err, size_t errlen, const char *path, const char *what, const char *name)
{
    if (name) snprintf(err, errlen, "%s: tensor '%s': %s", path, name, what);
    else snprintf(err, errlen, "%s: %s", path, what);
    return -1;
}

/* One header member: {"dtype": ..., "shape": [...], "data_offsets": [b, e]}. */
static int parse_tensor(struct st_tensor *t, const char *name, const struct json *v, uint64_t data_size,
                        const char *path, char *err, size_t errlen)
{
    char what[256];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return bad(err, errlen, path, "out of memory", NULL);
    const struct json *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
    if (v->kind != JSON_OBJECT || !dt || dt->kind != JSON_STRING || !sh || sh->kind != JSON_ARRAY || !off ||
        off->kind != JSON_ARRAY || off->n != 2)
        return bad(err, errlen, path, "malformed header entry: it needs \"dtype\", \"shape\" and two \"data_offsets\"",
                   name);
    size_t k = 0;
    while (k < sizeof dtypes / sizeof dtypes[0] && strcmp(dtypes[k].name, dt->string) != 0) k++;
    if (k == sizeof dtypes / sizeof dtypes[0]) {
        snprintf(what, sizeof what, "dtype %s: triad reads F32, F16 and BF16 weights", dt->string);
        return bad(err, errlen, path, what, name);
    }
    t->dtype = dtypes[k].d;
    if (sh->n > 8) return bad(err, errlen, path, "more than 8 dimensions", name);
    t->rank = sh->n;
    uint64_t elems = 1;
    for (int i = 0; i < sh->n; i++) {
        double x = sh->item[i].number;
        if (sh->item[i].kind != JSON_NUMBER || x < 0 || x != (double)(int64_t)x || x > 1e15)
            return bad(err, errlen, path, "a shape entry is not a non-negative integer", name);
        t->shape[i] = (int64_t)x;
        elems *= (uint64_t)x;
    }
    for (int i = 0; i < 2; i++) {
        double x = off->item[i].number;
        if (off->item[i].kind != JSON_NUMBER || x < 0 || x != (double)(uint64_t)x || x > 9007199254740992.0)
            return bad(err, errlen, path, "a data offset is not a non-negative integer", name);
    }
    t->begin = (uint64_t)off->item[0].number;
    t->end = (uint64_t)off->item[1].number;
    if (t->begin > t->end || t->end > data_size) {
        snprintf(what, sizeof what, "data_offsets [%llu, %llu) reach past the end of the data (%llu bytes): the "
                 "file is truncated or its header is wrong", (unsigned long long)t->begin,
                 (unsigned long long)t->end, (unsigned long long)data_size);
        return bad(err, errlen, path, what, name);
    }
    if (t->end - t->begin != elems * dtypes[k].size) {
        snprintf(what, sizeof what, "%llu bytes of data for %llu %s elements of its shape",
                 (unsigned long long)(t->end - t->begin), (unsigned long long)elems, dtypes[k].name);
        return bad(err, errlen, path, what, name);
    }
    return 0;
}

int st_open(struct st_file *f, const char *path, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    char what[256];
    int fd = open(path, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(what, sizeof what, "cannot open: %s", strerror(errno));
        if (fd >= 0) close(fd);
        return bad(err, errlen, path, what, NULL);
    }
    unsigned char len8[8];
    uint64_t hlen = 0;
    if (pread(fd, len8, 8, 0) != 8) {
        close(fd);
        return bad(err, errlen, path, "shorter than the 8 bytes of a safetensors header length", NULL);
    }
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | len8[i];
    if (hlen > ST_MAX_HEADER || hlen + 8 > (uint64_t)sb.st_size) {
        snprintf(what, sizeof what, "the header length %llu does not fit the file of %lld bytes: not a safetensors "
                 "file, or truncated", (unsigned long long)hlen, (long long)sb.st_size);
        close(fd);
        return bad(err, errlen, path, what, NULL);
    }
    char *text = malloc(hlen ? hlen : 1), jerr[200];
    if (!text || pread(fd, text, hlen, 8) != (ssize_t)hlen) {
        free(text);
        close(fd);
        return bad(err, errlen, path, "cannot read the header", NULL);
    }
    struct json *h = json_parse(text, hlen, jerr, sizeof jerr);
    free(text);
    if (!h || h->kind != JSON_OBJECT) {
        snprintf(what, sizeof what, "the header is not a JSON object (%s)", h ? "another JSON value" : jerr);
        json_free(h);
        close(fd);
        return bad(err, errlen, path, what, NULL);
    }
    f->fd = fd;
    f->path = strdup(path);
    f->data_start = 8 + hlen;
    f->t = calloc((size_t)h->n + 1, sizeof *f->t);
    int rc = f->path && f->t ? 0 : bad(err, errlen, path, "out of memory", NULL);
    for (int i = 0; rc == 0 && i < h->n; i++) {
        if (strcmp(h->key[i], "__metadata__") == 0) continue;
        rc = parse_tensor(&f->t[f->n], h->key[i], &h->item[i], (uint64_t)sb.st_size - f->data_start, path, err,
                          errlen);
        f->n++;
    }
    json_free(h);
    if (rc) st_close(f);
    return rc;
}

void st_close(struct st_file *f)
{
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    free(f->t);
    free(f->path);
    if (f->fd >= 0) close(f->fd);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

int st_pread(int fd, uint64_t at, enum st_dtype dtype, size_t n, float *dst)
{
    size_t es = dtypes[dtype].size, bytes = n * es, done = 0;
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

int st_read(const struct st_file *f, const struct st_tensor *t, uint64_t first, size_t n, float *dst, char *err,
            size_t errlen)
{
    size_t es = dtypes[t->dtype].size;
    if ((first + n) * es > t->end - t->begin) return bad(err, errlen, f->path, "read past the tensor's end", t->name);
    if (st_pread(f->fd, f->data_start + t->begin + first * es, t->dtype, n, dst) != 0)
        return bad(err, errlen, f->path, strerror(errno), t->name);
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
    if (!h) return bad(err, errlen, path, "out of memory", NULL);
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":%s", metadata_json ? metadata_json : "{}");
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        uint64_t elems = 1;
        for (int d = 0; d < t[i].rank; d++) elems *= (uint64_t)t[i].shape[d];
        uint64_t end = at + elems * dtypes[dtype].size;
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
        return bad(err, errlen, path, strerror(errno), NULL);
    }
    free(h);
    return 0;
}

int st_put(struct st_writer *w, const float *x, size_t n)
{
    if (w->failed) return -1;
    if (w->dtype == ST_F32) {
        w->failed = fwrite(x, sizeof *x, n, w->fp) != n;
        return w->failed ? -1 : 0;
    }
    uint16_t buf[4096];
    for (size_t i = 0; i < n && !w->failed; i += 4096) {
        size_t k = n - i < 4096 ? n - i : 4096;
        lp_pack(w->dtype == ST_BF16 ? PREC_BF16 : PREC_FP16, buf, x + i, k);
        w->failed = fwrite(buf, sizeof *buf, k, w->fp) != k;
    }
    return w->failed ? -1 : 0;
}

int st_end(struct st_writer *w, char *err, size_t errlen)
{
    int rc = w->failed || fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0;
    int saved = errno;
    if (fclose(w->fp) != 0) rc = 1;
    w->fp = NULL;
    if (rc) snprintf(err, errlen, "writing the safetensors file failed: %s", strerror(saved ? saved : EIO));
    return rc ? -1 : 0;
}
