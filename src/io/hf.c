/* hf.c -- weights in from Hugging Face folders and llm.c files (hf.h).
 *
 * Each of triad's tensors has one source per row part in the file (llama's
 * q, k, v and gate, up are separate tensors there) or one for all of it
 * (GPT-2's c_attn holds q, k and v; its Conv1D weights are stored [in, out],
 * the transpose of triad's).  Every rank walks its own shard's rows and
 * reads just their bytes. */
#include "hf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_tok.h"
#include "file.h"
#include "json.h"
#include "log.h"
#include "tokenizer.h"

enum { LLMC_MAGIC = 20240326, LLMC_HEADER = 256 };

enum weights_kind weights_kind_of(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) return WEIGHTS_HF;
    int32_t magic = 0;
    int fd = open(path, O_RDONLY);
    if (fd >= 0) {
        if (pread(fd, &magic, sizeof magic, 0) != sizeof magic) magic = 0;
        close(fd);
    }
    return magic == LLMC_MAGIC ? WEIGHTS_LLMC : WEIGHTS_HDF5;
}

/* ------------------------------------------------------------ reading a shard */

/* A tensor's elements in a file: (r, c) of rows x cols at byte at + (r * cols
 * + c) * size, or, transposed, the file holds it as cols x rows. */
struct src {
    int fd;
    uint64_t at;
    enum st_dtype dtype;
    int64_t rows, cols;   /* the tensor as triad sees it */
    int transposed;
    int allow_nonfinite;  /* io.allow_nonfinite_weights */
    char name[600];
};

/* n elements from element `first` of source f (counted as the file stores
 * it: row-major, [cols, rows] when transposed), each finite unless allowed. */
static int read_elems(const struct src *f, uint64_t first, size_t n, float *dst, char *err, size_t errlen)
{
    if (st_pread(f->fd, f->at + first * st_dtype_size(f->dtype), f->dtype, n, dst) != 0)
        return errorf(err, errlen, "%s: %s", f->name, strerror(errno));
    for (size_t i = 0; i < n && !f->allow_nonfinite; i++)
        if (!isfinite(dst[i])) {
            uint64_t k = first + i, w = (uint64_t)(f->transposed ? f->rows : f->cols);
            return errorf(err, errlen, "%s: element %llu (row %llu, column %llu) is %s: the weights are damaged "
                          "(set io.allow_nonfinite_weights = .true. to load them all the same)", f->name,
                          (unsigned long long)k, (unsigned long long)(k / w), (unsigned long long)(k % w),
                          isnan(dst[i]) ? "NaN" : dst[i] > 0 ? "+Inf" : "-Inf");
        }
    return 0;
}

/* A transposed source ([in, out]: GPT-2's Conv1D): the shard's rows come in
 * runs of consecutive logical rows (one per q/k/v part), each a segment of
 * every file row of its columns: parts x columns reads. */
static int load_transposed(struct model *m, enum param_id id, int j, const struct src *f, size_t rows, size_t cols,
                           float *host, char *err, size_t errlen)
{
    const struct model_dims *d = &m->d;
    float *seg = malloc((rows ? rows : 1) * sizeof *seg);
    int rc = seg ? 0 : errorf(err, errlen, "%s: out of memory for %zu floats", f->name, rows);
    for (size_t r = 0; r < rows && rc == 0;) {
        size_t lr, lc0, len = 1, x, y;
        param_logical_index(d, id, r, 0, &lr, &lc0);
        while (r + len < rows && (param_logical_index(d, id, r + len, 0, &x, &y), x == lr + len)) len++;
        for (size_t c = 0; c < cols && rc == 0; c++) {
            rc = read_elems(f, (lc0 + c) * (uint64_t)f->rows + lr, len, seg, err, errlen);
            for (size_t i = 0; i < len && rc == 0; i++) host[(r + i) * cols + c] = seg[i];
        }
        r += len;
    }
    free(seg);
    if (rc == 0) model_set_tensor(m, id, j, host);
    return rc;
}

/* This rank's shard of tensor id, local slice j, from nsrc sources (one per
 * row part, or one for the whole tensor), through host memory.  Rows past
 * the file's (the padded vocabulary) are zero; gpt2's position table takes
 * the file's first T rows. */
static int load_tensor(struct model *m, enum param_id id, int j, const struct src *s, int nsrc, char *err,
                       size_t errlen)
{
    const struct model_dims *d = &m->d;
    size_t rows, cols, lrows, lcols, part[3] = {0, 0, 0};
    param_local_shape(d, id, &rows, &cols);
    param_shape(d, id, &lrows, &lcols);
    int nparts = param_table[id].shard == SHARD_ROWS ? param_row_parts(d, id, part) : (part[0] = lrows, 1);
    if (nsrc != 1 && nsrc != nparts) return errorf(err, errlen, "internal: %d sources for %d parts", nsrc, nparts);
    size_t real = id == P_WTE || id == P_LMHEAD ? (size_t)d->V : lrows;
    float *host = alloc_aligned(rows * cols * sizeof(float) + 16);
    if (!host)
        return errorf(err, errlen, "%s: out of memory for its %zu x %zu floats", s[0].name, rows, cols);
    int rc = 0;
    if (s[0].transposed) { /* [in, out] in the file (one source) */
        rc = load_transposed(m, id, j, &s[0], rows, cols, host, err, errlen);
        free(host);
        return rc;
    }
    for (size_t r = 0; r < rows && rc == 0; r++) {
        size_t lr, lc0, p = 0, start = 0;
        param_logical_index(d, id, r, 0, &lr, &lc0);
        float *out = host + r * cols;
        if (lr >= real) {
            memset(out, 0, cols * sizeof *out);
            continue;
        }
        if (nsrc > 1)
            while (p + 1 < (size_t)nparts && lr >= start + part[p]) start += part[p++];
        const struct src *f = &s[nsrc > 1 ? p : 0];
        size_t fr = lr - start; /* the row in source f */
        rc = read_elems(f, fr * (uint64_t)f->cols + lc0, cols, out, err, errlen);
    }
    if (rc == 0) model_set_tensor(m, id, j, host);
    free(host);
    return rc;
}

/* The shape a source must have: part p's rows (all of them for one source),
 * the tensor's columns; transposed for GPT-2's Conv1D; vectors are 1-D. */
