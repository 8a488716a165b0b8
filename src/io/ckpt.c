/* ckpt.c -- checkpoint write and read with parallel HDF5.
 *
 * Layout: /model/<name> for whole-model tensors, /model/h.<l>/<name> per
 * layer, the same under /optim/m and /optim/v.  Vectors are 1-D [n],
 * matrices 2-D [out, in]; wte is stored unpadded [V, C].  Every rank takes
 * part in every dataset operation (metadata is collective in parallel HDF5);
 * ranks that do not own a tensor select nothing, and of the data-parallel
 * replicas only dp_rank 0 writes -- but under ZeRO each dp rank writes and
 * reads its own slice of the optimizer state (and of the master weights)
 * straight into the logical datasets: nothing is gathered. */
#include "ckpt.h"
#include "ckpt_piece.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config.h"
#include "flight.h"
#include "lineage.h"
#include "log.h"

static int agree(int rc, char *err, size_t errlen, const struct grid *g)
{
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}

/* The memory of one kind of state (parameters, m, v) on this rank: the
 * flat layout's elements [origin, origin + len) at mem -- all of it, or
 * (ZeRO) this rank's 1/dp slice, whose part of each tensor the rank writes
 * and reads itself. */
struct state_buf {
    float *mem;
    size_t origin, len;
    int sliced;
};

/* Add the rectangles of local elements [a, b) (counted from the tensor's
 * first) of a row block: its first local row is row0, which lies at
 * logical row r0, columns from c0; cols columns a row. */
static void add_rects(struct tensor_ref *t, size_t a, size_t b, size_t row0, size_t cols, size_t r0, size_t c0)
{
    while (a < b) {
        size_t r = a / cols, c = a % cols, rows = 1, width = cols - c < b - a ? cols - c : b - a;
        if (c == 0 && b - a >= cols) rows = (b - a) / cols, width = cols; /* whole rows */
        int k = t->nblocks++;
        t->start[k][0] = r0 + (r - row0);
        t->start[k][1] = c0 + c;
        t->count[k][0] = rows;
        t->count[k][1] = width;
        t->elems += rows * width;
        a += rows * width;
    }
}

static void tensor_ref(struct tensor_ref *t, const char *prefix, const struct model *m, const struct state_buf *sb,
                       enum param_id id, int layer)
{
    const struct model_dims *d = &m->d;
    size_t rows, cols, lrows, lcols;
    param_shape(d, id, &rows, &cols);
    param_local_shape(d, id, &lrows, &lcols);
    if (id == P_WTE || id == P_LMHEAD) rows = (size_t)d->V; /* the padding is not stored */
    if (param_table[id].per_layer)
        snprintf(t->path, sizeof t->path, "%s/h.%d/%s", prefix, layer, param_table[id].name);
    else
        snprintf(t->path, sizeof t->path, "%s/%s", prefix, param_table[id].name);
    t->rank = cols == 1 ? 1 : 2;
    t->dims[0] = rows;
    t->dims[1] = cols;
    t->replicated = param_table[id].shard == SHARD_NONE;
    t->primary = id != P_WTE || model_has_embedding(d); /* of a tied wte's two copies, the first stage writes */
    t->sliced = sb->sliced;
    t->nblocks = 0;
    t->elems = 0;
    t->local = NULL;

    /* the local tensor's flat elements [at, at + n) meet the buffer's in [lo, hi) */
    int j = param_table[id].per_layer ? model_local_layer(d, layer) : 0;
    if (m->size[id] == 0 || j < 0) return;
    size_t n = lrows * lcols, at = m->at[id] + (size_t)j * n;
    size_t lo = at > sb->origin ? at : sb->origin, hi = at + n < sb->origin + sb->len ? at + n : sb->origin + sb->len;
    if (lo >= hi) return;
    t->local = sb->mem + (lo - sb->origin);

    /* the row blocks, in the order they lie in local memory: one per row
     * part (q, k, v; gate, up) of a row-split tensor */
    size_t part[3] = {lrows}, row = 0, r0, c0;
    int nparts = 1;
    if (param_table[id].shard == SHARD_ROWS) {
        nparts = param_row_parts(d, id, part);
        for (int b = 0; b < nparts; b++) part[b] /= (size_t)d->tp;
    }
    for (int b = 0; b < nparts; b++) {
        param_logical_index(d, id, row, 0, &r0, &c0);
        size_t real = r0 >= rows ? 0 : r0 + part[b] > rows ? rows - r0 : part[b]; /* wte: padding rows last */
        size_t a = row * lcols, e = (row + real) * lcols;
        if (a < lo - at) a = lo - at;
        if (e > hi - at) e = hi - at;
        if (a < e) add_rects(t, a, e, row, lcols, r0, c0);
        row += part[b];
    }
    if (t->elems == 0) t->local = NULL; /* padding only */
}

/* Select this rank's blocks in the file space (nothing if it has none). */
static void select_blocks(hid_t fs, const struct tensor_ref *t, int take)
{
    H5Sselect_none(fs);
    if (!take) return;
    for (int b = 0; b < t->nblocks; b++)
        if (t->count[b][0] > 0)
            H5Sselect_hyperslab(fs, H5S_SELECT_OR, t->start[b], NULL, t->count[b], NULL);
}

