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

#include "json.h"
#include "log.h"

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
    char name[160];
};

/* A transposed source ([in, out]: GPT-2's Conv1D): the shard's rows come in
 * runs of consecutive logical rows (one per q/k/v part), each a segment of
 * every file row of its columns: parts x columns reads. */
static int load_transposed(struct model *m, enum param_id id, int j, const struct src *f, size_t rows, size_t cols,
                           float *host, char *err, size_t errlen)
{
    const struct model_dims *d = &m->d;
    size_t es = st_dtype_size(f->dtype);
    float *seg = xmalloc(rows * sizeof *seg);
    int rc = 0;
    for (size_t r = 0; r < rows && rc == 0;) {
        size_t lr, lc0, len = 1, x, y;
        param_logical_index(d, id, r, 0, &lr, &lc0);
        while (r + len < rows && (param_logical_index(d, id, r + len, 0, &x, &y), x == lr + len)) len++;
        for (size_t c = 0; c < cols && rc == 0; c++) {
            rc = st_pread(f->fd, f->at + ((lc0 + c) * (size_t)f->rows + lr) * es, f->dtype, len, seg);
            for (size_t i = 0; i < len && rc == 0; i++) host[(r + i) * cols + c] = seg[i];
        }
        if (rc) rc = errorf(err, errlen, "%s: %s", f->name, strerror(errno));
        r += len;
    }
    free(seg);
    if (rc == 0) model_set_tensor(m, id, j, host);
    return rc;
}

/* This rank's shard of tensor id, local layer j, from nsrc sources (one per
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
    float *host = xalloc_aligned(rows * cols * sizeof(float) + 16);
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
        size_t fr = lr - start, es = st_dtype_size(f->dtype); /* the row in source f, its elements' size */
        rc = st_pread(f->fd, f->at + (fr * (size_t)f->cols + lc0) * es, f->dtype, cols, out);
        if (rc) rc = errorf(err, errlen, "%s: %s", f->name, strerror(errno));
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

int hf_tensors(const struct model_dims *d, const struct hf_tensor **t)
{
    static const struct hf_tensor llama[] = {
        {"model.embed_tokens.weight", P_WTE, -1, 0},
        {"model.layers.%d.input_layernorm.weight", P_LN1W, -1, 0},
        {"model.layers.%d.self_attn.q_proj.weight", P_QKVW, 0, 0},
        {"model.layers.%d.self_attn.k_proj.weight", P_QKVW, 1, 0},
        {"model.layers.%d.self_attn.v_proj.weight", P_QKVW, 2, 0},
        {"model.layers.%d.self_attn.o_proj.weight", P_ATTPROJW, -1, 0},
        {"model.layers.%d.post_attention_layernorm.weight", P_LN2W, -1, 0},
        {"model.layers.%d.mlp.gate_proj.weight", P_FCW, 0, 0},
        {"model.layers.%d.mlp.up_proj.weight", P_FCW, 1, 0},
        {"model.layers.%d.mlp.down_proj.weight", P_FCPROJW, -1, 0},
        {"model.norm.weight", P_LNFW, -1, 0},
        {"lm_head.weight", P_LMHEAD, -1, 0},
    };
    static const struct hf_tensor gpt2[] = {
        {"wte.weight", P_WTE, -1, 0},                  {"wpe.weight", P_WPE, -1, 0},
        {"h.%d.ln_1.weight", P_LN1W, -1, 0},           {"h.%d.ln_1.bias", P_LN1B, -1, 0},
        {"h.%d.attn.c_attn.weight", P_QKVW, -1, 1},    {"h.%d.attn.c_attn.bias", P_QKVB, -1, 0},
        {"h.%d.attn.c_proj.weight", P_ATTPROJW, -1, 1}, {"h.%d.attn.c_proj.bias", P_ATTPROJB, -1, 0},
        {"h.%d.ln_2.weight", P_LN2W, -1, 0},           {"h.%d.ln_2.bias", P_LN2B, -1, 0},
        {"h.%d.mlp.c_fc.weight", P_FCW, -1, 1},        {"h.%d.mlp.c_fc.bias", P_FCB, -1, 0},
        {"h.%d.mlp.c_proj.weight", P_FCPROJW, -1, 1},  {"h.%d.mlp.c_proj.bias", P_FCPROJB, -1, 0},
        {"ln_f.weight", P_LNFW, -1, 0},                {"ln_f.bias", P_LNFB, -1, 0},
        {"lm_head.weight", P_LMHEAD, -1, 0},
    };
    *t = d->llama ? llama : gpt2;
    return d->llama ? (int)(sizeof llama / sizeof llama[0]) : (int)(sizeof gpt2 / sizeof gpt2[0]);
}