static void expected_shape(const struct model_dims *d, enum param_id id, int nsrc, int p, int transposed,
                           int64_t *rows, int64_t *cols)
{
    size_t r, c, part[3];
    param_shape(d, id, &r, &c);
    if (nsrc > 1 && param_row_parts(d, id, part) == nsrc) r = part[p];
    if (id == P_WTE || id == P_LMHEAD) r = (size_t)d->V;
    *rows = transposed ? (int64_t)c : (int64_t)r;
    *cols = transposed ? (int64_t)r : (int64_t)c;
}

/* ------------------------------------------------------------ Hugging Face names */

/* The file's names for logical slice g of tensor id (hf_tensors: layer,
 * then expert), one per row part it is kept in there, in part order; 0
 * when the architecture has no such tensor. */
static int hf_names(const struct model_dims *d, enum hf_arch a, enum param_id id, int g, char names[3][160],
                    int *transposed)
{
    const struct hf_tensor *t;
    int nt = hf_tensors(a, &t), n = 0;
    int l = param_table[id].expert ? g / d->E : g, e = param_table[id].expert ? g % d->E : 0;
    if (!param_present(d, id) || !param_slice_exists(d, id, g)) return 0;
    for (int i = 0; i < nt && n < 3; i++)
        if (t[i].id == id) {
            snprintf(names[n++], sizeof names[0], t[i].name, l, e);
            *transposed = t[i].transposed;
        }
    return n;
}

/* ------------------------------------------------------------ config.json */

enum { TEXT_MAX = 64 << 20 }; /* a config.json or an index larger than this is not one */

/* config.json or the index parsed: 0, ENOENT where there is none, or another nonzero with the reason. */
static int read_json(const char *path, struct json **out, char *why, size_t whylen)
{
    return json_read_file(path, TEXT_MAX, "a config.json or an index", out, why, whylen);
}

/* ------------------------------------------------------------ the folder */

/* The folder's safetensors files, and (sharded) the index that names the
 * file of every tensor: map's values index files[]. */
struct folder {
    int nfiles;
    struct st_file *files;
    struct json *index;       /* model.safetensors.index.json, or NULL */
    const struct json *map;   /* its weight_map */
    int *file_of;             /* map member i lives in files[file_of[i]] */
    struct member { const char *name; int i; } *by_name; /* the map's members in name order */
    char index_path[4096];
};

static int cmp_member(const void *a, const void *b)
{
    return strcmp(((const struct member *)a)->name, ((const struct member *)b)->name);
}

/* The weight_map member named `name`, or -1. */
static int map_member(const struct folder *f, const char *name)
{
    struct member key = {name, 0};
    const struct member *m = bsearch(&key, f->by_name, (size_t)f->map->n, sizeof key, cmp_member);
    return m ? m->i : -1;
}

static void folder_close(struct folder *f)
{
    for (int i = 0; i < f->nfiles; i++) st_close(&f->files[i]);
    free(f->files);
    free(f->file_of);
    free(f->by_name);
    json_free(f->index);
    memset(f, 0, sizeof *f);
}

/* The index's weight_map: each value a plain file name in the folder, no
 * tensor named twice; the distinct file names into names[] (in first-use
 * order), each member's file into f->file_of. */
static int index_files(struct folder *f, const char ***names, int *n, char *err, size_t errlen)
{
    const char *path = f->index_path;
    const struct json *map = f->map = json_get(f->index, "weight_map");
    if (!map || map->kind != JSON_OBJECT)
        return errorf(err, errlen, "%s: no \"weight_map\" object (tensor name -> file name)", path);
    const char *dup = json_duplicate_key(map);
    if (dup) return errorf(err, errlen, "%s: weight_map names tensor '%.200s' twice", path, dup);
    *names = calloc((size_t)map->n + 1, sizeof **names);
    f->file_of = calloc((size_t)map->n + 1, sizeof *f->file_of);
    f->by_name = calloc((size_t)map->n + 1, sizeof *f->by_name);
    if (!*names || !f->file_of || !f->by_name) return errorf(err, errlen, "out of memory");
    for (int i = 0; i < map->n; i++) f->by_name[i] = (struct member){map->key[i], i};
    qsort(f->by_name, (size_t)map->n, sizeof *f->by_name, cmp_member);
    *n = 0;
    for (int i = 0; i < map->n; i++) {
        const struct json *v = &map->item[i];
        if (v->kind != JSON_STRING || !v->string[0] || strchr(v->string, '/') || strcmp(v->string, ".") == 0 ||
            strcmp(v->string, "..") == 0)
            return errorf(err, errlen, "%s: weight_map['%.200s'] is %s%.200s%s, not the name of a file in the folder",
                          path, map->key[i], v->kind == JSON_STRING ? "'" : "not a string", v->kind == JSON_STRING
                          ? v->string : "", v->kind == JSON_STRING ? "'" : "");
        int k = 0;
        while (k < *n && strcmp((*names)[k], v->string) != 0) k++;
        if (k == *n) (*names)[(*n)++] = v->string;
        f->file_of[i] = k;
    }
    if (*n == 0) return errorf(err, errlen, "%s: weight_map is empty", path);
    return 0;
}

/* Sharded: every member of weight_map is in the file it names, and every
 * tensor of a shard is one the map places there (none in two shards). */
static int check_index(const struct folder *f, char *err, size_t errlen)
{
    for (int i = 0; i < f->map->n; i++)
        if (!st_find(&f->files[f->file_of[i]], f->map->key[i]))
            return errorf(err, errlen, "%s: weight_map puts tensor '%.200s' in %s, which has no such tensor",
                          f->index_path, f->map->key[i], f->files[f->file_of[i]].path);
    for (int k = 0; k < f->nfiles; k++)
        for (int t = 0; t < f->files[k].n; t++) {
            const char *name = f->files[k].t[t].name;
            int i = map_member(f, name);
            if (i < 0 || f->file_of[i] != k)
                return errorf(err, errlen, "%s holds tensor '%.200s', which %s", f->files[k].path, name,
                              i < 0 ? "the index's weight_map does not name" : "the index places in another file");
        }
    return 0;
}

