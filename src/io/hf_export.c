/* hf_export.c -- `triad export CKPT DIR`: a checkpoint's model as a Hugging
 * Face folder (hf.h): config.json with the family's model_type,
 * architectures and shape keys, and model.safetensors.  The checkpoint holds
 * every tensor in its logical shape whatever grid wrote it, so one process
 * reads it tensor by tensor (serial HDF5) and writes the folder; both files
 * are written under temporary names, fsynced and renamed, and a folder that
 * already holds a model is refused. */
#include "hf.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_name.h"
#include "ckpt_sum.h"
#include "ckpt_tok.h"
#include "config.h"
#include "file.h"
#include "log.h"
#include "shape.h"
#include "tokenizer.h"

/* One tensor of the folder: its name and shape, and where it comes from:
 * rows [r0, r0 + rows) of the checkpoint's dataset (logical slice `slice`
 * of tensor id), transposed (GPT-2's Conv1D [in, out]). */
struct piece {
    char name[160];
    char dataset[112];
    enum param_id id;
    int slice;
    int64_t r0, rows, cols;
    int64_t drows; /* the dataset's rows (all its parts) */
    int rank, transposed;
};

/* Tensor t of layer l (and expert e) into p, if model d has it: 1, else 0
 * (p NULL: only counted). */
static int piece(const struct model_dims *d, const struct hf_tensor *t, int l, int e, struct piece *p)
{
    enum param_id id = t->id;
    int g = param_table[id].expert ? l * d->E + e : param_table[id].per_layer ? l : 0;
    if (!param_present(d, id) || !param_slice_exists(d, id, g)) return 0;
    if (!p) return 1;
    size_t rows, cols, part[3] = {0, 0, 0}, r0 = 0;
    param_shape(d, id, &rows, &cols);
    if (id == P_WTE || id == P_LMHEAD) rows = (size_t)d->V; /* no padding */
    p->drows = (int64_t)rows;
    if (t->part >= 0) {
        param_row_parts(d, id, part);
        for (int k = 0; k < t->part; k++) r0 += part[k];
        rows = part[t->part];
    }
    char slice[96];
    p->id = id;
    p->slice = g;
    param_slice_name(d, id, p->slice, slice, sizeof slice);
    snprintf(p->name, sizeof p->name, t->name, l, e);
    snprintf(p->dataset, sizeof p->dataset, "/model/%s", slice);
    p->r0 = (int64_t)r0, p->rows = (int64_t)rows, p->cols = (int64_t)cols, p->transposed = t->transposed;
    p->rank = cols == 1 ? 1 : 2;
    return 1;
}

/* The folder's tensors for model d as architecture a (hf_tensors), in
 * writing order, into p (NULL: only counted); returns their number. */
static int pieces(const struct model_dims *d, enum hf_arch a, struct piece *p)
{
    const struct hf_tensor *t;
    int nt = hf_tensors(a, &t), n = 0, first_layer = 0, last_layer = nt;
    while (first_layer < nt && !param_table[t[first_layer].id].per_layer) first_layer++;
    while (last_layer > first_layer && !param_table[t[last_layer - 1].id].per_layer) last_layer--;
    /* the globals before the layers, each layer's tensors (a run of an
     * expert's, once per expert), the globals after */
    for (int pass = 0; pass < 3; pass++)
        for (int l = 0; l < (pass == 1 ? d->L : 1); l++) {
            int lo = pass == 0 ? 0 : pass == 1 ? first_layer : last_layer;
            int hi = pass == 0 ? first_layer : pass == 1 ? last_layer : nt;
            for (int i = lo; i < hi;) {
                int run = 1, experts = param_table[t[i].id].expert ? d->E : 1;
                while (param_table[t[i].id].expert && i + run < hi && param_table[t[i + run].id].expert) run++;
                for (int e = 0; e < experts; e++)
                    for (int k = i; k < i + run; k++) n += piece(d, &t[k], l, e, p ? &p[n] : NULL);
                i += run;
            }
        }
    return n;
}

/* Every dataset of model d (each slice of each tensor it has) is written
 * whole by the n pieces, each row once, so that no tensor of the
 * checkpoint is left out of the folder (an architecture's table that
 * missed one is an error, never a folder without it). */