/* The file's names for tensor id of global layer l, one per row part it is
 * kept in there, in part order; 0 when the family has no such tensor. */
static int hf_names(const struct model_dims *d, enum param_id id, int l, char names[3][160], int *transposed)
{
    const struct hf_tensor *t;
    int nt = hf_tensors(d, &t), n = 0;
    if (!param_present(d, id)) return 0;
    for (int i = 0; i < nt && n < 3; i++)
        if (t[i].id == id) {
            snprintf(names[n++], sizeof names[0], t[i].name, l);
            *transposed = t[i].transposed;
        }
    return n;
}

/* ------------------------------------------------------------ config.json */

struct key_check {
    const char *deck, *file; /* the deck's key, config.json's */
    double here;
    int present;             /* config.json has it (or its default applies) */
    double there;
};

static int read_text(const char *path, char **text, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, fp);
        if (n < cap) break;
        char *bigger = cap < (64u << 20) ? realloc(buf, cap *= 2) : NULL;
        if (!bigger) free(buf);
        buf = bigger;
    }
    fclose(fp);
    if (!buf) return -1;
    *text = buf;
    *len = n;
    return 0;
}

static double num_or(const struct json *cfg, const char *key, double def, int *present)
{
    const struct json *v = json_get(cfg, key);
    if (v && v->kind == JSON_NUMBER) return *present = 1, v->number;
    if (v && (v->kind == JSON_TRUE || v->kind == JSON_FALSE)) return *present = 1, v->kind == JSON_TRUE;
    return *present = def == def, def; /* NaN: no default, absent */
}

/* The deck's &model against config.json: every differing key listed. */
static int check_config(const struct model_dims *d, const struct json *cfg, const char *path, char *err,
                        size_t errlen)
{
    const struct json *mt = json_get(cfg, "model_type");
    const char *type = mt && mt->kind == JSON_STRING ? mt->string : "";
    if (strcmp(type, d->llama ? "llama" : "gpt2") != 0)
        return errorf(err, errlen, "%s: model_type '%s', but the deck's arch = '%s' (triad reads model_type 'llama' "
                    "as arch = 'llama' and 'gpt2' as arch = 'gpt2')", path, type, d->llama ? "llama" : "gpt2");
    double NaN = nan("");
    struct key_check k[12];
    int n = 0;
#define KEY(deck_, file_, here_, def_) \
    k[n] = (struct key_check){ deck_, file_, here_, 0, 0 }, k[n].there = num_or(cfg, file_, def_, &k[n].present), n++
    if (d->llama) {
        KEY("n_layer", "num_hidden_layers", d->L, NaN);
        KEY("n_head", "num_attention_heads", d->NH, NaN);
        KEY("n_kv_head", "num_key_value_heads", d->NKV, k[1].there);
        KEY("d_model", "hidden_size", d->C, NaN);
        KEY("ffn_hidden", "intermediate_size", d->F, NaN);
        KEY("vocab_size", "vocab_size", d->V, NaN);
        KEY("norm_eps", "rms_norm_eps", d->eps, 1e-6);
        KEY("rope_theta", "rope_theta", d->rope_theta, 10000.0);
        KEY("tie_embeddings", "tie_word_embeddings", d->tied, 0.0);
    } else {
        KEY("n_layer", "n_layer", d->L, NaN);
        KEY("n_head", "n_head", d->NH, NaN);
        KEY("d_model", "n_embd", d->C, NaN);
        KEY("vocab_size", "vocab_size", d->V, NaN);
        const struct json *inner = json_get(cfg, "n_inner");
        KEY("ffn_hidden", "n_inner", d->F, inner && inner->kind == JSON_NUMBER ? NaN : 4.0 * d->C);
        KEY("tie_embeddings", "tie_word_embeddings", d->tied, 1.0);
    }
#undef KEY
    char list[1024] = "";
    for (int i = 0; i < n; i++) {
        double tol = fabs(k[i].here) * 1e-6; /* eps and theta are reals: written with fewer digits */
        if (k[i].present && fabs(k[i].here - k[i].there) <= tol) continue;
        size_t len = strlen(list);
        if (!k[i].present)
            snprintf(list + len, sizeof list - len, "%s%s = %g in the deck, no %s in config.json", len ? "; " : "",
                     k[i].deck, k[i].here, k[i].file);
        else
            snprintf(list + len, sizeof list - len, "%s%s = %g in the deck, %s = %g in config.json", len ? "; " : "",
                     k[i].deck, k[i].here, k[i].file, k[i].there);
    }
    if (list[0])
        return errorf(err, errlen, "%s describes another model: %s; set the deck's &model as config.json's", path,
                    list);
    if (!d->llama) {
        long long npos = 0;
        if (json_int(cfg, "n_positions", &npos) != 0 || npos < d->T)
            return errorf(err, errlen, "%s: n_positions = %lld, fewer than the deck's seq_len = %d positions", path,
                        npos, d->T);
        return 0;
    }
    const struct json *rs = json_get(cfg, "rope_scaling"), *ab = json_get(cfg, "attention_bias");
    const struct json *mb = json_get(cfg, "mlp_bias");
    long long hd = 0;
    if (rs && rs->kind != JSON_NULL)
        return errorf(err, errlen, "%s: rope_scaling is set; triad's rotary embedding has no scaling", path);
    if ((ab && ab->kind == JSON_TRUE) || (mb && mb->kind == JSON_TRUE))
        return errorf(err, errlen, "%s: attention_bias or mlp_bias is true; triad's llama blocks have no biases", path);
    if (json_int(cfg, "head_dim", &hd) == 0 && hd != d->HS)
        return errorf(err, errlen, "%s: head_dim = %lld, but d_model / n_head = %d", path, hd, d->HS);
    return 0;
}