/* model.safetensors, or every shard named by model.safetensors.index.json. */
static int folder_open(struct folder *f, const char *dir, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    char path[4096];
    snprintf(f->index_path, sizeof f->index_path, "%s/model.safetensors.index.json", dir);
    static const char *single[] = {"model.safetensors"};
    const char **names = NULL;
    int n = 0, rc = read_json(f->index_path, &f->index, err, errlen);
    if (rc == 0) rc = index_files(f, &names, &n, err, errlen);
    else if (rc == ENOENT) n = 1, rc = 0;
    else rc = -1;
    f->files = rc == 0 ? calloc((size_t)n, sizeof *f->files) : NULL;
    if (rc == 0 && !f->files) rc = errorf(err, errlen, "out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, f->index ? names[i] : single[0]);
        rc = st_open(&f->files[i], path, err, errlen);
        if (rc == 0) f->nfiles++;
    }
    if (rc == 0 && f->index) rc = check_index(f, err, errlen);
    free(names);
    if (rc) folder_close(f);
    return rc;
}

/* The file and header entry of tensor `name`, or NULL. */
static const struct st_tensor *folder_lookup(const struct folder *f, const char *name, const struct st_file **file)
{
    int k = 0;
    if (f->index) {
        int i = map_member(f, name);
        if (i < 0) return NULL;
        k = f->file_of[i];
    }
    *file = &f->files[k];
    return st_find(*file, name);
}

/* Source s of tensor `name` (or GPT2LMHeadModel's "transformer."-prefixed
 * one, as its save_pretrained writes it): its dtype one triad reads and its
 * shape exactly [rows, cols] ([n] for a vector), or for the position table
 * at least seq_len rows. */