/* What a walk over the checkpoint's tensors carries: per-dataset checksums
 * (partial on this rank, in walk order) and the first error. */
struct walk_ctx {
    const struct grid *g;
    uint64_t *sums;
    int next;        /* index of the dataset being visited */
    char *err;
    size_t errlen;
    int failed;      /* an error is in err (later ones are dropped) */
    struct ckpt_piece *pieces; /* (creating for a background write) this rank's, by index */
    int npieces, cursor;
};

/* Record this rank's first error of the walk. */
static void walk_fail(struct walk_ctx *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void walk_fail(struct walk_ctx *w, const char *fmt, ...)
{
    if (w->failed) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, w->errlen, fmt, ap);
    va_end(ap);
    text_printable(w->err);
    w->failed = 1;
}

typedef int (*tensor_fn)(hid_t file, struct tensor_ref *t, struct walk_ctx *w);

/* Visit every tensor of every layer in a fixed order (the same on all
 * ranks), all of them even after an error: the dataset calls are collective,
 * so a rank that stopped early would leave the others waiting in the next
 * one.  Returns -1 if this rank failed (the first error in w->err). */
static int walk(hid_t file, const char *prefix, const struct model *m, const struct state_buf *sb, tensor_fn fn,
                struct walk_ctx *w)
{
    for (int id = 0; id < NUM_PARAMS; id++) {
        int layers = !param_present(&m->d, (enum param_id)id) ? 0 : param_table[id].per_layer ? m->d.L : 1;
        for (int l = 0; l < layers; l++) {
            struct tensor_ref t;
            tensor_ref(&t, prefix, m, sb, (enum param_id)id, l);
            if (fn(file, &t, w) != 0 && !w->failed) walk_fail(w, "rank %d: %s failed", w->g->rank, t.path);
            w->next++;
            flight_progress(); /* a long checkpoint that advances is not a hang (diag.hang_timeout) */
        }
    }
    return w->failed ? -1 : 0;
}

static int datasets_per_prefix(const struct model *m) { return model_logical_tensors(&m->d); }

/* Does this rank own its selection for writing and verifying?  One owner
 * per element: data-parallel replica 0 (under ZeRO each dp rank, of its
 * slice), tp rank 0 of a replicated tensor, the first stage's copy of wte. */
static int owner(const struct tensor_ref *t, const struct grid *g)
{
    return t->local != NULL && t->primary && (t->sliced || g->dpcp_rank == 0) && (!t->replicated || g->tp_rank == 0);
}

/* A tensor's dataset, of file space fs; allocated: contiguous, its space
 * allocated now (for a write outside HDF5).  Every element is written: no
 * fill pass first. */
static hid_t create_dataset(hid_t file, const struct tensor_ref *t, hid_t fs, int allocated)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    if (allocated) {
        H5Pset_layout(dcpl, H5D_CONTIGUOUS);
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY);
    }
    hid_t ds = H5Dcreate2(file, t->path, H5T_NATIVE_FLOAT, fs, lcpl, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Pclose(lcpl);
    return ds;
}

static int write_tensor(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t fs = H5Screate_simple(t->rank, t->dims, NULL);
    hid_t ds = create_dataset(file, t, fs, 0);
    int writer = owner(t, w->g);
    hsize_t n = writer ? t->elems : 0;
    hid_t ms = H5Screate_simple(1, &n, NULL);
    select_blocks(fs, t, writer);
    hid_t dx = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dx, H5FD_MPIO_COLLECTIVE);
    static const float nothing = 0; /* HDF5 wants a buffer even for an empty selection */
    herr_t rc = ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, dx, writer ? t->local : &nothing);
    if (writer) w->sums[w->next] = ckpt_partial_checksum(t, t->local);
    H5Pclose(dx);
    H5Sclose(ms);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(fs);
    if (rc < 0) walk_fail(w, "rank %d: writing %s failed", w->g->rank, t->path);
    return rc < 0 ? -1 : 0;
}

/* Read back this rank's written selection (if it owns one) and sum it as
 * write_tensor did, for verify_written. */
static int reread_tensor(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    if (ds < 0) {
        walk_fail(w, "rank %d: dataset %s is missing", w->g->rank, t->path);
        return -1;
    }
    int rc = 0;
    if (owner(t, w->g) && t->elems > 0) {
        hid_t fs = H5Dget_space(ds);
        hsize_t n = t->elems;
        hid_t ms = H5Screate_simple(1, &n, NULL);
        select_blocks(fs, t, 1);
        float *back = xmalloc(t->elems * sizeof(float));
        if (H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, back) < 0) {
            walk_fail(w, "rank %d: reading back %s failed", w->g->rank, t->path);
            rc = -1;
        } else {
            w->sums[w->next] = ckpt_partial_checksum(t, back);
        }
        free(back);
        H5Sclose(ms);
        H5Sclose(fs);
    }
    H5Dclose(ds);
    return rc;
}

