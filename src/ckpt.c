/* ckpt.c -- checkpoint write and read with parallel HDF5.
 *
 * Layout: /model/<name> for whole-model tensors, /model/h.<l>/<name> per
 * layer, the same under /optim/m and /optim/v.  Vectors are 1-D [n],
 * matrices 2-D [out, in]; wte is stored unpadded [V, C].  Every rank takes
 * part in every dataset operation (metadata is collective in parallel HDF5);
 * ranks that do not own a tensor select nothing, and of the data-parallel
 * replicas only dp_rank 0 writes. */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static int agree(int rc, char *err, size_t errlen, const struct grid *g)
{
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}

/* One tensor of one layer: its dataset, its logical shape, and the blocks of
 * it that this rank holds (one, or three for qkv's q/k/v thirds). */
struct tensor_ref {
    char path[128];
    int rank;              /* 1 (vectors) or 2 */
    hsize_t dims[2];       /* logical shape (wte without padding) */
    hsize_t start[3][2], count[3][2];
    int nblocks;
    size_t elems;          /* elements of this rank's selection */
    int replicated;        /* identical on every tp rank */
    int primary;           /* this copy is written (the tied wte: first stage's) */
    float *local;          /* this rank's copy, or NULL if it holds none */
};

static void tensor_ref(struct tensor_ref *t, const char *prefix, const struct model *m, float *const *base,
                       enum param_id id, int layer)
{
    const struct model_dims *d = &m->d;
    size_t rows, cols, lrows, lcols;
    param_shape(d, id, &rows, &cols);
    param_local_shape(d, id, &lrows, &lcols);
    if (id == P_WTE) rows = (size_t)d->V;
    if (param_table[id].per_layer)
        snprintf(t->path, sizeof t->path, "%s/h.%d/%s", prefix, layer, param_table[id].name);
    else
        snprintf(t->path, sizeof t->path, "%s/%s", prefix, param_table[id].name);
    t->rank = cols == 1 ? 1 : 2;
    t->dims[0] = rows;
    t->dims[1] = cols;
    t->replicated = param_table[id].shard == SHARD_NONE;