static int folder_find(const struct folder *f, const char *name, int gpt2, int64_t rows, int64_t cols, int pos,
                       struct src *s, char *err, size_t errlen)
{
    char prefixed[512];
    snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
    const struct st_file *file = NULL;
    const struct st_tensor *t = folder_lookup(f, name, &file);
    if (!t && gpt2) t = folder_lookup(f, name = prefixed, &file);
    if (!t)
        return errorf(err, errlen, "no tensor '%s'%s in the folder's safetensors files", name == prefixed ? name + 12 :
                      name, gpt2 ? " (nor 'transformer.' before it)" : "");
    if (!t->readable)
        return errorf(err, errlen, "%s: tensor '%s': dtype %s: triad reads F32, F16 and BF16 weights", file->path, name,
                      t->dtype_name);
    int want = cols == 1 ? 1 : 2;
    int64_t r = t->rank > 0 ? t->shape[0] : 1, c = t->rank > 1 ? t->shape[1] : 1;
    if (t->rank != want || (pos ? r < rows : r != rows) || c != cols) {
        char shape[200] = "";
        for (int i = 0; i < t->rank; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (want == 1)
            return errorf(err, errlen, "tensor '%s' is [%s]; this model needs [%lld]", name, shape, (long long)rows);
        return errorf(err, errlen, "tensor '%s' is [%s]; this model needs [%lld, %lld]", name, shape, (long long)rows,
                      (long long)cols);
    }
    snprintf(s->name, sizeof s->name, "%s: tensor '%s'", file->path, name);
    s->fd = file->fd;
    s->at = file->data_start + t->begin;
    s->dtype = t->dtype;
    s->rows = r;
    s->cols = c;
    return 0;
}

/* The layer a tensor name of architecture a's folders is in, or -1. */
static long layer_of(enum hf_arch a, const char *name)
{
    const char *pre = a == HF_GPT2 ? "h." : "model.layers.";
    if (a == HF_GPT2 && strncmp(name, "transformer.", 12) == 0) name += 12;
    if (strncmp(name, pre, strlen(pre)) != 0) return -1;
    name += strlen(pre);
    char *end;
    long l = *name >= '0' && *name <= '9' ? strtol(name, &end, 10) : -1;
    return l >= 0 && *end == '.' ? l : -1;
}

/* Do tensors a (of file fa) and b (of fb) hold the same dtype, shape and
 * bytes?  1 yes, 0 no (or unreadable: then they are not known to be), -1
 * out of memory. */
static int same_tensor(const struct st_file *fa, const struct st_tensor *a, const struct st_file *fb,
                       const struct st_tensor *b)
{
    if (strcmp(a->dtype_name, b->dtype_name) != 0 || a->rank != b->rank || a->end - a->begin != b->end - b->begin)
        return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    enum { PART = 1 << 20 };
    char *x = malloc(2 * PART), *y = x + PART;
    if (!x) return -1;
    int same = 1;
    for (uint64_t at = 0, n = a->end - a->begin; same && at < n; at += PART) {
        size_t k = n - at < PART ? (size_t)(n - at) : PART;
        same = pread(fa->fd, x, k, (off_t)(fa->data_start + a->begin + at)) == (ssize_t)k &&
               pread(fb->fd, y, k, (off_t)(fb->data_start + b->begin + at)) == (ssize_t)k && memcmp(x, y, k) == 0;
    }
    free(x);
    return same;
}

/* Every tensor of the folder is one the whole model reads (every rank's
 * slices, walked as load_folder names them) or a buffer (hf_is_buffer):
 * a layer past n_layer, a head the tied model ignores (unless it is the
 * embedding's copy, byte for byte, as some writers store it), a tensor of
 * another architecture are errors, never weights dropped silently.  (A
 * tensor the model needs and the folder lacks is load_folder's error: with
 * one missing, nothing is said here.) */
static int check_unread(const struct model_dims *d, enum hf_arch a, const struct folder *f, char *err, size_t errlen)
{
    unsigned char **used = calloc((size_t)f->nfiles + 1, sizeof *used);
    if (!used) return errorf(err, errlen, "out of memory");
    int rc = 0, missing = 0;
    for (int k = 0; k < f->nfiles; k++)
        if (!(used[k] = calloc((size_t)f->files[k].n + 1, 1))) {
            for (int j = 0; j < k; j++) free(used[j]);
            free(used);
            return errorf(err, errlen, "out of memory");
        }
    for (int id = 0; id < NUM_PARAMS; id++)
        for (int g = 0; g < param_slices(d, (enum param_id)id); g++) {
            char names[3][160], prefixed[512];
            int tr, n = hf_names(d, a, (enum param_id)id, g, names, &tr);
            for (int p = 0; p < n; p++) {
                const struct st_file *file = NULL;
                const struct st_tensor *t = folder_lookup(f, names[p], &file);
                snprintf(prefixed, sizeof prefixed, "transformer.%s", names[p]);
                if (!t && a == HF_GPT2) t = folder_lookup(f, prefixed, &file);
                if (t) used[file - f->files][t - file->t] = 1;
                else missing = 1;
            }
        }
    for (int k = 0; rc == 0 && !missing && k < f->nfiles; k++)
        for (int i = 0; i < f->files[k].n; i++) {
            const char *name = f->files[k].t[i].name;
            if (used[k][i] || hf_is_buffer(a, name)) continue;
            if (d->tied && strcmp(name, "lm_head.weight") == 0) { /* (the embedding's copy: what it ties to) */
                char emb[3][160], prefixed[512];
                int tr;
                hf_names(d, a, P_WTE, 0, emb, &tr);
                const struct st_file *ef = NULL;
                const struct st_tensor *e = folder_lookup(f, emb[0], &ef);
                snprintf(prefixed, sizeof prefixed, "transformer.%s", emb[0]);
                if (!e && a == HF_GPT2) e = folder_lookup(f, prefixed, &ef);
                int same = e ? same_tensor(&f->files[k], &f->files[k].t[i], ef, e) : 0;
                if (same < 0) {
                    rc = errorf(err, errlen, "out of memory comparing lm_head.weight with the embedding");
                    break;
                }
                if (same) continue;
            }
            long l = layer_of(a, name);
            char why[600];
            if (l >= d->L)
                snprintf(why, sizeof why, "it is of layer %ld, and config.json's %s = %d (the deck's n_layer) has "
                         "layers 0 .. %d: the file holds a deeper model than config.json describes; set %s (and "
                         "the deck's n_layer) to the file's layers", l, a == HF_GPT2 ? "n_layer" : "num_hidden_layers",
                         d->L, d->L - 1, a == HF_GPT2 ? "n_layer" : "num_hidden_layers");
            else if (d->tied && strcmp(name, "lm_head.weight") == 0)
                snprintf(why, sizeof why, "config.json ties the head to the embedding (tie_word_embeddings, the "
                         "deck's tie_embeddings = .true.), and this head is not the embedding's copy, so it would be "
                         "ignored: if the model has a head of its own, set tie_word_embeddings to false in "
                         "config.json and tie_embeddings = .false. in the deck; else remove it from the file");
            else
                snprintf(why, sizeof why, "%s has no such tensor (docs/formats.md lists the names), so the file "
                         "holds a model that config.json does not describe or triad does not compute: remove the "
                         "tensor, or use a folder of that class", hf_class(a));
            rc = errorf(err, errlen, "%s holds tensor '%.200s', which the model does not read: %s", f->files[k].path,
                        name, why);
            break;
        }
    for (int k = 0; k < f->nfiles; k++) free(used[k]);
    free(used);
    return rc;
}

/* Every slice of every tensor this rank holds, from the folder of
 * architecture a. */
static int load_folder(struct model *m, enum hf_arch a, const struct folder *f, int allow_nonfinite, char *err,
                       size_t errlen)
{
    const struct model_dims *d = &m->d;
    for (int id = 0; id < NUM_PARAMS; id++) {
        int slices = m->size[id] == 0 ? 0 : param_local_slices(d, (enum param_id)id);
        for (int j = 0; j < slices; j++) {
            char names[3][160];
            struct src s[3];
            int tr = 0, n = hf_names(d, a, (enum param_id)id, param_slice_global(d, (enum param_id)id, j), names, &tr);
            for (int p = 0; p < n; p++) {
                int64_t er, ec;
                expected_shape(d, (enum param_id)id, n, p, tr, &er, &ec);
                if (folder_find(f, names[p], a == HF_GPT2, er, ec, id == P_WPE, &s[p], err, errlen) != 0) return -1;
                s[p].transposed = tr;
                s[p].allow_nonfinite = allow_nonfinite;
                if (tr) s[p].rows = ec, s[p].cols = er; /* as triad sees it */
            }
            if (n > 0 && load_tensor(m, (enum param_id)id, j, s, n, err, errlen)) return -1;
        }
    }
    return 0;
}

int hf_load(const char *dir, struct model *m, const struct grid *g, int allow_nonfinite, char *err, size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    struct json *cfg = NULL;
    enum hf_arch arch = HF_LLAMA;
    int rc = read_json(path, &cfg, err, errlen);
    if (rc == ENOENT)
        rc = errorf(err, errlen, "%s: there is none: a Hugging Face model folder has config.json and "
                    "model.safetensors", path);
    else if (rc) rc = -1;
    if (rc == 0) rc = hf_check_config(&m->d, cfg, path, &arch, err, errlen);
    json_free(cfg);
    struct folder f = {0};
    if (rc == 0) rc = folder_open(&f, dir, err, errlen);
    if (rc == 0) rc = check_unread(&m->d, arch, &f, err, errlen);
    if (rc == 0) rc = load_folder(m, arch, &f, allow_nonfinite, err, errlen);
    folder_close(&f);
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}

/* Is path a tokenizer (a file, or a folder with tokenizer.json or vocab.json)? */
static int is_tokenizer(const char *path)
{
    struct stat sb;
    char f[4200];
    if (stat(path, &sb) != 0) return 0;
    if (S_ISREG(sb.st_mode)) return 1;
    snprintf(f, sizeof f, "%s/tokenizer.json", path);
    if (stat(f, &sb) == 0) return 1;
    snprintf(f, sizeof f, "%s/vocab.json", path);
    return stat(f, &sb) == 0;
}

int hf_tokenizer_of(const struct config *cfg, const char *ckpt, char *path, size_t len)
{
    if (cfg->data.tokenizer[0] && is_tokenizer(cfg->data.tokenizer))
        return snprintf(path, len, "%s", cfg->data.tokenizer), 1;
    if (cfg->io.init_from[0] && weights_kind_of(cfg->io.init_from) == WEIGHTS_HF && is_tokenizer(cfg->io.init_from))
        return snprintf(path, len, "%s", cfg->io.init_from), 1;
    if (!ckpt && !cfg->data.tokenizer[0]) return 0;
    /* the copy beside the checkpoints (hf_keep_tokenizer) */
    snprintf(path, len, "%s", ckpt ? ckpt : cfg->io.run_dir);
    char *slash = strrchr(path, '/');
    if (ckpt && slash) *slash = 0;
    else if (ckpt) snprintf(path, len, ".");
    return is_tokenizer(path);
}

/* The folder of the tokenizer at src: src itself, or the folder its file is in. */
static void tokenizer_folder(const char *src, char *dir, size_t len)
{
    struct stat sb;
    snprintf(dir, len, "%s", src);
    if (stat(src, &sb) == 0 && S_ISDIR(sb.st_mode)) return;
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, len, ".");
}

