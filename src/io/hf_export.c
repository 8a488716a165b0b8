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
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_sum.h"
#include "ckpt_tok.h"
#include "config.h"
#include "log.h"
#include "shape.h"
#include "tokenizer.h"

/* One tensor of the folder: its name and shape, and where it comes from:
 * rows [r0, r0 + rows) of the checkpoint's dataset, transposed (GPT-2's
 * Conv1D [in, out]). */
struct piece {
    char name[160];
    char dataset[96];
    int64_t r0, rows, cols;
    int rank, transposed;
};

static void piece(struct piece *p, const char *name, int l, const char *dataset, int64_t r0, int64_t rows,
                  int64_t cols, int transposed)
{
    snprintf(p->name, sizeof p->name, name, l);
    snprintf(p->dataset, sizeof p->dataset, dataset, l);
    p->r0 = r0, p->rows = rows, p->cols = cols, p->transposed = transposed;
    p->rank = cols == 1 ? 1 : 2;
}

/* The folder's tensors for model d (hf_tensors), in writing order; returns
 * their number. */
static int pieces(const struct model_dims *d, struct piece *p)
{
    const struct hf_tensor *t;
    int nt = hf_tensors(d, &t), n = 0, first_layer = 0, last_layer = nt;
    while (first_layer < nt && !param_table[t[first_layer].id].per_layer) first_layer++;
    while (last_layer > first_layer && !param_table[t[last_layer - 1].id].per_layer) last_layer--;
    /* the globals before the layers, each layer's tensors, the globals after */
    for (int pass = 0; pass < 3; pass++)
        for (int l = 0; l < (pass == 1 ? d->L : 1); l++)
            for (int i = pass == 0 ? 0 : pass == 1 ? first_layer : last_layer;
                 i < (pass == 0 ? first_layer : pass == 1 ? last_layer : nt); i++) {
                enum param_id id = t[i].id;
                if (!param_present(d, id)) continue;
                size_t rows, cols, part[3] = {0, 0, 0}, r0 = 0;
                param_shape(d, id, &rows, &cols);
                if (id == P_WTE || id == P_LMHEAD) rows = (size_t)d->V; /* no padding */
                if (t[i].part >= 0) {
                    param_row_parts(d, id, part);
                    for (int k = 0; k < t[i].part; k++) r0 += part[k];
                    rows = part[t[i].part];
                }
                char dataset[96];
                if (param_table[id].per_layer) snprintf(dataset, sizeof dataset, "/model/h.%%d/%s", param_table[id].name);
                else snprintf(dataset, sizeof dataset, "/model/%s", param_table[id].name);
                piece(&p[n++], t[i].name, l, dataset, (int64_t)r0, (int64_t)rows, (int64_t)cols, t[i].transposed);
            }
    return n;
}

/* A real as JSON: the shortest of %.15g / %.17g that reads back exactly. */
static void fmt_real(char *buf, size_t n, double x)
{
    snprintf(buf, n, "%.15g", x);
    if (strtod(buf, NULL) != x) snprintf(buf, n, "%.17g", x);
}