static int covers_model(const struct model_dims *d, enum hf_arch a, const struct piece *p, int n, char *err,
                        size_t errlen)
{
    int base[NUM_PARAMS + 1] = {0}, rc = 0;
    for (int id = 0; id < NUM_PARAMS; id++) base[id + 1] = base[id] + param_slices(d, (enum param_id)id);
    int64_t *next = calloc((size_t)base[NUM_PARAMS] + 1, sizeof *next); /* each dataset's first row not yet written */
    if (!next) return errorf(err, errlen, "out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        int64_t *x = &next[base[p[i].id] + p[i].slice];
        if (*x != p[i].r0)
            rc = errorf(err, errlen, "internal: %s's tensor '%s' takes rows %lld.. of %s, but row %lld comes next",
                        hf_class(a), p[i].name, (long long)p[i].r0, p[i].dataset, (long long)*x);
        *x += p[i].rows;
    }
    for (int id = 0; id < NUM_PARAMS && rc == 0; id++)
        for (int g = 0; g < param_slices(d, (enum param_id)id) && rc == 0; g++) {
            if (!param_slice_exists(d, (enum param_id)id, g)) continue;
            size_t rows, cols;
            char name[96];
            param_shape(d, (enum param_id)id, &rows, &cols);
            if (id == P_WTE || id == P_LMHEAD) rows = (size_t)d->V;
            param_slice_name(d, (enum param_id)id, g, name, sizeof name);
            if (next[base[id] + g] != (int64_t)rows)
                rc = errorf(err, errlen, "the checkpoint's /model/%s would be left out of the %s folder (%lld of its "
                            "%zu rows written): nothing written", name, hf_class(a), (long long)next[base[id] + g],
                            rows);
        }
    free(next);
    return rc;
}

/* The file's side: every dataset under its /model is one that the pieces
 * take (a checkpoint holding more than its stored deck describes is not
 * exported without it). */
struct model_walk {
    const char **names; /* the pieces' datasets, sorted */
    int n;
    char extra[200];    /* the first dataset that none takes */
};

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static herr_t visit_dataset(hid_t g, const char *name, const H5L_info_t *info, void *data)
{
    (void)info;
    struct model_walk *w = data;
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    if (o < 0) return -1;
    int dataset = H5Iget_type(o) == H5I_DATASET;
    H5Oclose(o);
    char full[200];
    const char *key = full;
    snprintf(full, sizeof full, "/model/%s", name);
    if (dataset && !bsearch(&key, w->names, (size_t)w->n, sizeof *w->names, cmp_name)) {
        snprintf(w->extra, sizeof w->extra, "%s", full);
        return 1; /* (stops the walk) */
    }
    return 0;
}

static int covers_file(hid_t f, const char *ckpt, enum hf_arch a, const struct piece *p, int n, char *err,
                       size_t errlen)
{
    struct model_walk w = {.names = malloc(((size_t)n + 1) * sizeof *w.names), .n = n};
    if (!w.names) return errorf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++) w.names[i] = p[i].dataset;
    qsort(w.names, (size_t)n, sizeof *w.names, cmp_name);
    hid_t g = H5Gopen2(f, "/model", H5P_DEFAULT);
    herr_t rc = g < 0 ? -1 : H5Lvisit(g, H5_INDEX_NAME, H5_ITER_INC, visit_dataset, &w);
    if (g >= 0) H5Gclose(g);
    free(w.names);
    if (rc < 0) return errorf(err, errlen, "cannot list the datasets of %s's /model group", ckpt);
    if (rc > 0)
        return errorf(err, errlen, "%s holds %s, which its stored deck's model does not have, and so the %s folder "
                      "would not: nothing written", ckpt, w.extra, hf_class(a));
    return 0;
}

/* The whole model the checkpoint's stored deck (into cfg) describes. */
static int ckpt_dims(const char *path, struct model_dims *d, struct config *out, char *err, size_t errlen)
{
    struct config cfg;
    if (ckpt_read_config(path, &cfg, err, errlen) != 0) return -1;
    *out = cfg;
    cfg.parallel.tp = cfg.parallel.pp = cfg.parallel.dp = cfg.parallel.cp = cfg.parallel.virtual_stages = 1;
    cfg.parallel.sequence_parallel = 0;
    struct run_shape s;
    run_shape_init(&s, &cfg, 1, 0);
    struct grid g;
    memset(&g, 0, sizeof g);
    model_dims_init(d, &cfg, &s, &g);
    return 0;
}

/* Every dataset the folder takes (whole, once: covers_model) against its
 * checksum, as a restart checks them, before anything is written. */