int hf_copy_tokenizer(const char *src, const char *dir, char *err, size_t errlen)
{
    char base[4096], from[4200], to[4200];
    struct stat sb, db;
    tokenizer_folder(src, base, sizeof base);
    int file = strcmp(base, src) != 0; /* (src names the tokenizer.json itself) */
    snprintf(from, sizeof from, "%s/tokenizer.json", base);
    int hf = file || stat(from, &sb) == 0;
    for (int i = 0; i < CKPT_TOK_NFILES; i++) {
        if (hf != (i < CKPT_TOK_VOCAB)) continue; /* tokenizer.json and the three beside it, or vocab.json, merges.txt */
        if (i == CKPT_TOK_JSON && file) snprintf(from, sizeof from, "%s", src);
        else snprintf(from, sizeof from, "%s/%s", base, ckpt_tok_name(i));
        snprintf(to, sizeof to, "%s/%s", dir, ckpt_tok_name(i));
        if (stat(from, &sb) != 0) continue; /* (the three beside tokenizer.json are optional) */
        if (stat(to, &db) == 0 && sb.st_dev == db.st_dev && sb.st_ino == db.st_ino) continue; /* (it is the copy) */
        if (hf_copy_file(from, to, err, errlen)) return -1;
    }
    return 0;
}

/* The model of a tokenizer at path opened, and its ids checked against V
 * (what names it: `what`).  NULL with err. */
static struct tokenizer *open_fitting(const char *path, const char *what, int V, char *err, size_t errlen)
{
    struct tokenizer *t = tok_open(path, err, errlen);
    if (t && tok_vocab_size(t) > V) {
        errorf(err, errlen, "%s %s has %d ids, more than the model's vocab_size = %d", what, path, tok_vocab_size(t), V);
        tok_close(t), t = NULL;
    }
    return t;
}

/* The tokenizer kept in ckpt, written into a new temporary folder dir
 * (mkdtemp under $TMPDIR, else /tmp): ckpt_extract_tokenizer's 1 (kept),
 * 0 (none) or -1 (err; also where the folder cannot be made, dir then
 * empty).  The folder is removed by remove_extracted. */
static int extract_to_temp(const char *ckpt, char *dir, size_t len, char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, len, "%s/triad-tokenizer-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        errorf(err, errlen, "cannot make a folder %s: %s", dir, strerror(errno));
        dir[0] = 0;
        return -1;
    }
    return ckpt_extract_tokenizer(ckpt, dir, err, errlen);
}

static void remove_extracted(const char *dir)
{
    char path[4200];
    if (!dir[0]) return;
    for (int i = 0; i < CKPT_TOK_NFILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ckpt_tok_name(i));
        unlink(path);
    }
    rmdir(dir);
}

/* The tokenizer kept inside the triad checkpoint ckpt, opened (*kept 1), or
 * NULL with *kept 0 where the file keeps none, -1 with err. */
static struct tokenizer *open_kept(const char *ckpt, int V, int *kept, char *err, size_t errlen)
{
    char dir[4096];
    *kept = extract_to_temp(ckpt, dir, sizeof dir, err, errlen);
    struct tokenizer *t = NULL;
    if (*kept > 0) {
        char what[4200];
        snprintf(what, sizeof what, "the tokenizer kept in %s, extracted to", ckpt);
        t = open_fitting(dir, what, V, err, errlen);
        if (!t && !strstr(err, what)) { /* (the reader names the temporary folder: say whose it is) */
            char why[1024];
            snprintf(why, sizeof why, "%s", err);
            errorf(err, errlen, "the tokenizer kept in %s: %s", ckpt, why);
        }
    }
    remove_extracted(dir);
    return t;
}

struct tokenizer *hf_model_tokenizer(const struct config *cfg, const char *ckpt, int V, char *err, size_t errlen)
{
    char path[4200];
    err[0] = 0;
    int kept;
    struct tokenizer *t = open_kept(ckpt, V, &kept, err, errlen);
    if (kept == 0 && hf_tokenizer_of(cfg, ckpt, path, sizeof path)) t = open_fitting(path, "the tokenizer", V, err, errlen);
    return t;
}

/* A sampling default of generation_config.json j (key, with its range):
 * *v, or -1 where the file has none (or null); 0, or -1 with err. */
static int sampling_default(const struct json *j, const char *key, double lo, double hi, int whole, const char *whose,
                            double *v, char *err, size_t errlen)
{
    const struct json *e = json_get(j, key);
    *v = -1;
    if (!e || e->kind == JSON_NULL) return 0;
    if (e->kind != JSON_NUMBER || !(e->number >= lo && e->number <= hi) || (whole && e->number != floor(e->number))) {
        char what[64] = "a value that is no number";
        if (e->kind == JSON_NUMBER) snprintf(what, sizeof what, "%.17g", e->number);
        return errorf(err, errlen, "%s: generation_config.json's %s is %s, not %s from %.0f to %.0f\n  hint: correct "
                      "the file, or give sample.%s, which the file's value only stands in for", whose, key, what,
                      whole ? "a whole number" : "a number", lo, hi, key);
    }
    *v = e->number;
    return 0;
}

/* generation_config.json in folder dir (which `whose` names), as
 * hf_generation reads it. */