    /* this rank's blocks, in the order they lie in its local buffer */
    size_t r0, c0;
    param_logical_index(d, id, 0, 0, &r0, &c0);
    t->nblocks = param_table[id].shard == SHARD_ROWS3 ? 3 : 1;
    size_t brows = lrows / (size_t)t->nblocks;
    t->elems = 0;
    for (int b = 0; b < t->nblocks; b++) {
        size_t rb;
        param_logical_index(d, id, (size_t)b * brows, 0, &rb, &c0);
        size_t n = brows;
        if (rb >= rows) n = 0;                    /* wte: a shard of padding only */
        else if (rb + n > rows) n = rows - rb;    /* wte: the last real rows */
        t->start[b][0] = rb;
        t->start[b][1] = c0;
        t->count[b][0] = n;
        t->count[b][1] = lcols;
        t->elems += n * lcols;
    }
    t->local = NULL;
    int j = param_table[id].per_layer ? model_local_layer(d, layer) : 0;
    if (m->size[id] > 0 && j >= 0)
        t->local = base[id] + (size_t)j * (m->size[id] / (size_t)(param_table[id].per_layer ? d->Lp : 1));
    t->primary = id != P_WTE || model_has_embedding(d); /* of wte's two copies, the first stage writes */
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

/* Walk every tensor of every layer in a fixed order (the same on all ranks). */
typedef int (*tensor_fn)(hid_t file, struct tensor_ref *t, const struct grid *g, char *err, size_t errlen);

static int walk(hid_t file, const char *prefix, const struct model *m, float *const *base, tensor_fn fn,
                const struct grid *g, char *err, size_t errlen)
{
    for (int id = 0; id < NUM_PARAMS; id++) {
        int layers = param_table[id].per_layer ? m->d.L : 1;
        for (int l = 0; l < layers; l++) {
            struct tensor_ref t;
            tensor_ref(&t, prefix, m, base, (enum param_id)id, l);
            if (fn(file, &t, g, err, errlen) != 0) return -1;
        }
    }
    return 0;
}

static int write_tensor(hid_t file, struct tensor_ref *t, const struct grid *g, char *err, size_t errlen)
{
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t fs = H5Screate_simple(t->rank, t->dims, NULL);
    hid_t ds = H5Dcreate2(file, t->path, H5T_NATIVE_FLOAT, fs, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    /* one writer per shard: data-parallel replica 0, and tp rank 0 of a
     * replicated tensor */
    int writer = t->local != NULL && t->primary && g->dp_rank == 0 && (!t->replicated || g->tp_rank == 0);
    hsize_t n = writer ? t->elems : 0;
    hid_t ms = H5Screate_simple(1, &n, NULL);
    select_blocks(fs, t, writer);
    hid_t dx = H5Pcreate(H5P_DATASET_XFER);
    H5Pset_dxpl_mpio(dx, H5FD_MPIO_COLLECTIVE);
    static const float nothing = 0; /* HDF5 wants a buffer even for an empty selection */
    herr_t rc = ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, dx, writer ? t->local : &nothing);
    H5Pclose(dx);
    H5Sclose(ms);
    if (ds >= 0) H5Dclose(ds);
    H5Sclose(fs);
    H5Pclose(lcpl);
    if (rc < 0) snprintf(err, errlen, "writing %s failed", t->path);
    return rc < 0 ? -1 : 0;
}

static int read_tensor(hid_t file, struct tensor_ref *t, const struct grid *g, char *err, size_t errlen)
{
    (void)g;
    if (H5Lexists(file, t->path, H5P_DEFAULT) <= 0) {
        snprintf(err, errlen, "dataset %s is missing", t->path);
        return -1;
    }
    hid_t ds = H5Dopen2(file, t->path, H5P_DEFAULT);
    hid_t fs = ds < 0 ? -1 : H5Dget_space(ds);
    hsize_t dims[2] = {0, 0};
    int rank = fs < 0 ? -1 : H5Sget_simple_extent_ndims(fs);
    if (rank == t->rank) H5Sget_simple_extent_dims(fs, dims, NULL);
    int rc = 0;
    if (rank != t->rank || dims[0] != t->dims[0] || (rank == 2 && dims[1] != t->dims[1])) {
        snprintf(err, errlen, "dataset %s has shape [%llu%s%llu], the model needs [%llu%s%llu]: the deck's "
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
            snprintf(err, errlen, "reading %s failed (truncated or corrupted file?)", t->path);
            rc = -1;
        }
        H5Sclose(ms);
    }
    if (fs >= 0) H5Sclose(fs);
    if (ds >= 0) H5Dclose(ds);
    return rc;
}

/* ------------------------------------------------------------ attributes */

static void attr_i64(hid_t obj, const char *name, int64_t v)
{
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_NATIVE_INT64, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(s);
}

static int read_attr_i64(hid_t obj, const char *name, int64_t *v)
{
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    herr_t rc = H5Aread(a, H5T_NATIVE_INT64, v);
    H5Aclose(a);
    return rc < 0 ? -1 : 0;
}

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

/* ------------------------------------------------------------------ files */

static hid_t open_parallel(const char *path, int create, const struct grid *g)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, g->world_comm, MPI_INFO_NULL);
    hid_t f = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : H5Fopen(path, H5F_ACC_RDONLY, fapl);
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

/* Remove all but the newest `keep` ckpt_<step>.h5 in dir (rank 0 only). */
static void prune(const char *dir, int keep)
{
    DIR *dp = opendir(dir);
    if (!dp) return;
    int64_t steps[4096];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)) && n < 4096) {
        int64_t s;
        if (ckpt_step_of(e->d_name, &s) == 0) steps[n++] = s;
    }
    closedir(dp);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++) newer += steps[j] > steps[i];
        if (newer >= keep) {
            char path[4096];
            snprintf(path, sizeof path, "%s/ckpt_%lld.h5", dir, (long long)steps[i]);
            if (unlink(path) != 0) log_warn("cannot remove old checkpoint %s: %s", path, strerror(errno));
        }
    }
}