static int read_tensor(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    if (H5Lexists(file, t->path, H5P_DEFAULT) <= 0) {
        walk_fail(w, "dataset %s is missing", t->path);
        return -1;
    }
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    hid_t fs = ds < 0 ? -1 : H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int rank = fs < 0 ? -1 : H5Sget_simple_extent_ndims(fs);
    if (rank == t->rank) H5Sget_simple_extent_dims(fs, dims, NULL);
    int rc = 0;
    if (rank != t->rank || dims[0] != t->dims[0] || (rank == 2 && dims[1] != t->dims[1])) {
        walk_fail(w, "dataset %s has shape [%llu%s%llu], the model needs [%llu%s%llu]: the deck's "
                 "n_layer/d_model/seq_len/vocab_size differ from the checkpoint's", t->path,
                 (unsigned long long)dims[0], rank == 2 ? ", " : "", rank == 2 ? (unsigned long long)dims[1] : 0ull,
                 (unsigned long long)t->dims[0], t->rank == 2 ? ", " : "",
                 t->rank == 2 ? (unsigned long long)t->dims[1] : 0ull);
        rc = -1;
    } else if (t->local) {
        hsize_t n = t->elems;
        hid_t ms = H5Screate_simple(1, &n, NULL);
        select_blocks(fs, t, 1);
        if (H5Dread(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, t->local) < 0) {
            walk_fail(w, "reading %s failed (truncated or corrupted file?)", t->path);
            rc = -1;
        }
        H5Sclose(ms);
        if (rc == 0 && owner(t, w->g)) w->sums[w->next] = ckpt_partial_checksum(t, t->local);
    }
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    return rc;
}

/* ------------------------------------------------------------ attributes */

/* A scalar attribute of HDF5 type `type` (native int64 or double). */
static void attr_write(hid_t obj, const char *name, hid_t type, const void *v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, type, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, type, v);
    H5Aclose(a);
    H5Sclose(s);
}

static int attr_read(hid_t obj, const char *name, hid_t type, void *v)
{
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    herr_t rc = H5Aread(a, type, v);
    H5Aclose(a);
    return rc < 0 ? -1 : 0;
}

static void attr_i64(hid_t obj, const char *name, int64_t v) { attr_write(obj, name, H5T_NATIVE_INT64, &v); }
static int read_attr_i64(hid_t obj, const char *name, int64_t *v) { return attr_read(obj, name, H5T_NATIVE_INT64, v); }

static void attr_str(hid_t obj, const char *name, const char *text)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(text) + 1);
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, text);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

/* The string attribute `name` of obj, malloc'ed, or NULL if it has none. */
static char *attr_read_str(hid_t obj, const char *name)
{
    if (H5Aexists(obj, name) <= 0) return NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    char *text = NULL;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t n = H5Tget_size(t);
        text = xcalloc(n + 1, 1);
        if (H5Aread(a, t, text) < 0) free(text), text = NULL;
    }
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return text;
}

int ckpt_read_config(const char *path, struct config *cfg, char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = access(path, R_OK) == 0 ? H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT) : -1;
    if (f < 0) {
        snprintf(err, errlen, "cannot open %s as HDF5 (missing, unreadable or not a checkpoint)", path);
        return -1;
    }
    char *text = attr_read_str(f, "deck");
    H5Fclose(f);
    if (!text) {
        snprintf(err, errlen, "%s has no stored deck: not a triad checkpoint", path);
        return -1;
    }
    struct deck_error de;
    config_defaults(cfg);
    int rc = config_read_string(cfg, text, "the stored deck", &de);
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "%s: the stored deck does not read (%d:%d: %s): the file is corrupted", path, de.line,
                 de.col, de.what);
        return -1;
    }
    config_resolve(cfg);
    return 0;
}

/* A restart or init_from must describe the same model: the stored deck's
 * shape keys against this run's, every mismatch listed, before any tensor
 * is read.  Files from elsewhere carry no deck and are checked by shape. */
static int check_model_keys(hid_t f, const char *path, const struct model_dims *d, char *err, size_t errlen)
{
    char *text = attr_read_str(f, "deck");
    if (!text) return 0;
    struct config c;
    struct deck_error ce;
    config_defaults(&c);
    int rc = config_read_string(&c, text, "the stored deck", &ce);
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "the file is corrupted: the deck stored in %s does not read (%d:%d: %s)", path,
                 ce.line, ce.col, ce.what);
        return -1;
    }
    struct model_family fam;
    shape_family(&fam, &c); /* the stored deck's n_kv_head, ffn_hidden, tie_embeddings as they were in effect */
    /* the derived sizes only where the key they follow from agrees (n_head, d_model) */
    int kv = d->NH == c.model.n_head, ffn = d->C == c.model.d_model;
    struct { const char *name; int64_t here, there; } k[] = {
        {"n_layer", d->L, c.model.n_layer},   {"n_head", d->NH, c.model.n_head},
        {"d_model", d->C, c.model.d_model},   {"seq_len", d->T, c.model.seq_len},
        {"vocab_size", d->V, c.model.vocab_size}, {"n_kv_head", kv ? d->NKV : 0, kv ? fam.NKV : 0},
        {"ffn_hidden", ffn ? d->F : 0, ffn ? fam.F : 0}, {"tie_embeddings", d->tied, fam.tied},
    };
    char list[768] = "";
    if (d->llama != fam.llama)
        snprintf(list, sizeof list, "arch = '%s' here, '%s' in the checkpoint", d->llama ? "llama" : "gpt2",
                 c.model.arch);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].here != k[i].there)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s = %lld here, %lld in the checkpoint",
                     list[0] ? "; " : "", k[i].name, (long long)k[i].here, (long long)k[i].there);
    if (!list[0]) return 0;
    snprintf(err, errlen, "the checkpoint holds another model (&model: %s): set the deck's &model as the "
             "checkpoint's, or use another checkpoint", list);
    return -1;
}

