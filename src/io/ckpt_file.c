/* ckpt_file.c -- a checkpoint's file (ckpt_file.h): opening, attributes,
 * the temporary name, the flush, the rename and the rotation. */
#include "ckpt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ckpt_tok.h"
#include "file.h"
#include "flight.h"
#include "hash.h"
#include "lineage.h"
#include "log.h"

int ckpt_agree(int rc, char *err, size_t errlen, const struct grid *g)
{
    return mpi_agree_error(g->world_comm, rc != 0, err, errlen);
}

int ckpt_read_trouble(const char *path, const struct grid *g, char *err, size_t errlen)
{
    int e = file_read_probe(path);
    if (e == ENOENT) e = 0; /* (a file that is not there is said otherwise) */
    int who = e ? g->rank : INT_MAX;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, g->world_comm));
    if (who == INT_MAX) return 0;
    MPI_CHECK(MPI_Bcast(&e, 1, MPI_INT, who, g->world_comm));
    snprintf(err, errlen, "rank %d cannot read %s: %s%s", who, path, strerror(e), file_read_words(e));
    return 1;
}

hid_t ckpt_open(const char *path, enum ckpt_open_mode mode, const struct grid *g)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, g->world_comm, MPI_INFO_NULL);
    H5Pset_all_coll_metadata_ops(fapl, 1); /* metadata read once and broadcast */
    /* and written by rank 0 alone: a rank whose writes fail (a node's mount
     * of io.run_dir failing) cannot leave the others at another point of
     * HDF5's collective metadata flush, which hangs (io_errors.sh) */
    H5AC_cache_config_t mdc = {.version = H5AC__CURR_CACHE_CONFIG_VERSION};
    int set = H5Pget_mdc_config(fapl, &mdc) >= 0;
    if (set) {
        mdc.metadata_write_strategy = H5AC_METADATA_WRITE_STRATEGY__PROCESS_0_ONLY;
        set = H5Pset_mdc_config(fapl, &mdc) >= 0;
    }
    static int said;
    if (!set && !said++ && g->rank == 0)
        fprintf(stderr, "warning: this HDF5 does not let rank 0 alone write a checkpoint's metadata: a write that "
                "fails on one rank only may hang a checkpoint until diag.hang_timeout\n");
    H5Pset_alignment(fapl, 1 << 20, 1 << 20); /* tensors of 1 MiB and more start on MiB boundaries */
    if (mode != CKPT_OPEN_READ) /* (until ckpt_close_written; a report names it) */
        flight_within("HDF5's writing of a checkpoint: rank 0 writes its metadata where every rank meets, and a "
                      "write of rank 0's that failed there leaves the others waiting for it");
    hid_t f = mode == CKPT_OPEN_CREATE ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                                       : H5Fopen(path, mode == CKPT_OPEN_UPDATE ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0) flight_within(NULL);
    return f;
}

hid_t ckpt_create_dataset(hid_t file, const struct tensor_ref *t, hid_t fs, int allocated)
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

/* The string attribute `name` of obj into *text, malloc'ed (NULL where obj
 * has none or it does not read): 0, or -1 where memory ran out. */
static int attr_read_str(hid_t obj, const char *name, char **text)
{
    *text = NULL;
    if (H5Aexists(obj, name) <= 0) return 0;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    hid_t t = a < 0 ? -1 : H5Aget_type(a);
    int rc = 0;
    if (t >= 0 && H5Tget_class(t) == H5T_STRING && !H5Tis_variable_str(t)) {
        size_t n = H5Tget_size(t);
        *text = calloc(n + 1, 1);
        if (!*text) rc = -1;
        else if (H5Aread(a, t, *text) < 0) free(*text), *text = NULL;
    }
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

/* (FNV-1a of the deck's bytes: HDF5 keeps no checksum of an attribute) */
static int64_t deck_checksum(const char *deck) { return (int64_t)fnv1a(FNV1A_INIT, deck, strlen(deck)); }

void ckpt_write_attributes(hid_t f, const struct ckpt_state *st, const char *deck, const struct grid *g)
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
    attr_i64(f, "deck_checksum", deck_checksum(deck));
}

void ckpt_stored_grid(hid_t f, int64_t *dp, int64_t *cp)
{
    if (read_attr_i64(f, "dp", dp) != 0 || *dp < 1) *dp = 0;
    if (read_attr_i64(f, "cp", cp) != 0 || *cp < 1) *cp = 0;
}

int ckpt_read_state(hid_t f, const char *path, struct ckpt_state *st, char *err, size_t errlen)
{
    if (read_attr_i64(f, "step", &st->step) || read_attr_i64(f, "tokens", &st->tokens)) {
        snprintf(err, errlen, "%s has no step/tokens attributes: it is corrupted, or not a triad checkpoint", path);
        return -1;
    }
    /* optional: absent in older files, and the scale in runs without fp16 */
    if (read_attr_i64(f, "optimizer_updates", &st->updates) != 0) st->updates = st->step;
    st->has_scaler = attr_read(f, "loss_scale", H5T_NATIVE_DOUBLE, &st->loss_scale) == 0 &&
                     read_attr_i64(f, "loss_scale_good_steps", &st->good_steps) == 0 &&
                     read_attr_i64(f, "loss_scale_hysteresis_left", &st->hysteresis_left) == 0;
    return 0;
}

int ckpt_check_step(hid_t f, const char *path, int64_t step, const struct grid *g, char *err, size_t errlen)
{
    int64_t stored = -1;
    if (read_attr_i64(f, "step", &stored) == 0 && stored == step) return 0;
    snprintf(err, errlen, "rank %d: the step attribute of %s reads back as %lld, not %lld", g->rank, path,
             (long long)stored, (long long)step);
    return -1;
}