static int read_generation(const char *dir, const char *whose, int V, struct hf_generation *gen, char *err,
                           size_t errlen)
{
    char path[4200], why[1024];
    snprintf(path, sizeof path, "%s/%s", dir, ckpt_tok_name(CKPT_TOK_GENERATION));
    struct json *j = NULL;
    int rc = json_read_file(path, (size_t)1 << 20, "generation_config.json", &j, why, sizeof why);
    if (rc == ENOENT) return 0;
    if (rc != 0) return errorf(err, errlen, "%s: %s", whose, why);
    snprintf(gen->whose, sizeof gen->whose, "%s", whose);
    const struct json *e = json_get(j, "eos_token_id");
    int k = !e || e->kind == JSON_NULL ? 0 : e->kind == JSON_ARRAY ? e->n : 1;
    for (int i = 0; i < k && rc == 0; i++) {
        const struct json *v = e->kind == JSON_ARRAY ? &e->item[i] : e;
        if (v->kind != JSON_NUMBER || !(v->number >= 0 && v->number < V) || v->number != (double)(int32_t)v->number) {
            char what[64] = "a value that is no number";
            if (v->kind == JSON_NUMBER) snprintf(what, sizeof what, "%.17g", v->number);
            rc = errorf(err, errlen, "%s: generation_config.json's eos_token_id holds %s, not an id of the model's "
                        "vocabulary (0 .. %d)\n  hint: correct the file, or set sample.tokenizer to a folder without "
                        "it and give the ids in sample.stop_ids", whose, what, V - 1);
        }
        else if (gen->n == HF_GENERATION_STOPS)
            rc = errorf(err, errlen, "%s: generation_config.json's eos_token_id lists more than %d ids", whose,
                        HF_GENERATION_STOPS);
        else
            gen->ids[gen->n++] = (int32_t)v->number;
    }
    double top_k = -1;
    if (rc == 0) rc = sampling_default(j, "temperature", 0, 100, 0, whose, &gen->temperature, err, errlen);
    if (rc == 0) rc = sampling_default(j, "top_k", 0, 16777216, 1, whose, &top_k, err, errlen);
    if (rc == 0) rc = sampling_default(j, "top_p", 0, 1, 0, whose, &gen->top_p, err, errlen);
    gen->top_k = (long long)top_k;
    json_free(j);
    return rc ? -1 : 0;
}

int hf_generation(const char *option, const struct config *cfg, const char *ckpt, int V, struct hf_generation *gen,
                  char *err, size_t errlen)
{
    char dir[4096], whose[4300];
    memset(gen, 0, sizeof *gen);
    gen->temperature = gen->top_p = -1, gen->top_k = -1;
    err[0] = 0;
    if (!strcmp(option, "none")) return 0;
    if (option[0] || !ckpt) { /* the folder of the one named, or of the run's copy */
        tokenizer_folder(option[0] ? option : cfg->io.run_dir, dir, sizeof dir);
        snprintf(whose, sizeof whose, "%s", dir);
        return read_generation(dir, whose, V, gen, err, errlen);
    }
    int kept = extract_to_temp(ckpt, dir, sizeof dir, err, errlen), rc = kept < 0 ? -1 : 0;
    snprintf(whose, sizeof whose, "the tokenizer kept in %s", ckpt);
    if (kept > 0) rc = read_generation(dir, whose, V, gen, err, errlen);
    remove_extracted(dir);
    if (kept == 0 && hf_tokenizer_of(cfg, ckpt, dir, sizeof dir)) { /* (a file from before tokenizers were kept) */
        char path[4096];
        snprintf(path, sizeof path, "%s", dir);
        tokenizer_folder(path, dir, sizeof dir);
        rc = read_generation(dir, dir, V, gen, err, errlen);
    }
    return rc;
}

struct tokenizer *hf_open_tokenizer(const char *option, const struct config *cfg, const char *ckpt, int V, char *err,
                                    size_t errlen)
{
    err[0] = 0;
    if (!strcmp(option, "none")) return NULL;
    if (option[0]) return open_fitting(option, "the tokenizer", V, err, errlen);
    if (ckpt) return hf_model_tokenizer(cfg, ckpt, V, err, errlen);
    return is_tokenizer(cfg->io.run_dir) ? open_fitting(cfg->io.run_dir, "the run's tokenizer in", V, err, errlen) : NULL;
}