/* ------------------------------------------------------------------ files */

enum open_mode { OPEN_READ, OPEN_CREATE, OPEN_UPDATE };

static hid_t open_parallel(const char *path, enum open_mode mode, const struct grid *g)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, g->world_comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1); /* metadata read once and broadcast, written collectively */
    H5Pset_coll_metadata_write(fapl, 1);
    H5Pset_alignment(fapl, 1 << 20, 1 << 20); /* tensors of 1 MiB and more start on MiB boundaries */
    hid_t f = mode == OPEN_CREATE ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                                  : H5Fopen(path, mode == OPEN_UPDATE ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    return f;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static int ckpt_step_of(const char *name, int64_t *step)
{
    long long s;
    char tail[8];
    if (sscanf(name, "ckpt_%lld.h5%7s", &s, tail) != 1) return -1;
    *step = s;
    return 0;
}

/* The new checkpoint of `step` joins run_dir's lineage, and all but its
 * newest `keep` are removed (rank 0 only).  Only the lineage's own files
 * are ever removed: another run's checkpoints in the directory stay. */
static void rotate(const char *dir, int64_t step, int keep)
{
    static struct lineage l; /* (large: not on the stack) */
    char err[1024];
    if (lineage_read(dir, &l, err, sizeof err) != 0) {
        log_warn("%s; nothing rotated, a new manifest starts with ckpt_%lld.h5", err, (long long)step);
        l.n = 0;
    }
    if (l.n == 0 || l.step[l.n - 1] != step) {
        if (l.n == LINEAGE_MAX) memmove(l.step, l.step + 1, (size_t)--l.n * sizeof l.step[0]);
        l.step[l.n++] = step;
    }
    int drop = l.n > keep ? l.n - keep : 0;
    for (int i = 0; i < drop; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/ckpt_%lld.h5", dir, (long long)l.step[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            log_warn("cannot remove old checkpoint %s: %s", path, strerror(errno));
    }
    l.n -= drop;
    memmove(l.step, l.step + drop, (size_t)l.n * sizeof l.step[0]);
    if (lineage_write(dir, &l, err, sizeof err) != 0) log_warn("%s: rotation and restart = 'auto' fall back to step numbers", err);
}

/* Attach the checksum of each dataset (after the owners' partial sums met). */
static int attach_checksum(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = ds < 0 ? -1 : H5Acreate2(ds, "checksum", H5T_NATIVE_UINT64, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_UINT64, &w->sums[w->next]);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    if (ds >= 0) H5Dclose(ds);
    if (rc < 0) walk_fail(w, "writing the checksum of %s failed", t->path);
    return rc < 0 ? -1 : 0;
}

/* Compare the stored checksum (if the file has one) with the data read. */
static int verify_checksum(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    if (ds < 0 || H5Aexists(ds, "checksum") <= 0) { /* weights from elsewhere carry none */
        if (ds >= 0) H5Dclose(ds);
        return 0;
    }
    uint64_t stored = 0;
    hid_t a = H5Aopen(ds, "checksum", H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Aread(a, H5T_NATIVE_UINT64, &stored);
    if (a >= 0) H5Aclose(a);
    H5Dclose(ds);
    if (rc < 0 || stored != w->sums[w->next]) {
        walk_fail(w, "checksum mismatch in %s (stored %016llx, data %016llx): the file is corrupted",
                 t->path, (unsigned long long)stored, (unsigned long long)w->sums[w->next]);
        return -1;
    }
    return 0;
}

/* The groups of a checkpoint, and the state each holds (o may be NULL: the
 * model alone).  Mixed precision: the fp32 master weights are the model. */
static const char *const prefix[3] = {"/model", "/optim/m", "/optim/v"};

static void state_bufs(const struct model *m, const struct optim *o, struct state_buf sb[3])
{
    struct state_buf whole = {m->params_mem, 0, m->flat, 0}, none = {NULL, 0, 0, 0};
    sb[0] = whole;
    sb[1] = sb[2] = none; /* (the model alone: nothing of the optimizer) */
    if (m->shard_mem) sb[0] = (struct state_buf){m->shard_mem, m->shard_at, m->shard_n, 1}; /* ZeRO-3: the slice */
    if (!o) return;
    struct state_buf slice = {NULL, o->offset, o->shard, o->zero_stage > 0}; /* (all of it without ZeRO) */
    if (o->master_mem) sb[0] = slice, sb[0].mem = o->master_mem;
    sb[1] = slice, sb[1].mem = o->m_mem;
    sb[2] = slice, sb[2].mem = o->v_mem;
}

/* A newly written file, before it may replace anything: every tensor reads
 * back with the checksum stored beside it (each owner re-reads what it
 * wrote: an I/O error lost inside a collective write, or a short file,
 * shows here), and its step is the one written.  Collective. */
static int verify_written(const char *path, const struct model *m, const struct optim *o, int64_t step,
                          const struct grid *g, char *err, size_t errlen)
{
    hid_t f = open_parallel(path, OPEN_READ, g);
    int rc = 0;
    if (f < 0) {
        snprintf(err, errlen, "rank %d: %s does not open as HDF5 after writing it", g->rank, path);
        rc = -1;
    }
    if (agree(rc, err, errlen, g)) return -1;
    struct state_buf sb[3];
    state_bufs(m, o, sb);
    int per = datasets_per_prefix(m);
    struct walk_ctx w = {.g = g, .sums = xcalloc((size_t)per * 3, sizeof(uint64_t)), .err = err, .errlen = errlen};
    for (int p = 0; p < 3; p++) rc |= walk(f, prefix[p], m, &sb[p], reread_tensor, &w);
    rc = agree(rc, err, errlen, g);
    if (rc == 0) {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, w.sums, per * 3, MPI_UINT64_T, MPI_SUM, g->world_comm));
        w.next = 0;
        for (int p = 0; p < 3; p++) rc |= walk(f, prefix[p], m, &sb[p], verify_checksum, &w);
        int64_t stored = -1;
        if (rc == 0 && (read_attr_i64(f, "step", &stored) != 0 || stored != step)) {
            snprintf(err, errlen, "rank %d: the step attribute reads back as %lld, not %lld", g->rank,
                     (long long)stored, (long long)step);
            rc = -1;
        }
        rc = agree(rc, err, errlen, g);
    }
    free(w.sums);
    H5Fclose(f);
    return rc;
}