static int verify_model(hid_t f, const struct model_dims *d, char *err, size_t errlen)
{
    for (int id = 0; id < NUM_PARAMS; id++)
        for (int g = 0; g < param_slices(d, (enum param_id)id); g++) {
            if (!param_slice_exists(d, (enum param_id)id, g)) continue;
            char name[96], path[112];
            param_slice_name(d, (enum param_id)id, g, name, sizeof name);
            snprintf(path, sizeof path, "/model/%s", name);
            if (ckpt_verify_dataset(f, path, err, errlen) != 0) return -1;
        }
    return 0;
}

/* Rows [r0, r0 + rows) of a dataset of cols columns, as floats, the
 * dataset's shape checked against the deck's first.  -1 with err. */
static int read_rows(hid_t f, const struct piece *p, float *buf, char *err, size_t errlen)
{
    hid_t ds = H5Lexists(f, p->dataset, H5P_DEFAULT) > 0 ? H5Dopen2(f, p->dataset, H5P_DEFAULT) : -1;
    if (ds < 0) return errorf(err, errlen, "dataset %s is missing from the checkpoint", p->dataset);
    hid_t fs = H5Dget_space(ds);
    int rank = fs < 0 ? -1 : H5Sget_simple_extent_ndims(fs);
    hsize_t dims[2] = {0, 0};
    if (rank == 1 || rank == 2) H5Sget_simple_extent_dims(fs, dims, NULL);
    herr_t rc = -1;
    if (rank != p->rank || dims[0] != (hsize_t)p->drows || (rank == 2 && dims[1] != (hsize_t)p->cols)) {
        char has[64];
        if (rank == 1 || rank == 2)
            snprintf(has, sizeof has, "shape [%llu%s%.0llu]", (unsigned long long)dims[0], rank == 2 ? ", " : "",
                     rank == 2 ? (unsigned long long)dims[1] : 0ull);
        else snprintf(has, sizeof has, "%d dimensions", rank);
        errorf(err, errlen, "dataset %s has %s, the checkpoint's deck says [%lld%s%.0lld]: the file's tensors and its "
               "stored deck disagree (a damaged or altered checkpoint): nothing written", p->dataset, has,
               (long long)p->drows, p->rank == 2 ? ", " : "", p->rank == 2 ? (long long)p->cols : 0ll);
    } else {
        hsize_t start[2] = {(hsize_t)p->r0, 0}, count[2] = {(hsize_t)p->rows, (hsize_t)p->cols};
        rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
        hid_t ms = H5Screate_simple(rank, count, NULL);
        if (rc >= 0) rc = H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf);
        H5Sclose(ms);
        if (rc < 0) errorf(err, errlen, "cannot read %s from the checkpoint (truncated or damaged?)", p->dataset);
    }
    if (fs >= 0) H5Sclose(fs);
    H5Dclose(ds);
    return rc < 0 ? -1 : 0;
}

/* export.dtype must hold every weight: a finite one that would round to an
 * infinity in fp16 (or bf16; st_put refuses it) is an error naming the
 * tensor of piece p, its element `at` of buf (p's rows as triad keeps
 * them) in the file's layout, and its value (the folder would be refused by
 * every reader, triad's import too).  -1 with err. */
static int range_error(const struct piece *p, const float *buf, size_t at, enum st_dtype dtype, char *err,
                       size_t errlen)
{
    int64_t r = (int64_t)at / p->cols, c = (int64_t)at % p->cols;
    char where[96], from[200];
    if (p->rank == 1) {
        snprintf(where, sizeof where, "element %lld", (long long)r);
        snprintf(from, sizeof from, "the checkpoint's %s, element %lld", p->dataset, (long long)(p->r0 + r));
    } else {
        snprintf(where, sizeof where, "element (row %lld, column %lld)", (long long)(p->transposed ? c : r),
                 (long long)(p->transposed ? r : c));
        snprintf(from, sizeof from, "the checkpoint's %s, row %lld, column %lld", p->dataset, (long long)(p->r0 + r),
                 (long long)c);
    }
    int f16 = dtype == ST_F16;
    return errorf(err, errlen, "export.dtype = '%s' cannot hold tensor '%s': its %s is %g (%s), beyond %s's largest "
                  "value %s; written, it would be %sInf, which no reader takes (triad's import refuses it): export "
                  "with export.dtype = %s: nothing written", f16 ? "fp16" : "bf16", p->name, where, (double)buf[at],
                  from, f16 ? "fp16" : "bf16", f16 ? "65504" : "3.3895e38", buf[at] < 0 ? "-" : "+",
                  f16 ? "'bf16' (fp32's range) or 'fp32'" : "'fp32'");
}