/* ------------------------------------------------------------ the folder */

struct folder {
    int nfiles;
    struct st_file *files;
};

static void folder_close(struct folder *f)
{
    for (int i = 0; i < f->nfiles; i++) st_close(&f->files[i]);
    free(f->files);
    memset(f, 0, sizeof *f);
}

/* model.safetensors, or every shard named by model.safetensors.index.json. */
static int folder_open(struct folder *f, const char *dir, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    char path[4096], jerr[256];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    char *text;
    size_t len;
    const char *names[1024];
    int n = 0;
    struct json *idx = NULL;
    if (read_text(path, &text, &len) == 0) {
        idx = json_parse(text, len, jerr, sizeof jerr);
        free(text);
        const struct json *map = json_get(idx, "weight_map");
        if (!map || map->kind != JSON_OBJECT) {
            json_free(idx);
            return errorf(err, errlen, "%s: %s", path, idx ? "no \"weight_map\" object" : jerr);
        }
        for (int i = 0; i < map->n; i++) {
            if (map->item[i].kind != JSON_STRING || strchr(map->item[i].string, '/'))
                return json_free(idx), errorf(err, errlen, "%s: weight_map['%s'] is not a file name in the folder",
                                            path, map->key[i]);
            int seen = 0;
            for (int k = 0; k < n; k++) seen |= strcmp(names[k], map->item[i].string) == 0;
            if (!seen && n < 1024) names[n++] = map->item[i].string;
        }
    } else {
        names[n++] = "model.safetensors";
    }
    f->files = calloc((size_t)n, sizeof *f->files);
    int rc = f->files ? 0 : errorf(err, errlen, "out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = st_open(&f->files[i], path, err, errlen);
        if (rc == 0) f->nfiles++;
    }
    json_free(idx);
    if (rc) folder_close(f);
    return rc;
}

static int folder_find(const struct folder *f, const char *name, struct src *s, char *err, size_t errlen)
{
    for (int i = 0; i < f->nfiles; i++) {
        const struct st_tensor *t = st_find(&f->files[i], name);
        if (!t) continue;
        snprintf(s->name, sizeof s->name, "%s", name);
        s->fd = f->files[i].fd;
        s->at = f->files[i].data_start + t->begin;
        s->dtype = t->dtype;
        s->rows = t->rank > 0 ? t->shape[0] : 1;
        s->cols = t->rank > 1 ? t->shape[1] : 1;
        if (t->rank > 2) return errorf(err, errlen, "%s: tensor '%s' has %d dimensions", f->files[i].path, name, t->rank);
        return 0;
    }
    return errorf(err, errlen, "no tensor '%s' in the folder's safetensors files", name);
}