/* Read (or write, then attach checksums to) the tensors under each prefix. */
static int transfer(hid_t f, const struct model *m, const struct optim *o, int with_optim, int writing,
                    const struct grid *g, char *err, size_t errlen)
{
    struct state_buf sb[3];
    state_bufs(m, o, sb);
    int np = with_optim ? 3 : 1, per = datasets_per_prefix(m);
    struct walk_ctx w = {.g = g, .sums = xcalloc((size_t)per * np, sizeof(uint64_t)), .err = err, .errlen = errlen};
    int rc = 0;
    /* state in device memory: HDF5 reads and writes a host copy of each buffer */
    float *dev[3] = {NULL, NULL, NULL};
    if (m->k->on_device)
        for (int p = 0; p < np; p++) {
            dev[p] = sb[p].mem;
            sb[p].mem = xalloc_aligned(sb[p].len * sizeof(float)); /* (reading too: what the file lacks stays) */
            m->k->to_host(sb[p].mem, dev[p], sb[p].len * sizeof(float));
        }
    for (int p = 0; p < np; p++) rc |= walk(f, prefix[p], m, &sb[p], writing ? write_tensor : read_tensor, &w);
    rc = mpi_agree_error(g->world_comm, rc != 0, err, errlen);
    for (int p = 0; p < np && dev[p] && !writing && rc == 0; p++)
        m->k->to_device(dev[p], sb[p].mem, sb[p].len * sizeof(float));
    if (rc == 0) {
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, w.sums, per * np, MPI_UINT64_T, MPI_SUM, g->world_comm));
        w.next = 0;
        for (int p = 0; p < np; p++) rc |= walk(f, prefix[p], m, &sb[p], writing ? attach_checksum : verify_checksum, &w);
        rc = mpi_agree_error(g->world_comm, rc != 0, err, errlen);
    }
    free(w.sums);
    for (int p = 0; p < np; p++)
        if (dev[p]) free(sb[p].mem);
    return rc;
}

/* About the size of a checkpoint file: model, m and v in fp32, each tensor
 * of 1 MiB or more starting on a MiB boundary (open_parallel), and the
 * metadata (1 KiB a dataset and 32 KiB more: measured 0.4 KiB). */
double ckpt_file_bytes(const struct model *m)
{
    double bytes = 32 << 10;
    for (int id = 0; id < NUM_PARAMS; id++)
        for (int l = 0; l < (param_table[id].per_layer ? m->d.L : 1); l++) {
            struct tensor_ref t;
            struct state_buf whole = {m->params_mem, 0, m->flat, 0};
            tensor_ref(&t, "/model", m, &whole, (enum param_id)id, l);
            double b = 4.0 * (double)t.dims[0] * (double)(t.rank == 2 ? t.dims[1] : 1);
            bytes += 3 * (b + (b >= (1 << 20) ? (1 << 20) : 0) + 1024);
        }
    return bytes;
}

/* Is there room for the file?  Checked before writing: HDF5 1.10 and
 * Open MPI's MPI-IO can hang in a collective close when a write fails on
 * some ranks only (a full disk), so a checkpoint that cannot fit is not
 * started.  Rank 0 asks the file system; the answer is agreed. */