/* -1 with err where a signal asked for a stop, else 0. */
static int stopped(const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    return stop && *stop ? errorf(err, errlen, "stopped by signal %d: nothing written", (int)*stop) : 0;
}

/* The n pieces into a safetensors file at path, in dtype (until a stop). */
static int write_tensors(hid_t f, const char *path, const struct piece *p, int n, enum st_dtype dtype,
                         const volatile sig_atomic_t *stop, char *err, size_t errlen)
{
    struct st_out *out = calloc((size_t)n + 1, sizeof *out);
    if (!out) return errorf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++) {
        out[i].name = p[i].name;
        out[i].rank = p[i].rank;
        out[i].shape[0] = p[i].transposed ? p[i].cols : p[i].rows;
        out[i].shape[1] = p[i].transposed ? p[i].rows : p[i].cols;
    }
    struct st_writer w;
    int rc = st_begin(&w, path, dtype, out, n, "{\"format\":\"pt\"}", err, errlen);
    for (int i = 0; rc == 0 && i < n; i++) {
        if ((rc = stopped(stop, err, errlen)) != 0) break;
        size_t e = (size_t)(p[i].rows * p[i].cols);
        float *buf = malloc(e * sizeof *buf), *tr = p[i].transposed ? malloc(e * sizeof *tr) : NULL;
        if (!buf || (p[i].transposed && !tr)) rc = errorf(err, errlen, "out of memory");
        if (rc == 0) rc = read_rows(f, &p[i], buf, err, errlen);
        if (rc == 0 && tr)
            for (int64_t r = 0; r < p[i].rows; r++)
                for (int64_t c = 0; c < p[i].cols; c++) tr[c * p[i].rows + r] = buf[r * p[i].cols + c];
        if (rc == 0 && st_put(&w, tr ? tr : buf, e) != 0 && w.failed == ERANGE) /* (the temporary file is removed) */
            rc = range_error(&p[i], buf, st_first_overflow(dtype, buf, e), dtype, err, errlen);
        free(buf);
        free(tr);
    }
    char ignored[256]; /* (an earlier error is the one said) */
    if (w.fp && st_end(&w, rc == 0 ? err : ignored, rc == 0 ? errlen : sizeof ignored) != 0) rc = -1;
    free(out);
    return rc;
}

/* config.json at path (hf_print_config), fsynced. */
static int write_config(const char *path, const struct model_dims *d, enum hf_arch a, enum st_dtype dtype)
{
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    hf_print_config(fp, d, a, dtype);
    int rc = ferror(fp) || fflush(fp) != 0 || fsync(fileno(fp)) != 0;
    return fclose(fp) != 0 || rc ? -1 : 0;
}

/* The model's tokenizer into the folder (checked to open and to fit the
 * vocabulary first), the files that describe it, and generation_config.json:
 * the model folder's own where it came with the tokenizer (kept in the
 * checkpoint, or beside data.tokenizer), else one of the tokenizer's BOS and
 * end-of-text ids. (The files the folder may take besides the model's two
 * are those of ckpt_tok.h.) */
static int write_tokenizer(const struct config *cfg, const char *ckpt, const struct model_dims *d, const char *dir,
                           char *err, size_t errlen)
{
    char src[4096], from[4300], to[4200];
    /* the one kept in the checkpoint goes straight into the folder */
    int kept = ckpt_extract_tokenizer(ckpt, dir, err, errlen);
    if (kept < 0) return -1;
    if (kept) snprintf(src, sizeof src, "%s", dir);
    else if (!hf_tokenizer_of(cfg, ckpt, src, sizeof src)) return 0;
    struct tokenizer *t = tok_open(src, err, errlen);
    if (!t) return -1;
    int32_t nid = tok_vocab_size(t), bos = tok_bos(t), eos = tok_eos(t);
    tok_close(t);
    if (nid > d->V)
        return errorf(err, errlen, "the model's tokenizer %s has %d ids, more than its vocabulary of %d: data.tokenizer "
                      "names another model's", kept ? ckpt : src, nid, d->V);
    if (!kept && hf_copy_tokenizer(src, dir, err, errlen)) return -1;
    snprintf(to, sizeof to, "%s/%s", dir, ckpt_tok_name(CKPT_TOK_GENERATION));
    if (access(to, F_OK) == 0) return 0; /* (the model folder's own, as it came) */
    snprintf(from, sizeof from, "%s.tmp", to);
    FILE *fp = fopen(from, "w");
    if (!fp) return errorf(err, errlen, "cannot write %s: %s", from, strerror(errno));
    fprintf(fp, "{\n");
    if (bos >= 0) fprintf(fp, "  \"bos_token_id\": %d,\n", bos);
    if (eos >= 0) fprintf(fp, "  \"eos_token_id\": %d,\n", eos);
    fprintf(fp, "  \"do_sample\": true\n}\n");
    int rc = ferror(fp) || fflush(fp) != 0 || fsync(fileno(fp)) != 0;
    if (fclose(fp) != 0 || rc || rename(from, to) != 0)
        return unlink(from), errorf(err, errlen, "cannot write %s: %s", to, strerror(errno));
    return 0;
}