int hf_copy_file(const char *src, const char *dst, char *err, size_t errlen)
{
    char tmp[4200], buf[1 << 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    FILE *in = fopen(src, "rb"), *out = in ? fopen(tmp, "wb") : NULL;
    int rc = in && out ? 0 : -1;
    errno = in && !out ? errno : in ? 0 : errno;
    for (size_t n; rc == 0 && (n = fread(buf, 1, sizeof buf, in)) > 0;) rc = fwrite(buf, 1, n, out) == n ? 0 : -1;
    if (in && ferror(in)) rc = -1;
    if (out && (fflush(out) != 0 || fsync(fileno(out)) != 0)) rc = -1;
    if (out && fclose(out) != 0) rc = -1;
    if (in) fclose(in);
    if (rc == 0 && rename(tmp, dst) != 0) rc = -1;
    if (rc) unlink(tmp);
    return rc ? errorf(err, errlen, "copying %s to %s failed: %s", src, dst, strerror(errno ? errno : EIO)) : 0;
}

/* A fresh run's start: the tokenizer files an earlier run left in dir
 * removed (a run that died before its output counted as such), unless the
 * tokenizer at src (NULL: none) is itself in dir. */
static void drop_copies(const char *dir, const char *src)
{
    char base[4096], path[4200];
    struct stat a, b;
    if (src) tokenizer_folder(src, base, sizeof base);
    if (src && stat(base, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return;
    for (int i = 0; i < CKPT_TOK_NFILES; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, ckpt_tok_name(i));
        if (unlink(path) == 0) log_info("removed %s, an earlier run's copy of its tokenizer\n", path);
    }
}

/* Does the tokenizer at src define the same tokens as the copy in dir (which
 * `whose` names): the same bytes in tokenizer.json, or in vocab.json and
 * merges.txt?  1 yes, 0 no (what differs named in err), -1 unreadable (err). */
static int same_tokenizer(const char *src, const char *dir, const char *whose, char *err, size_t errlen)
{
    char base[4096], from[4200], to[4200], why[512];
    struct stat sb;
    tokenizer_folder(src, base, sizeof base);
    int file = strcmp(base, src) != 0; /* (src names the tokenizer.json itself) */
    snprintf(from, sizeof from, "%s/tokenizer.json", base);
    int hf = file || stat(from, &sb) == 0;
    const int defining[2] = {hf ? CKPT_TOK_JSON : CKPT_TOK_VOCAB, hf ? -1 : CKPT_TOK_MERGES};
    for (int k = 0; k < 2 && defining[k] >= 0; k++) {
        int i = defining[k];
        if (i == CKPT_TOK_JSON && file) snprintf(from, sizeof from, "%s", src);
        else snprintf(from, sizeof from, "%s/%s", base, ckpt_tok_name(i));
        snprintf(to, sizeof to, "%s/%s", dir, ckpt_tok_name(i));
        char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (file_read_all(from, (size_t)1 << 30, "a tokenizer file", &a, &na, why, sizeof why) != 0)
            return errorf(err, errlen, "%s", why);
        int differs = stat(to, &sb) != 0 ||
                      file_read_all(to, (size_t)1 << 30, "a tokenizer file", &b, &nb, why, sizeof why) != 0 ||
                      na != nb || memcmp(a, b, na) != 0;
        free(a);
        free(b);
        if (differs) {
            snprintf(err, errlen, "%s differs from the %s of %s", from, ckpt_tok_name(i), whose);
            return 0;
        }
    }
    return 1;
}

int hf_check_resumed_tokenizer(const struct config *cfg, const char *ckpt, int here, char *err, size_t errlen)
{
    const char *run_dir = cfg->io.run_dir, *named = cfg->data.tokenizer;
    if (!named[0] || !is_tokenizer(named)) return 0; /* (none named, or gone since: the run's own stands in) */
    char ref[4096] = "", whose[4200];
    int rc = 0;
    if (here && is_tokenizer(run_dir)) {
        snprintf(ref, sizeof ref, "%s", run_dir);
        snprintf(whose, sizeof whose, "the run's copy in %s", run_dir);
    } else { /* (the one kept in the checkpoint: none kept, nothing to compare) */
        rc = extract_to_temp(ckpt, ref, sizeof ref, err, errlen);
        rc = rc > 0 ? 0 : rc < 0 ? -1 : 1;
        snprintf(whose, sizeof whose, "the tokenizer kept in %s", ckpt);
    }
    int same = rc == 0 ? same_tokenizer(named, ref, whose, err, errlen) : 1;
    if (same == 0) {
        char why[1024];
        snprintf(why, sizeof why, "%s", err);
        errorf(err, errlen, "data.tokenizer = '%s' is not the tokenizer this run was trained with (%s), which %s "
               "keeps too: a resumed run keeps its tokenizer; remove data.tokenizer from the deck (or name the run's "
               "own files), or start a new run from the checkpoint with io.init_from", named, why, ckpt);
    }
    if (strcmp(ref, run_dir) != 0) remove_extracted(ref);
    return rc < 0 || same <= 0 ? -1 : 0;
}

/* data.tokenizer names no tokenizer (where a run's copy does not stand
 * in for it): -1 with err, else 0. */
static int named_tokenizer_missing(const struct config *cfg, const char *resumed, int here, char *err, size_t errlen)
{
    if (!cfg->data.tokenizer[0] || is_tokenizer(cfg->data.tokenizer)) return 0;
    if (resumed && here && is_tokenizer(cfg->io.run_dir)) return 0; /* (gone since: the run's copy stands in) */
    return errorf(err, errlen, "data.tokenizer = '%s' is no tokenizer: name a tokenizer.json, or a folder with one",
                  cfg->data.tokenizer);
}

/* (hf_keep_tokenizer's choice, step for step) */
struct tokenizer *hf_run_tokenizer(const struct config *cfg, int V, const char *resumed, int here, char *err,
                                   size_t errlen)
{
    char src[4096];
    int kept = 0;
    err[0] = 0;
    if (named_tokenizer_missing(cfg, resumed, here, err, errlen)) return NULL;
    if (resumed && here && is_tokenizer(cfg->io.run_dir)) /* the run's copy */
        return open_fitting(cfg->io.run_dir, "the run's tokenizer in", V, err, errlen);
    if (resumed) { /* the one kept in the checkpoint resumed from (elsewhere, or here without a copy) */
        struct tokenizer *t = open_kept(resumed, V, &kept, err, errlen);
        if (kept) return t;
    }
    if (hf_tokenizer_of(cfg, NULL, src, sizeof src)) return open_fitting(src, "the tokenizer", V, err, errlen);
    const char *from = cfg->io.init_from; /* a new run from a triad checkpoint: the one kept in it */
    return !resumed && from[0] && weights_kind_of(from) == WEIGHTS_HDF5 ? open_kept(from, V, &kept, err, errlen) : NULL;
}

int hf_keep_tokenizer(const struct config *cfg, int V, const char *resumed, int here, char *err, size_t errlen)
{
    const char *run_dir = cfg->io.run_dir;
    char src[4096];
    if (named_tokenizer_missing(cfg, resumed, here, err, errlen)) return -1;
    if (cfg->data.tokenizer[0] && !is_tokenizer(cfg->data.tokenizer)) return 0; /* (the run's copy stands in) */
    int kept = 0, have = hf_tokenizer_of(cfg, NULL, src, sizeof src);
    /* A resumed run keeps the tokenizer it was trained with (checked against
     * data.tokenizer: hf_check_resumed_tokenizer): the copy in run_dir, or,
     * restarted from elsewhere, the one kept in the checkpoint, in place of
     * any copy an earlier run that left no output had put there. */
    if (resumed && !(here && is_tokenizer(run_dir))) { /* (here without a copy: a checkpoint moved on its own) */
        drop_copies(run_dir, NULL);
        if ((kept = ckpt_extract_tokenizer(resumed, run_dir, err, errlen)) < 0) return -1;
    }
    if (resumed && is_tokenizer(run_dir)) return 0; /* (io.init_from's folder, ignored on resuming, is not taken) */
    if (!resumed) drop_copies(run_dir, have ? src : NULL);
    if (!have) {
        /* a model from a triad checkpoint brings the tokenizer kept in it
         * (a resumed run has taken its own already: the copy in run_dir) */
        const char *from = cfg->io.init_from;
        if (resumed || !from[0] || weights_kind_of(from) != WEIGHTS_HDF5) return 0;
        if (access(from, R_OK) != 0) { /* (gone since its weights were read: moved aside by io.overwrite) */
            log_warn("the tokenizer kept in io.init_from = '%s' cannot be read now (%s): this run keeps none; set "
                     "data.tokenizer to keep one", from, strerror(errno));
            return 0;
        }
        if ((kept = ckpt_extract_tokenizer(from, run_dir, err, errlen)) <= 0) return kept;
        snprintf(src, sizeof src, "%s", run_dir);
    }
    struct tokenizer *t = open_fitting(src, "the tokenizer", V, err, errlen);
    if (!t) return -1;
    tok_close(t);
    return kept ? 0 : hf_copy_tokenizer(src, run_dir, err, errlen);
}

/* ------------------------------------------------------------ llm.c */

/* llm.c's GPT-2 checkpoint: 256 int32 of header (magic 20240326, version 3:
 * fp32 or 5: bf16, max T, V, L, NH, C, padded V), then the tensors in the
 * order below, weights [out, in] as triad's, each layer's tensors of one
 * kind back to back. */
int llmc_load(const char *path, struct model *m, const struct grid *g, int allow_nonfinite, char *err,
              size_t errlen)
{
    const struct model_dims *d = &m->d;
    int32_t h[LLMC_HEADER];
    int rc = 0, fd = open(path, O_RDONLY);
    ssize_t got = fd < 0 ? -1 : pread(fd, h, sizeof h, 0);
    if (got < 0)
        rc = errorf(err, errlen, "%s: cannot read its header (%s)", path, strerror(errno));
    else if (got != (ssize_t)sizeof h)
        rc = errorf(err, errlen, "%s: %lld bytes, shorter than the %d-byte header of an llm.c checkpoint", path,
                    (long long)got, (int)sizeof h);
    enum st_dtype dt = rc == 0 && h[1] == 5 ? ST_BF16 : ST_F32;
    if (rc == 0 && h[1] != 3 && h[1] != 5)
        rc = errorf(err, errlen, "%s: llm.c checkpoint version %d; triad reads versions 3 (fp32) and 5 (bf16)%s", path,
                    h[1], h[1] == 1 || h[1] == 2 ? " (versions 1 and 2 are llm.c's files from before the padded "
                                                   "vocabulary: write the model again with llm.c's train_gpt2.py)" : "");
    int64_t maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
    /* a header no llm.c writer makes (sizes below 1, a padded vocabulary
     * smaller than the vocabulary) is the file's fault, not the deck's */
    static const char *const slot[] = {"", "", "max_seq_len", "vocab_size", "num_layers", "num_heads", "channels",
                                       "padded_vocab_size"};
    for (int k = 2; rc == 0 && k <= 7; k++)
        if (h[k] < 1 || (k == 7 && Vp < V))
            rc = errorf(err, errlen, "%s: its header is damaged: %s (int32 %d of the header) is %d%s, which no llm.c "
                        "writer makes (copy the file again, or write it again with llm.c's train_gpt2.py)", path,
                        slot[k], k, h[k], h[k] >= 1 ? ", smaller than vocab_size" : "");
    if (rc == 0 && (d->llama || L != d->L || NH != d->NH || C != d->C || V != d->V || maxT < d->T ||
                    d->F != 4 * d->C || !d->tied))
        rc = errorf(err, errlen, "%s holds GPT-2 with n_layer = %lld, n_head = %lld, d_model = %lld, vocab_size = %lld, "
                  "%lld positions; the deck has arch = '%s', n_layer = %d, n_head = %d, d_model = %d, vocab_size = %d, "
                  "seq_len = %d (ffn_hidden 4C and tied embeddings needed): set the deck's &model as the file's",
                  path, (long long)L, (long long)NH, (long long)C, (long long)V, (long long)maxT,
                  d->llama ? "llama" : "gpt2", d->L, d->NH, d->C, d->V, d->T);
    /* the tensors, in the file's order, with (rows, cols) of one layer's */
    const struct { enum param_id id; int64_t rows, cols; } order[] = {
        {P_WTE, Vp, C},        {P_WPE, maxT, C},     {P_LN1W, C, 1},  {P_LN1B, C, 1},       {P_QKVW, 3 * C, C},
        {P_QKVB, 3 * C, 1},    {P_ATTPROJW, C, C},   {P_ATTPROJB, C, 1}, {P_LN2W, C, 1},    {P_LN2B, C, 1},
        {P_FCW, 4 * C, C},     {P_FCB, 4 * C, 1},    {P_FCPROJW, C, 4 * C}, {P_FCPROJB, C, 1}, {P_LNFW, C, 1},
        {P_LNFB, C, 1},
    };
    /* the size the header promises (the products checked: maxT and Vp are the file's) */
    uint64_t at = sizeof h, es = st_dtype_size(dt), total = at, need;
    int overflow = 0;
    for (size_t i = 0; rc == 0 && i < sizeof order / sizeof order[0]; i++)
        overflow |= __builtin_mul_overflow((uint64_t)order[i].rows, (uint64_t)order[i].cols, &need) ||
                    __builtin_mul_overflow(need, es * (uint64_t)(param_table[order[i].id].per_layer ? L : 1), &need) ||
                    __builtin_add_overflow(total, need, &total);
    struct stat sb;
    if (rc == 0 && fstat(fd, &sb) != 0) rc = errorf(err, errlen, "%s: %s", path, strerror(errno));
    if (rc == 0 && (overflow || (uint64_t)sb.st_size != total))
        rc = errorf(err, errlen, "%s: %lld bytes, but its header (max_seq_len %lld, padded vocabulary %lld) promises "
                    "%s%llu: the file is %s", path, (long long)sb.st_size, (long long)maxT, (long long)Vp,
                    overflow ? "more than " : "", overflow ? (unsigned long long)UINT64_MAX : (unsigned long long)total,
                    overflow || (uint64_t)sb.st_size < total ? "truncated, or its header is damaged"
                                                             : "longer than its tensors (trailing bytes, or a damaged header)");
    for (size_t i = 0; rc == 0 && i < sizeof order / sizeof order[0]; i++) {
        enum param_id id = order[i].id;
        int per_layer = param_table[id].per_layer, n = per_layer ? (int)L : 1;
        uint64_t bytes = (uint64_t)(order[i].rows * order[i].cols) * es;
        for (int j = 0; rc == 0 && m->size[id] && j < param_local_slices(d, id); j++) {
            int l = param_slice_global(d, id, j); /* (a layer: gpt2 has no experts) */
            struct src s = { .fd = fd, .at = at + (uint64_t)l * bytes, .dtype = dt, .rows = order[i].rows,
                             .cols = order[i].cols, .allow_nonfinite = allow_nonfinite };
            snprintf(s.name, sizeof s.name, "%s: tensor %s", path, param_table[id].name);
            rc = load_tensor(m, id, j, &s, 1, err, errlen);
        }
        at += (uint64_t)n * bytes;
    }
    if (fd >= 0) close(fd);
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}