static int check_room(const char *run_dir, const struct model *m, const struct grid *g, char *err, size_t errlen)
{
    int rc = 0;
    struct statvfs fs;
    double need = ckpt_file_bytes(m);
    if (g->rank == 0 && statvfs(run_dir, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < need) {
        snprintf(err, errlen, "not enough space in %s: the checkpoint needs about %.0f KiB, %.0f KiB are free",
                 run_dir, need / 1024, (double)fs.f_bavail * (double)fs.f_frsize / 1024);
        rc = -1;
    }
    return agree(rc, err, errlen, g);
}

/* The file's attributes: the counters, the grid that wrote it, the deck. */
static void write_attributes(hid_t f, const struct ckpt_state *st, const char *deck, const struct grid *g)
{
    attr_i64(f, "format_version", CKPT_FORMAT_VERSION);
    attr_i64(f, "step", st->step);
    attr_i64(f, "tokens", st->tokens);
    attr_i64(f, "optimizer_updates", st->updates);
    if (st->has_scaler) { /* fp16's dynamic scale */
        attr_write(f, "loss_scale", H5T_NATIVE_DOUBLE, &st->loss_scale);
        attr_i64(f, "loss_scale_good_steps", st->good_steps);
        attr_i64(f, "loss_scale_hysteresis_left", st->hysteresis_left);
    }
    attr_i64(f, "tp", g->tp);
    attr_i64(f, "cp", g->cp);
    attr_i64(f, "dp", g->dp);
    attr_i64(f, "pp", g->pp);
    attr_str(f, "deck", deck);
}

/* Create <run_dir>/ckpt_<step>.h5.tmp (its name in tmp) for writing, if a
 * checkpoint fits.  Collective; the file, or -1 with err on every rank. */
static hid_t create_tmp(const char *run_dir, int64_t step, const struct model *m, const struct grid *g, char *tmp,
                        size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s/ckpt_%lld.h5.tmp", run_dir, (long long)step);
    if (check_room(run_dir, m, g, err, errlen) != 0) return -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = open_parallel(tmp, OPEN_CREATE, g);
    if (f < 0)
        snprintf(err, errlen, "rank %d: cannot create %s: is %s writable and is there space?", g->rank, tmp, run_dir);
    /* (a file open on some ranks only is left open: its close is collective) */
    return agree(f < 0, err, errlen, g) == 0 ? f : -1;
}

/* Close a file being written (rc: how the writing went), then every rank
 * flushes it (on a parallel file system each client holds its own dirty
 * pages).  Collective; the agreed result. */
static int close_and_flush(hid_t f, const char *tmp, int rc, const struct grid *g, char *err, size_t errlen)
{
    if (H5Fclose(f) < 0 && rc == 0) {
        snprintf(err, errlen, "rank %d: closing %s failed (disk full?)", g->rank, tmp);
        rc = -1;
    }
    rc = agree(rc, err, errlen, g);
    if (rc == 0 && fsync_path(tmp) != 0) {
        snprintf(err, errlen, "rank %d: fsync of %s failed: %s", g->rank, tmp, strerror(errno));
        rc = -1;
    }
    return agree(rc, err, errlen, g);
}

/* The end of a write (rc: how it went, agreed): only a verified file
 * replaces anything, and only then are old ones rotated out; a failed one
 * is removed.  Collective. */
static int publish(const char *run_dir, const char *tmp, int64_t step, int keep, int rc, const struct grid *g,
                   char *err, size_t errlen)
{
    char final[4096];
    snprintf(final, sizeof final, "%s/ckpt_%lld.h5", run_dir, (long long)step);
    if (rc == 0 && g->rank == 0) {
        if (rename(tmp, final) != 0) {
            snprintf(err, errlen, "rank 0: cannot rename %s to %s: %s", tmp, final, strerror(errno));
            rc = -1;
        } else {
            fsync_path(run_dir);
            rotate(run_dir, step, keep);
        }
    }
    rc = agree(rc, err, errlen, g);
    if (rc != 0 && g->rank == 0) unlink(tmp);
    return rc;
}

int ckpt_save(const char *run_dir, const struct ckpt_state *st, const struct model *m, const struct optim *o,
              const char *deck, const struct grid *g, int keep, char *err, size_t errlen)
{
    char tmp[4200];
    hid_t f = create_tmp(run_dir, st->step, m, g, tmp, sizeof tmp, err, errlen);
    if (f < 0) return -1;
    int rc = transfer(f, m, o, 1, 1, g, err, errlen);
    if (rc == 0) write_attributes(f, st, deck, g);
    rc = close_and_flush(f, tmp, rc, g, err, errlen);
    if (rc == 0 && verify_written(tmp, m, o, st->step, g, err, errlen) != 0) {
        /* (a write error can be lost inside MPI-IO's collective writes: say what the disk has) */
        char why[1024];
        snprintf(why, sizeof why, "%s", err);
        struct statvfs fs;
        if (statvfs(run_dir, &fs) == 0)
            snprintf(err, errlen, "%s does not read back as written (%s); the file system of %s has %llu KiB free",
                     tmp, why, run_dir, (unsigned long long)fs.f_bavail * fs.f_frsize / 1024);
        else
            snprintf(err, errlen, "%s does not read back as written (%s)", tmp, why);
        rc = -1;
    }
    return publish(run_dir, tmp, st->step, keep, rc, g, err, errlen);
}

/* ------------------------------------- a write outside HDF5 (ckpt_async.c) */

/* The owned selections, in walk order (w->pieces has room for every dataset). */
static int list_piece(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    (void)file;
    if (owner(t, w->g) && t->elems > 0) w->pieces[w->npieces++] = (struct ckpt_piece){*t, 0, w->next};
    return 0;
}

int ckpt_pieces(const struct model *m, const struct optim *o, const struct grid *g, struct ckpt_piece **pieces,
                int *n)
{
    struct state_buf sb[3];
    state_bufs(m, o, sb);
    int datasets = 3 * datasets_per_prefix(m);
    char err[8];
    struct walk_ctx w = {.g = g, .err = err, .errlen = sizeof err,
                         .pieces = xcalloc((size_t)datasets, sizeof(struct ckpt_piece))};
    for (int p = 0; p < 3; p++) walk(-1, prefix[p], m, &sb[p], list_piece, &w);
    *pieces = w.pieces;
    *n = w.npieces;
    return datasets;
}

/* A dataset stored in one piece, its space allocated now (its bytes written
 * later, at their offset); the owner notes where it starts. */
static int create_allocated(hid_t file, struct tensor_ref *t, struct walk_ctx *w)
{
    hid_t fs = H5Screate_simple(t->rank, t->dims, NULL);
    hid_t ds = create_dataset(file, t, fs, 1);
    haddr_t at = ds < 0 ? HADDR_UNDEF : H5Dget_offset(ds);
    struct ckpt_piece *mine = w->cursor < w->npieces && w->pieces[w->cursor].index == w->next
                                  ? &w->pieces[w->cursor++] : NULL;
    if (mine) mine->offset = (uint64_t)at;
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(fs);
    if (ds < 0 || at == HADDR_UNDEF) walk_fail(w, "rank %d: creating %s failed", w->g->rank, t->path);
    return ds < 0 || at == HADDR_UNDEF ? -1 : 0;
}

int ckpt_create_allocated(const char *run_dir, const struct ckpt_state *st, const struct model *m,
                          const struct optim *o, const char *deck, const struct grid *g, struct ckpt_piece *pieces,
                          int n, char *tmp, size_t tmplen, int *reserved, char *err, size_t errlen)
{
    hid_t f = create_tmp(run_dir, st->step, m, g, tmp, tmplen, err, errlen);
    if (f < 0) return -1;
    int rc = 0;
    struct state_buf sb[3];
    state_bufs(m, o, sb);
    struct walk_ctx w = {.g = g, .err = err, .errlen = errlen, .pieces = pieces, .npieces = n};
    for (int p = 0; p < 3; p++) rc |= walk(f, prefix[p], m, &sb[p], create_allocated, &w);
    rc = agree(rc, err, errlen, g); /* (the attributes are collective metadata) */
    if (rc == 0) write_attributes(f, st, deck, g);
    if (H5Fclose(f) < 0 && rc == 0) {
        snprintf(err, errlen, "rank %d: closing %s failed (disk full?)", g->rank, tmp);
        rc = -1;
    }
    rc = agree(rc, err, errlen, g);
    /* the data's blocks reserved now (HDF5 only reserved addresses): a disk
     * that cannot hold the file says so here, and the free space the run
     * checks is what is left; 1 in *reserved where that was done */
    uint64_t end = 0;
    for (int i = 0; i < n; i++) {
        const struct tensor_ref *t = &pieces[i].t;
        uint64_t e = pieces[i].offset + 4 * (uint64_t)t->dims[0] * (t->rank == 2 ? t->dims[1] : 1);
        if (e > end) end = e;
    }
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &end, 1, MPI_UINT64_T, MPI_MAX, g->world_comm));
    *reserved = 0;
    if (rc == 0 && g->rank == 0) {
        int fd = open(tmp, O_WRONLY), e = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)end);
        if (fd >= 0) close(fd);
        if (e == 0) *reserved = 1;
        else if (e != EINVAL && e != EOPNOTSUPP) { /* (a file system without the call: the run counts the file) */
            snprintf(err, errlen, "rank 0: cannot reserve the %.0f KiB of %s: %s", (double)end / 1024, tmp,
                     strerror(e));
            rc = -1;
        }
    }
    rc = agree(rc, err, errlen, g);
    if (rc != 0 && g->rank == 0) unlink(tmp);
    return rc;
}