static int write_config(const char *path, const struct model_dims *d, enum st_dtype dtype)
{
    FILE *fp = fopen(path, "w");
    if (!fp) return -1;
    const char *torch_dtype = dtype == ST_BF16 ? "bfloat16" : dtype == ST_F16 ? "float16" : "float32";
    char eps[32], theta[32];
    for (int digits = 6; digits <= 9; digits++) { /* the float epsilon as the deck wrote it */
        snprintf(eps, sizeof eps, "%.*g", digits, (double)d->eps);
        if ((float)strtod(eps, NULL) == d->eps) break;
    }
    fmt_real(theta, sizeof theta, d->rope_theta);
    if (d->llama)
        fprintf(fp, "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
                "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_attention_heads\": %d,\n"
                "  \"num_hidden_layers\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
                "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %s,\n"
                "  \"rope_theta\": %s,\n  \"rope_scaling\": null,\n  \"hidden_act\": \"silu\",\n"
                "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"tie_word_embeddings\": %s,\n"
                "  \"torch_dtype\": \"%s\"\n}\n",
                d->C, d->F, d->NH, d->L, d->NKV, d->HS, d->V, d->T, eps, theta, d->tied ? "true" : "false",
                torch_dtype);
    else
        fprintf(fp, "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
                "  \"n_embd\": %d,\n  \"n_head\": %d,\n  \"n_layer\": %d,\n  \"n_inner\": %d,\n"
                "  \"n_positions\": %d,\n  \"n_ctx\": %d,\n  \"vocab_size\": %d,\n"
                "  \"activation_function\": \"gelu_new\",\n  \"layer_norm_epsilon\": 1e-05,\n"
                "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"\n}\n",
                d->C, d->NH, d->L, d->F, d->T, d->T, d->V, d->tied ? "true" : "false", torch_dtype);
    int rc = ferror(fp) || fflush(fp) != 0 || fsync(fileno(fp)) != 0;
    return fclose(fp) != 0 || rc ? -1 : 0;
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

/* Every dataset the folder takes (whole, once) against its checksum, as a
 * restart checks them, before anything is written. */
static int verify_model(hid_t f, const struct model_dims *d, char *err, size_t errlen)
{
    struct piece *p = calloc((size_t)(16 + 12 * d->L), sizeof *p);
    if (!p) return errorf(err, errlen, "out of memory");
    int n = pieces(d, p), rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        int seen = 0; /* (llama's q, k, v and gate, up are parts of one dataset) */
        for (int k = 0; k < i && !seen; k++) seen = strcmp(p[k].dataset, p[i].dataset) == 0;
        if (!seen) rc = ckpt_verify_dataset(f, p[i].dataset, err, errlen);
    }
    free(p);
    return rc;
}

/* Rows [r0, r0 + rows) of a dataset of cols columns, as floats. */
static int read_rows(hid_t f, const struct piece *p, float *buf)
{
    hid_t ds = H5Dopen2(f, p->dataset, H5P_DEFAULT);
    if (ds < 0) return -1;
    hid_t fs = H5Dget_space(ds);
    int rank = H5Sget_simple_extent_ndims(fs);
    hsize_t start[2] = {(hsize_t)p->r0, 0}, count[2] = {(hsize_t)p->rows, (hsize_t)p->cols};
    herr_t rc = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    hid_t ms = H5Screate_simple(rank, count, NULL);
    if (rc >= 0) rc = H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, buf);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    return rc < 0 ? -1 : 0;
}

static int write_tensors(hid_t f, const char *path, const struct model_dims *d, enum st_dtype dtype, char *err,
                         size_t errlen)
{
    struct piece *p = calloc((size_t)(16 + 12 * d->L), sizeof *p);
    struct st_out *out = calloc((size_t)(16 + 12 * d->L), sizeof *out);
    if (!p || !out) return free(p), free(out), errorf(err, errlen, "out of memory");
    int n = pieces(d, p);
    for (int i = 0; i < n; i++) {
        out[i].name = p[i].name;
        out[i].rank = p[i].rank;
        out[i].shape[0] = p[i].transposed ? p[i].cols : p[i].rows;
        out[i].shape[1] = p[i].transposed ? p[i].rows : p[i].cols;
    }
    struct st_writer w;
    int rc = st_begin(&w, path, dtype, out, n, "{\"format\":\"pt\"}", err, errlen);
    for (int i = 0; rc == 0 && i < n; i++) {
        size_t e = (size_t)(p[i].rows * p[i].cols);
        float *buf = malloc(e * sizeof *buf), *tr = p[i].transposed ? malloc(e * sizeof *tr) : NULL;
        if (!buf || (p[i].transposed && !tr)) rc = errorf(err, errlen, "out of memory");
        if (rc == 0 && read_rows(f, &p[i], buf) != 0)
            rc = errorf(err, errlen, "cannot read %s from the checkpoint", p[i].dataset);
        if (rc == 0 && tr)
            for (int64_t r = 0; r < p[i].rows; r++)
                for (int64_t c = 0; c < p[i].cols; c++) tr[c * p[i].rows + r] = buf[r * p[i].cols + c];
        if (rc == 0) st_put(&w, tr ? tr : buf, e);
        free(buf);
        free(tr);
    }
    if (w.fp && st_end(&w, err, errlen) != 0 && rc == 0) rc = -1;
    free(p);
    free(out);
    return rc;
}