/* Every tensor this rank holds, from the folder. */
static int load_folder(struct model *m, const struct folder *f, char *err, size_t errlen)
{
    const struct model_dims *d = &m->d;
    for (int id = 0; id < NUM_PARAMS; id++) {
        int layers = m->size[id] == 0 ? 0 : param_table[id].per_layer ? d->Lp : 1;
        for (int j = 0; j < layers; j++) {
            int l = param_table[id].per_layer ? model_global_layer(d, j) : 0, tr;
            char names[3][160];
            struct src s[3];
            int n = hf_names(d, (enum param_id)id, l, names, &tr);
            if (n == 0) continue;
            for (int p = 0; p < n; p++) {
                char prefixed[512]; /* GPT2LMHeadModel's save_pretrained keeps the "transformer." prefix */
                snprintf(prefixed, sizeof prefixed, "transformer.%s", names[p]);
                if (folder_find(f, names[p], &s[p], err, errlen) != 0 &&
                    (d->llama || folder_find(f, prefixed, &s[p], err, errlen) != 0))
                    return -1;
                s[p].transposed = tr;
                int64_t er, ec;
                expected_shape(d, (enum param_id)id, n, p, tr, &er, &ec);
                int pos = id == P_WPE && s[p].rows >= er && s[p].cols == ec; /* the first T of n_positions */
                if (!pos && (s[p].rows != er || s[p].cols != ec))
                    return errorf(err, errlen, "tensor '%s' is [%lld, %lld]; this model needs [%lld, %lld]", s[p].name,
                                (long long)s[p].rows, (long long)s[p].cols, (long long)er, (long long)ec);
                if (tr) s[p].rows = ec, s[p].cols = er; /* as triad sees it */
            }
            if (load_tensor(m, (enum param_id)id, j, s, n, err, errlen)) return -1;
        }
    }
    return 0;
}

int hf_load(const char *dir, struct model *m, const struct grid *g, char *err, size_t errlen)
{
    char path[4096], jerr[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text;
    size_t len;
    int rc = 0;
    struct json *cfg = NULL;
    if (read_text(path, &text, &len) != 0) {
        rc = errorf(err, errlen, "%s: cannot read it (%s): a Hugging Face model folder has config.json and "
                  "model.safetensors", path, strerror(errno));
    } else {
        cfg = json_parse(text, len, jerr, sizeof jerr);
        free(text);
        if (!cfg || cfg->kind != JSON_OBJECT) rc = errorf(err, errlen, "%s: not a JSON object (%s)", path, cfg ? "" : jerr);
    }
    if (rc == 0) rc = check_config(&m->d, cfg, path, err, errlen);
    json_free(cfg);
    struct folder f = {0};
    if (rc == 0) rc = folder_open(&f, dir, err, errlen);
    if (rc == 0) rc = load_folder(m, &f, err, errlen);
    folder_close(&f);
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}

/* ------------------------------------------------------------ llm.c */

/* llm.c's GPT-2 checkpoint: 256 int32 of header (magic 20240326, version 3:
 * fp32 or 5: bf16, max T, V, L, NH, C, padded V), then the tensors in the
 * order below, weights [out, in] as triad's, each layer's tensors of one
 * kind back to back. */
int llmc_load(const char *path, struct model *m, const struct grid *g, char *err, size_t errlen)
{
    const struct model_dims *d = &m->d;
    int32_t h[LLMC_HEADER];
    int rc = 0, fd = open(path, O_RDONLY);
    if (fd < 0 || pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        rc = errorf(err, errlen, "%s: cannot read its header (%s)", path, strerror(errno));
    enum st_dtype dt = rc == 0 && h[1] == 5 ? ST_BF16 : ST_F32;
    if (rc == 0 && h[1] != 3 && h[1] != 5)
        rc = errorf(err, errlen, "%s: llm.c checkpoint version %d; triad reads versions 3 (fp32) and 5 (bf16)", path,
                  h[1]);
    int64_t maxT = h[2], V = h[3], L = h[4], NH = h[5], C = h[6], Vp = h[7];
    if (rc == 0 && (d->llama || L != d->L || NH != d->NH || C != d->C || V != d->V || maxT < d->T || Vp < V ||
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
    uint64_t at = sizeof h, es = st_dtype_size(dt), total = at;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
        total += (uint64_t)(param_table[order[i].id].per_layer ? L : 1) * (uint64_t)(order[i].rows * order[i].cols) * es;
    struct stat sb;
    if (rc == 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size < total)
        rc = errorf(err, errlen, "%s: %lld bytes, but its header promises %llu: the file is truncated", path,
                  (long long)sb.st_size, (unsigned long long)total);
    for (size_t i = 0; rc == 0 && i < sizeof order / sizeof order[0]; i++) {
        enum param_id id = order[i].id;
        int per_layer = param_table[id].per_layer, n = per_layer ? (int)L : 1;
        uint64_t bytes = (uint64_t)(order[i].rows * order[i].cols) * es;
        for (int j = 0; rc == 0 && j < (per_layer ? d->Lp : 1) && m->size[id]; j++) {
            int l = per_layer ? model_global_layer(d, j) : 0;
            struct src s = { .fd = fd, .at = at + (uint64_t)l * bytes, .dtype = dt, .rows = order[i].rows,
                             .cols = order[i].cols };
            snprintf(s.name, sizeof s.name, "%s (%s)", param_table[id].name, path);
            rc = load_tensor(m, id, j, &s, 1, err, errlen);
        }
        at += (uint64_t)n * bytes;
    }
    if (fd >= 0) close(fd);
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}