int ckpt_stored_deck(hid_t f, char **text)
{
    if (attr_read_str(f, "deck", text)) return -1;
    if (!*text) return 0;
    int64_t sum;
    if (**text && (H5Aexists(f, "deck_checksum") == 0 || /* (a file from before the checksum) */
                   (read_attr_i64(f, "deck_checksum", &sum) == 0 && sum == deck_checksum(*text))))
        return 0;
    free(*text);
    *text = NULL;
    return -2;
}

/* ------------------------------------------------------------------ files */

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
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
    if (lineage_write(dir, &l, err, sizeof err) != 0)
        log_warn("%s: rotation and restart = 'auto' fall back to step numbers", err);
}

/* About the size of a checkpoint file: model, m and v in fp32, each tensor
 * of 1 MiB or more starting on a MiB boundary (ckpt_open), and the
 * metadata (1 KiB a dataset and 32 KiB more: measured 0.4 KiB). */
double ckpt_file_bytes(const struct model *m)
{
    double bytes = 32 << 10;
    for (int id = 0; id < NUM_PARAMS; id++)
        for (int l = 0; l < param_slices(&m->d, (enum param_id)id); l++) {
            if (!param_slice_exists(&m->d, (enum param_id)id, l)) continue;
            struct tensor_ref t;
            struct state_buf whole = ckpt_whole_buf(m, m->params_mem);
            ckpt_tensor_ref(&t, "/model", m, &whole, (enum param_id)id, l);
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
    double need = ckpt_file_bytes(m) + (g->rank == 0 ? (double)ckpt_tokenizer_bytes(run_dir) : 0);
    if (g->rank == 0 && statvfs(run_dir, &fs) == 0 && (double)fs.f_bavail * (double)fs.f_frsize < need) {
        snprintf(err, errlen, "not enough space in %s: the checkpoint needs about %.0f KiB, %.0f KiB are free",
                 run_dir, need / 1024, (double)fs.f_bavail * (double)fs.f_frsize / 1024);
        rc = -1;
    }
    return ckpt_agree(rc, err, errlen, g);
}

hid_t ckpt_create_tmp(const char *run_dir, int64_t step, const struct model *m, const struct grid *g, char *tmp,
                      size_t tmplen, char *err, size_t errlen)
{
    snprintf(tmp, tmplen, "%s/ckpt_%lld.h5.tmp", run_dir, (long long)step);
    if (check_room(run_dir, m, g, err, errlen) != 0) return -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = ckpt_open(tmp, CKPT_OPEN_CREATE, g);
    int refused = f < 0 ? file_write_probe(run_dir) : 0;
    if (f < 0 && access(run_dir, F_OK) != 0)
        snprintf(err, errlen, "rank %d: cannot create %s: %s no longer exists (removed while the run went on?)",
                 g->rank, tmp, run_dir);
    else if (refused)
        snprintf(err, errlen, "rank %d: cannot create %s: %s: %s", g->rank, tmp, run_dir, file_write_words(refused));
    else if (f < 0)
        snprintf(err, errlen, "rank %d: cannot create %s: is %s writable and is there space?", g->rank, tmp, run_dir);
    /* (a file open on some ranks only is left open: its close is collective) */
    if (ckpt_agree(f < 0, err, errlen, g) == 0) return f;
    flight_within(NULL);
    return -1;
}

herr_t ckpt_close_written(hid_t f)
{
    herr_t rc = H5Fclose(f);
    flight_within(NULL);
    return rc;
}

int ckpt_close_and_flush(hid_t f, const char *tmp, int rc, const struct grid *g, char *err, size_t errlen)
{
    int wrote_badly = rc == CKPT_WRITE_FAILED;
    if ((rc = ckpt_agree(rc, err, errlen, g)) != 0) { /* does the folder still take writes? */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", tmp);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
        int e[2] = {file_write_probe(dir), wrote_badly}, any[2];
        MPI_CHECK(MPI_Allreduce(e, any, 2, MPI_INT, MPI_MAX, g->world_comm));
        if (any[0]) {
            size_t n = strlen(err);
            snprintf(err + n, errlen - n, " (%s: %s)", dir, file_write_words(any[0]));
        }
        if (any[0] || any[1]) { /* HDF5 1.10's collective close of it would hang: left open */
            flight_within(NULL);
            exit_by_abort();
            return -1;
        }
    }
    if (ckpt_close_written(f) < 0 && rc == 0) {
        snprintf(err, errlen, "rank %d: closing %s failed (disk full?)", g->rank, tmp);
        rc = -1;
    }
    rc = ckpt_agree(rc, err, errlen, g);
    if (rc == 0 && fsync_path(tmp) != 0) {
        snprintf(err, errlen, "rank %d: fsync of %s failed: %s", g->rank, tmp, strerror(errno));
        rc = -1;
    }
    return ckpt_agree(rc, err, errlen, g);
}

int ckpt_publish(const char *run_dir, const char *tmp, int64_t step, int keep, int rc, const struct grid *g,
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
    rc = ckpt_agree(rc, err, errlen, g);
    if (rc != 0) ckpt_discard_tmp(tmp, g);
    return rc;
}

void ckpt_discard_tmp(const char *tmp, const struct grid *g)
{
    if (g->rank != 0) return;
    unlink(tmp);
    /* a file left open (exit_by_abort) also leaves Open MPI's OMPIO its
     * shared-file-pointer files, <file>.data.<rank> and .metadata.<rank>,
     * which its close would have removed */
    for (int r = 0; r < g->world && exit_aborts(); r++) {
        char side[4300];
        snprintf(side, sizeof side, "%s.data.%d", tmp, r);
        unlink(side);
        snprintf(side, sizeof side, "%s.metadata.%d", tmp, r);
        unlink(side);
    }
}