/* The model's tokenizer into the folder (checked to open and to fit the
 * vocabulary first), the files that describe it, and generation_config.json. */
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
    snprintf(to, sizeof to, "%s/generation_config.json", dir);
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

/* The files of the folder besides the model's two that export may write:
 * the tokenizer's (ckpt_tok.h) and generation_config.json; i < NTOKENIZER_FILES. */
enum { NTOKENIZER_FILES = CKPT_TOK_NFILES + 1 };
static const char *tokenizer_file(int i) { return i < CKPT_TOK_NFILES ? ckpt_tok_name(i) : "generation_config.json"; }

int hf_export(const char *ckpt, const char *dir, enum st_dtype dtype, char *err, size_t errlen)
{
    char cfg_path[4096], st_path[4096], tmp_cfg[4200], tmp_st[4200], path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", dir);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", dir);
    if (access(cfg_path, F_OK) == 0 || access(st_path, F_OK) == 0)
        return errorf(err, errlen, "%s already holds a model (config.json or model.safetensors): export into a "
                        "new folder, or remove them first", dir);
    for (int i = 0; i < NTOKENIZER_FILES; i++) { /* (a tokenizer of another model would stay beside this one) */
        snprintf(path, sizeof path, "%s/%s", dir, tokenizer_file(i));
        if (access(path, F_OK) == 0)
            return errorf(err, errlen, "%s already holds %s: export into a new folder, or remove it first", dir,
                          tokenizer_file(i));
    }
    struct model_dims d;
    struct config cfg;
    if (ckpt_dims(ckpt, &d, &cfg, err, errlen) != 0) return -1;
    hid_t f = H5Fopen(ckpt, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return errorf(err, errlen, "cannot open %s as HDF5 (missing, unreadable or not a checkpoint)", ckpt);
    int rc = verify_model(f, &d, err, errlen);
    if (rc == 0) rc = ckpt_check_tokenizer(f, ckpt, err, errlen);
    if (rc == 0 && mkdir(dir, 0777) != 0 && errno != EEXIST)
        rc = errorf(err, errlen, "cannot create the folder %s: %s", dir, strerror(errno));
    snprintf(tmp_cfg, sizeof tmp_cfg, "%s.tmp", cfg_path);
    snprintf(tmp_st, sizeof tmp_st, "%s.tmp", st_path);
    if (rc == 0) rc = write_tensors(f, tmp_st, &d, dtype, err, errlen);
    if (rc == 0 && write_config(tmp_cfg, &d, dtype) != 0)
        rc = errorf(err, errlen, "cannot write %s: %s", tmp_cfg, strerror(errno));
    H5Fclose(f);
    if (rc == 0) rc = write_tokenizer(&cfg, ckpt, &d, dir, err, errlen);
    if (rc == 0 && (rename(tmp_st, st_path) != 0 || rename(tmp_cfg, cfg_path) != 0))
        rc = errorf(err, errlen, "cannot rename into %s: %s", dir, strerror(errno));
    if (rc) unlink(tmp_st), unlink(tmp_cfg);
    for (int i = 0; rc && i < NTOKENIZER_FILES; i++) { /* (none was there before: what this export wrote) */
        snprintf(path, sizeof path, "%s/%s", dir, tokenizer_file(i));
        unlink(path);
    }
    return rc;
}