int ckpt_save(const char *run_dir, const struct ckpt_state *st, const struct model *m, const struct optim *o,
              const char *deck, const struct grid *g, int keep, char *err, size_t errlen)
{
    char final[4096], tmp[4200];
    snprintf(final, sizeof final, "%s/ckpt_%lld.h5", run_dir, (long long)st->step);
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = open_parallel(tmp, 1, g);
    int rc = 0;
    if (f < 0) {
        snprintf(err, errlen, "cannot create %s: is %s writable and is there space?", tmp, run_dir);
        rc = -1;
    }
    if (agree(rc, err, errlen, g)) return -1;
    rc = walk(f, "/model", m, m->param, write_tensor, g, err, errlen);
    if (rc == 0) rc = walk(f, "/optim/m", m, o->m, write_tensor, g, err, errlen);
    if (rc == 0) rc = walk(f, "/optim/v", m, o->v, write_tensor, g, err, errlen);
    if (rc == 0) {
        attr_i64(f, "format_version", CKPT_FORMAT_VERSION);
        attr_i64(f, "step", st->step);
        attr_i64(f, "tokens", st->tokens);
        attr_i64(f, "tp", g->tp);
        attr_i64(f, "dp", g->dp);
        attr_i64(f, "pp", g->pp);
        attr_str(f, "deck", deck);
    }
    if (H5Fclose(f) < 0 && rc == 0) {
        snprintf(err, errlen, "closing %s failed (disk full?)", tmp);
        rc = -1;
    }
    if (rc == 0 && g->rank == 0) {
        if (fsync_path(tmp) != 0 || rename(tmp, final) != 0) {
            snprintf(err, errlen, "cannot finish %s: %s", final, strerror(errno));
            rc = -1;
        } else {
            fsync_path(run_dir);
            prune(run_dir, keep);
        }
    }
    if (rc != 0 && g->rank == 0) unlink(tmp);
    return agree(rc, err, errlen, g);
}

int ckpt_load_model(const char *path, struct model *m, const struct grid *g, char *err, size_t errlen)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rc = 0;
    hid_t f = access(path, R_OK) == 0 ? open_parallel(path, 0, g) : -1;
    if (f < 0) {
        snprintf(err, errlen, "cannot open %s as HDF5 (missing, unreadable or not an HDF5 file)", path);
        rc = -1;
    }
    if (agree(rc, err, errlen, g)) return -1;
    rc = walk(f, "/model", m, m->param, read_tensor, g, err, errlen);
    H5Fclose(f);
    return agree(rc, err, errlen, g);
}

int ckpt_load_all(const char *path, struct model *m, struct optim *o, struct ckpt_state *st,
                  const struct grid *g, char *err, size_t errlen)
{
    if (ckpt_load_model(path, m, g, err, errlen) != 0) return -1;
    hid_t f = open_parallel(path, 0, g);
    int rc = f < 0 ? -1 : 0;
    if (rc == 0) rc = walk(f, "/optim/m", m, o->m, read_tensor, g, err, errlen);
    if (rc == 0) rc = walk(f, "/optim/v", m, o->v, read_tensor, g, err, errlen);
    if (rc == 0 && (read_attr_i64(f, "step", &st->step) || read_attr_i64(f, "tokens", &st->tokens))) {
        snprintf(err, errlen, "%s has no step/tokens attributes: not a triad checkpoint", path);
        rc = -1;
    }
    if (f >= 0) H5Fclose(f);
    return agree(rc, err, errlen, g);
}

int ckpt_find_latest(const char *run_dir, char *buf, size_t len, const struct grid *g)
{
    char found[4096] = {0};
    if (g->rank == 0) {
        DIR *dp = opendir(run_dir);
        int64_t best = -1;
        struct dirent *e;
        while (dp && (e = readdir(dp))) {
            int64_t s;
            char path[4096];
            if (ckpt_step_of(e->d_name, &s) != 0 || s <= best) continue;
            snprintf(path, sizeof path, "%s/%s", run_dir, e->d_name);
            if (H5Fis_hdf5(path) > 0) {
                best = s;
                snprintf(found, sizeof found, "%s", path);
            }
        }
        if (dp) closedir(dp);
    }
    MPI_CHECK(MPI_Bcast(found, (int)sizeof found, MPI_CHAR, 0, g->world_comm));
    snprintf(buf, len, "%s", found);
    return found[0] != 0;
}