int ckpt_seal(const char *run_dir, const char *tmp, int64_t step, const struct model *m, const struct optim *o,
              uint64_t *sums, int failed, const struct grid *g, int keep, char *err, size_t errlen)
{
    int rc = agree(failed, err, errlen, g), datasets = 3 * datasets_per_prefix(m);
    struct state_buf sb[3];
    state_bufs(m, o, sb);
    struct walk_ctx w = {.g = g, .sums = sums, .err = err, .errlen = errlen};
    hid_t f = -1;
    if (rc == 0) { /* the checksums, now that the owners' sums can meet */
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, datasets, MPI_UINT64_T, MPI_SUM, g->world_comm));
        f = open_parallel(tmp, OPEN_UPDATE, g);
        if (f < 0) snprintf(err, errlen, "rank %d: %s does not open as HDF5 after writing it", g->rank, tmp);
        rc = agree(f < 0, err, errlen, g);
    }
    if (rc == 0) {
        for (int p = 0; p < 3; p++) rc |= walk(f, prefix[p], m, &sb[p], attach_checksum, &w);
        rc = close_and_flush(f, tmp, rc, g, err, errlen);
    }
    if (rc == 0) { /* what is stored beside the data (each owner read its data back already) */
        f = open_parallel(tmp, OPEN_READ, g);
        if (f < 0) snprintf(err, errlen, "rank %d: %s does not open as HDF5 after writing it", g->rank, tmp);
        rc = agree(f < 0, err, errlen, g);
        w.next = 0;
        for (int p = 0; p < 3 && rc == 0; p++) rc |= walk(f, prefix[p], m, &sb[p], verify_checksum, &w);
        int64_t stored = -1;
        if (rc == 0 && (read_attr_i64(f, "step", &stored) != 0 || stored != step)) {
            snprintf(err, errlen, "rank %d: the step attribute of %s reads back as %lld, not %lld", g->rank, tmp,
                     (long long)stored, (long long)step);
            rc = -1;
        }
        if (f >= 0) H5Fclose(f);
        rc = agree(rc, err, errlen, g);
    }
    return publish(run_dir, tmp, step, keep, rc, g, err, errlen);
}