int hf_export(const char *ckpt, const char *dir, enum st_dtype dtype, const volatile sig_atomic_t *stop, char *err,
              size_t errlen)
{
    char cfg_path[4096], st_path[4096], tmp_cfg[4200], tmp_st[4200], path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    if (access(cfg_path, F_OK) == 0 || access(st_path, F_OK) == 0)
        return errorf(err, errlen, "%s already holds a model (config.json or model.safetensors): export into a "
                        "new folder, or remove them first", dir);
    for (int i = 0; i < CKPT_TOK_NFILES; i++) { /* (a tokenizer of another model would stay beside this one) */
        snprintf(path, sizeof path, "%s/%s", dir, ckpt_tok_name(i));
        if (access(path, F_OK) == 0)
            return errorf(err, errlen, "%s already holds %s: export into a new folder, or remove it first", dir,
                          ckpt_tok_name(i));
    }
    struct model_dims d;
    struct config cfg;
    if (ckpt_dims(ckpt, &d, &cfg, err, errlen) != 0) return -1;
    int arch = hf_arch_of(&d, err, errlen); /* (a model no architecture expresses: refused before anything) */
    if (arch < 0) return -1;
    int n = pieces(&d, (enum hf_arch)arch, NULL);
    struct piece *p = calloc((size_t)n + 1, sizeof *p);
    if (!p) return errorf(err, errlen, "out of memory");
    pieces(&d, (enum hf_arch)arch, p);
    int rc = covers_model(&d, (enum hf_arch)arch, p, n, err, errlen);
    hid_t f = rc == 0 ? H5Fopen(ckpt, H5F_ACC_RDONLY, H5P_DEFAULT) : H5I_INVALID_HID;
    if (rc == 0 && f < 0) rc = ckpt_open_failed(ckpt, err, errlen);
    if (rc == 0) rc = covers_file(f, ckpt, (enum hf_arch)arch, p, n, err, errlen);
    if (rc == 0) rc = verify_model(f, &d, err, errlen);
    if (rc == 0) rc = stopped(stop, err, errlen);
    if (rc == 0) rc = ckpt_check_tokenizer(f, ckpt, err, errlen);
    struct file_made_dirs made = {.n = 0}; /* (the folders this export makes, removed again where it fails) */
    char why[1024];
    if (rc == 0 && file_make_dirs_noted(dir, &made, why, sizeof why) != 0)
        rc = errorf(err, errlen, "%s: export writes its files into the folder DIR (triad export CKPT DIR)", why);
    snprintf(tmp_cfg, sizeof tmp_cfg, "%s.tmp", cfg_path);
    snprintf(tmp_st, sizeof tmp_st, "%s.tmp", st_path);
    if (rc == 0) rc = write_tensors(f, tmp_st, p, n, dtype, stop, err, errlen);
    if (rc == 0 && write_config(tmp_cfg, &d, (enum hf_arch)arch, dtype) != 0)
        rc = errorf(err, errlen, "cannot write %s: %s", tmp_cfg, strerror(errno));
    if (f >= 0) H5Fclose(f);
    free(p);
    if (rc == 0) rc = write_tokenizer(&cfg, ckpt, &d, dir, err, errlen);
    if (rc == 0) rc = stopped(stop, err, errlen);
    if (rc == 0 && (rename(tmp_st, st_path) != 0 || rename(tmp_cfg, cfg_path) != 0))
        rc = errorf(err, errlen, "cannot rename into %s: %s", dir, strerror(errno));
    if (rc) unlink(tmp_st), unlink(tmp_cfg);
    for (int i = 0; rc && i < CKPT_TOK_NFILES; i++) { /* (none was there before: what this export wrote) */
        snprintf(path, sizeof path, "%s/%s", dir, ckpt_tok_name(i));
        unlink(path);
    }
    if (rc) file_remove_made_dirs(&made);
    return rc;
}