static int load(const char *path, struct model *m, struct optim *o, struct ckpt_state *st, const struct grid *g,
                char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = 0;
    hid_t f = access(path, R_OK) == 0 ? open_parallel(path, OPEN_READ, g) : -1;
    if (f < 0) {
        snprintf(err, errlen, "cannot open %s as HDF5 (missing, unreadable, truncated or not an HDF5 file)", path);
        rc = -1;
    }
    if (agree(rc, err, errlen, g)) return -1;
    rc = agree(check_model_keys(f, path, &m->d, err, errlen), err, errlen, g);
    if (rc == 0) rc = transfer(f, m, o, o != NULL, 0, g, err, errlen);
    if (rc == 0 && st && (read_attr_i64(f, "step", &st->step) || read_attr_i64(f, "tokens", &st->tokens))) {
        snprintf(err, errlen, "%s has no step/tokens attributes: it is corrupted, or not a triad checkpoint", path);
        rc = -1;
    }
    if (rc == 0 && st) { /* optional: absent in older files, and the scale in runs without fp16 */
        if (read_attr_i64(f, "optimizer_updates", &st->updates) != 0) st->updates = st->step;
        st->has_scaler = attr_read(f, "loss_scale", H5T_NATIVE_DOUBLE, &st->loss_scale) == 0 &&
                         read_attr_i64(f, "loss_scale_good_steps", &st->good_steps) == 0 &&
                         read_attr_i64(f, "loss_scale_hysteresis_left", &st->hysteresis_left) == 0;
    }
    H5Fclose(f);
    return agree(rc, err, errlen, g);
}

int ckpt_load_model(const char *path, struct model *m, const struct grid *g, char *err, size_t errlen)
{
    return load(path, m, NULL, NULL, g, err, errlen);
}

int ckpt_load_all(const char *path, struct model *m, struct optim *o, struct ckpt_state *st,
                  const struct grid *g, char *err, size_t errlen)
{
    return load(path, m, o, st, g, err, errlen);
}

int ckpt_restart_auto(const char *run_dir, struct model *m, struct optim *o, struct ckpt_state *st,
                      const struct grid *g, char *path, size_t len, char *err, size_t errlen)
{
    /* rank 0 lists the checkpoints, newest first; everyone tries them in turn */
    int64_t steps[4096];
    int n = 0;
    static struct lineage l;
    char lerr[1024];
    if (g->rank == 0 && lineage_read(run_dir, &l, lerr, sizeof lerr) != 0) {
        fprintf(stderr, "warning: %s; taking the checkpoints by step number\n", lerr);
        l.n = 0;
    }
    if (g->rank == 0 && l.n > 0) { /* the lineage, newest first */
        for (int i = l.n - 1; i >= 0; i--) steps[n++] = l.step[i];
    } else if (g->rank == 0) { /* no manifest (a directory from elsewhere): by step number */
        DIR *dp = opendir(run_dir);
        struct dirent *e;
        while (dp && (e = readdir(dp)) && n < 4096) {
            int64_t s;
            if (ckpt_step_of(e->d_name, &s) == 0) steps[n++] = s;
        }
        if (dp) closedir(dp);
        for (int i = 1; i < n; i++) /* insertion sort, newest first */
            for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
                int64_t t = steps[j];
                steps[j] = steps[j - 1];
                steps[j - 1] = t;
            }
    }
    MPI_CHECK(MPI_Bcast(&n, 1, MPI_INT, 0, g->world_comm));
    MPI_CHECK(MPI_Bcast(steps, n, MPI_INT64_T, 0, g->world_comm));
    char why[1024] = "", newest[1024] = "";
    for (int i = 0; i < n; i++) {
        snprintf(path, len, "%s/ckpt_%lld.h5", run_dir, (long long)steps[i]);
        if (load(path, m, o, st, g, why, sizeof why) == 0) return 1;
        if (i == 0) snprintf(newest, sizeof newest, "%s", why);
        if (g->rank == 0)
            fprintf(stderr, "warning: checkpoint %s is unusable (%s); trying the previous one\n", path, why);
    }
    if (n == 0) return 0;
    snprintf(err, errlen, "none of the %d checkpoints in %s is usable; the newest (ckpt_%lld.h5) failed with: %s", n,
             run_dir, (long long)steps[0], newest);
    return -1;
}
