/* metrics.c -- metrics.h5 and the progress line. */
#define _GNU_SOURCE /* memfd_create */
#include "metrics.h"
#include "build_config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "file.h"
#include "log.h"

/* ------------------------------------------------------------- metrics.h5 */

enum { M_STEP, M_LOSS, M_LR, M_GNORM, M_SCALE, M_TOKS, M_MFU, M_TIME, M_SKIPPED,
       M_COMM_TP, M_COMM_DP, M_COMM_PP, M_COMM_S, M_WALL, M_BUSY_MIN, M_BUSY_MED, M_BUSY_MAX, M_SLOWEST, M_COMM_CP,
       M_MOE_AUX, M_MOE_Z, M_MOE_DROPPED, M_COUNT };
static const char *mnames[M_COUNT] = {"step", "loss", "lr", "grad_norm", "loss_scale", "tokens_per_s", "mfu",
                                      "step_time", "skipped", "comm_tp_bytes", "comm_dp_bytes",
                                      "comm_pp_bytes", "comm_seconds", "time", "busy_min", "busy_median",
                                      "busy_max", "slowest_rank", "comm_cp_bytes", "moe_aux_loss", "moe_z_loss",
                                      "moe_dropped"};
/* Every dataset says what it holds: attributes units and description. */
static const char *const munits[M_COUNT][2] = {
    {"1", "optimizer steps done (1-based)"},
    {"nats", "mean cross-entropy over the global batch"},
    {"1", "learning rate used in the step"},
    {"1", "global L2 norm of the gradient before clipping"},
    {"1", "loss scale the step ran with (1 in fp32 and bf16)"},
    {"tokens/s", "global-batch tokens / step time"},
    {"1", "model FLOPs utilisation (6N + 12LCT per token) against the summed per-rank peak"},
    {"s", "wall-clock seconds of the step, rank 0"},
    {"1", "1 if the update was skipped (a gradient somewhere was not finite)"},
    {"bytes", "payload bytes rank 0 moved on the tp communicator in the step"},
    {"bytes", "payload bytes rank 0 moved on the dp communicator in the step"},
    {"bytes", "payload bytes rank 0 moved on the pp communicator in the step"},
    {"s", "seconds rank 0 spent in collectives in the step"},
    {"s since 1970-01-01 UTC", "wall-clock time at the end of the step, rank 0"},
    {"s", "the least busy rank's forward, backward and optimizer seconds in the step"},
    {"s", "the median over ranks of those seconds"},
    {"s", "the busiest rank's"},
    {"1", "the busiest rank (world rank)"},
    {"bytes", "payload bytes rank 0 moved on the cp communicator in the step (ring attention's keys, values and their gradients)"},
    {"1", "mixture of experts: the load-balancing loss E sum_i f_i P_i, mean over the layers and micro-batches, "
          "before train.moe_aux_loss (its least is k, perfect balance); 0 for a dense model"},
    {"1", "mixture of experts: the router z-loss mean_t logsumexp^2, mean over the layers and micro-batches, before "
          "train.moe_z_loss; 0 for a dense model"},
    {"1", "mixture of experts: the fraction of token choices the capacity dropped (train.moe_capacity); 0 for a "
          "dense model"},
};

static hid_t mtype(int i)
{
    return i == M_STEP ? H5T_NATIVE_INT64 : i == M_SKIPPED || i == M_SLOWEST ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE;
}

static int write_string_attr(hid_t obj, const char *name, const char *text)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, strlen(text) + 1);
    hid_t s = H5Screate(H5S_SCALAR);
    if (H5Aexists(obj, name) > 0) H5Adelete(obj, name);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = a < 0 ? -1 : H5Awrite(a, t, text);
    if (a >= 0) H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
    return rc < 0 ? -1 : 0;
}

static int describe(hid_t obj, const char *units, const char *description)
{
    return write_string_attr(obj, "units", units) || write_string_attr(obj, "description", description) ? -1 : 0;
}

/* The creation properties of a series: chunked (extendible) and each chunk
 * checksummed (HDF5's Fletcher-32 filter, which the library checks on every
 * read: a changed byte is an error, never a wrong number). */
static hid_t series_dcpl(int rank, const hsize_t *chunk)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (dcpl >= 0 && (H5Pset_chunk(dcpl, rank, chunk) < 0 || H5Pset_fletcher32(dcpl) < 0)) {
        H5Pclose(dcpl);
        return -1;
    }
    return dcpl;
}

static int create_datasets(struct metrics_file *mf)
{
    hid_t g = H5Gcreate2(mf->file, "/metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    hsize_t dims = 0, maxdims = H5S_UNLIMITED, chunk = 256;
    hid_t space = H5Screate_simple(1, &dims, &maxdims), dcpl = series_dcpl(1, &chunk);
    int rc = 0;
    for (int i = 0; i < M_COUNT; i++) {
        mf->dset[i] = H5Dcreate2(g, mnames[i], mtype(i), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (mf->dset[i] < 0 || describe(mf->dset[i], munits[i][0], munits[i][1])) rc = -1;
    }
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Gclose(g);
    return rc;
}

static void give_up(struct metrics_file *mf, const char *what, int64_t step);

/* The evaluations' tables: a group of extendible datasets, one a column,
 * created with the first row (/eval: the held-out loss; /eval/<task>: a
 * multiple-choice task's accuracies); a restarted run drops the rows after
 * its step from every table under /eval. */
struct column {
    const char *name, *units, *description;
    int integer; /* int64, else float64 */
};

static int flush_file(struct metrics_file *mf);

static int at_finalize = MPI_KEYVAL_INVALID; /* the key of close_at_exit's attribute on MPI_COMM_SELF */
static int close_at_exit(MPI_Comm comm, int key, void *value, void *extra);

/* The file closed or given up: the attribute that would close it at
 * MPI_Finalize is taken off (it holds the struct, which its owner's frame
 * may not outlive; close_at_exit, called by the deletion, finds nothing to
 * do). */
static void drop_at_exit(void)
{
    if (at_finalize != MPI_KEYVAL_INVALID && mpi_live()) MPI_Comm_delete_attr(MPI_COMM_SELF, at_finalize);
}

static int table_append(struct metrics_file *mf, const char *group, int n, const struct column *col, const double *v)
{
    hid_t file = mf->file;
    int rc = 0;
    char path[320];
    snprintf(path, sizeof path, "%s/%s", group, col[0].name);
    /* (/eval may be there without its own columns: made as a task's parent) */
    int parent = H5Lexists(file, "/eval", H5P_DEFAULT) > 0, there = parent && H5Lexists(file, group, H5P_DEFAULT) > 0;
    if (!there || H5Lexists(file, path, H5P_DEFAULT) <= 0) {
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
        hid_t g = there ? H5Gopen2(file, group, H5P_DEFAULT) : H5Gcreate2(file, group, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t zero = 0, maxdims = H5S_UNLIMITED, chunk = 64;
        hid_t space = H5Screate_simple(1, &zero, &maxdims), dcpl = series_dcpl(1, &chunk);
        for (int i = 0; i < n && g >= 0; i++) {
            hid_t d = H5Dcreate2(g, col[i].name, col[i].integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, space,
                                 H5P_DEFAULT, dcpl, H5P_DEFAULT);
            if (d < 0 || describe(d, col[i].units, col[i].description)) rc = -1;
            if (d >= 0) H5Dclose(d);
        }
        if (g < 0) rc = -1;
        else H5Gclose(g);
        H5Pclose(dcpl);
        H5Sclose(space);
        H5Pclose(lcpl);
    }
    for (int i = 0; i < n && rc == 0; i++) {
        snprintf(path, sizeof path, "%s/%s", group, col[i].name);
        hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
        hid_t fs = d < 0 ? -1 : H5Dget_space(d);
        hsize_t rows = 0, one = 1;
        if (fs >= 0) H5Sget_simple_extent_dims(fs, &rows, NULL), H5Sclose(fs);
        hsize_t grown = rows + 1;
        if (d < 0 || H5Dset_extent(d, &grown) < 0) rc = -1;
        fs = rc ? -1 : H5Dget_space(d);
        hid_t mem = H5Screate_simple(1, &one, NULL);
        int64_t whole = (int64_t)v[i];
        if (fs >= 0 && (H5Sselect_hyperslab(fs, H5S_SELECT_SET, &rows, NULL, &one, NULL) < 0 ||
                        H5Dwrite(d, col[i].integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, mem, fs, H5P_DEFAULT,
                                 col[i].integer ? (const void *)&whole : (const void *)&v[i]) < 0))
            rc = -1;
        if (fs >= 0) H5Sclose(fs);
        H5Sclose(mem);
        if (d >= 0) H5Dclose(d);
    }
    if (rc == 0) rc = flush_file(mf);
    return rc;
}

/* A restart keeps the rows of steps <= last of each table.  Each chunk of a
 * series carries its checksum (series_dcpl), which HDF5 checks on every
 * read, and a restart writes into the chunk that holds its last kept row
 * (HDF5 reads it back to add a row): so the rows kept are read through
 * first, and a chunk among them that does not read back (a changed byte, a
 * failed write's leftovers) makes the file one that cannot be continued.
 * Rows after them, dropped anyway, are not read (the chunk a crash left
 * half written is usually theirs). */

/* The rows of table g to keep: those of its step column, read a chunk at a
 * time, up to the first with step > last (ordered: or out of order, as a
 * write that failed leaves zeros).  0, or -1 with the column's path in why
 * where a chunk it needs does not read back. */
static int kept_rows(hid_t g, const char *at, int64_t last, int ordered, hsize_t *keep, char *why, size_t whylen)
{
    *keep = 0;
    hid_t d = H5Dopen2(g, "step", H5P_DEFAULT);
    hid_t sp = d < 0 ? -1 : H5Dget_space(d), dcpl = d < 0 ? -1 : H5Dget_create_plist(d);
    hsize_t n = 0, c = 256;
    if (sp >= 0) H5Sget_simple_extent_dims(sp, &n, NULL);
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) H5Pget_chunk(dcpl, 1, &c);
    if (c == 0) c = 256;
    int64_t *steps = xmalloc(c * sizeof *steps);
    int rc = d < 0 || sp < 0 ? -1 : 0, done = 0;
    int64_t prev = 0; /* the last kept row's step */
    for (hsize_t r = 0; rc == 0 && !done && r < n; r += c) {
        hsize_t cnt = n - r < c ? n - r : c;
        hid_t mem = H5Screate_simple(1, &cnt, NULL);
        if (H5Sselect_hyperslab(sp, H5S_SELECT_SET, &r, NULL, &cnt, NULL) < 0 ||
            H5Dread(d, H5T_NATIVE_INT64, mem, sp, H5P_DEFAULT, steps) < 0)
            rc = -1;
        H5Sclose(mem);
        for (hsize_t i = 0; rc == 0 && i < cnt && !done; i++) {
            int in = steps[i] <= last && (!ordered || (r + i == 0 ? steps[i] >= 1 : steps[i] > prev));
            if (in) (*keep)++, prev = steps[i];
            else done = 1;
        }
    }
    free(steps);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    if (rc) snprintf(why, whylen, "%s/step", at);
    return rc;
}

/* Rows 0 .. keep - 1 of dataset d (at path) read through, 8 MiB at a time.
 * 0, or -1 with the path in why. */
static int rows_readable(hid_t d, const char *path, hsize_t keep, char *why, size_t whylen)
{
    hid_t fs = H5Dget_space(d), t = H5Dget_type(d);
    int rank = fs < 0 ? -1 : H5Sget_simple_extent_ndims(fs), rc = rank < 1 || t < 0 ? -1 : 0;
    hsize_t dims[H5S_MAX_RANK] = {0};
    if (rc == 0) H5Sget_simple_extent_dims(fs, dims, NULL);
    hsize_t row = t < 0 ? 0 : H5Tget_size(t), rows = keep < dims[0] ? keep : dims[0];
    for (int k = 1; k < rank; k++) row *= dims[k];
    hsize_t per = row == 0 ? 1 : row >= (8u << 20) ? 1 : (8u << 20) / row;
    void *buf = rc || row == 0 || rows == 0 ? NULL : xmalloc((size_t)(row * (per < rows ? per : rows)));
    for (hsize_t r = 0; buf && rc == 0 && r < rows; r += per) {
        hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
        for (int k = 0; k < rank; k++) count[k] = dims[k];
        start[0] = r, count[0] = rows - r < per ? rows - r : per;
        hid_t mem = H5Screate_simple(rank, count, NULL);
        if (H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dread(d, t, mem, fs, H5P_DEFAULT, buf) < 0)
            rc = -1;
        H5Sclose(mem);
    }
    free(buf);
    if (t >= 0) H5Tclose(t);
    if (fs >= 0) H5Sclose(fs);
    if (rc) snprintf(why, whylen, "%s", path);
    return rc;
}

/* The table g (at) and those below it: the rows of steps <= last kept, each
 * read through first. */
static int table_truncate(hid_t g, const char *at, int64_t last, char *why, size_t whylen)
{
    H5G_info_t info;
    if (H5Gget_info(g, &info) < 0) return snprintf(why, whylen, "%s", at), -1;
    hsize_t keep = 0;
    int has_step = H5Lexists(g, "step", H5P_DEFAULT) > 0;
    int rc = has_step ? kept_rows(g, at, last, 0, &keep, why, whylen) : 0;
    for (hsize_t i = 0; rc == 0 && i < info.nlinks; i++) {
        char name[256], path[600];
        if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0) {
            rc = -1;
            break;
        }
        snprintf(path, sizeof path, "%s/%s", at, name);
        hid_t o = H5Oopen(g, name, H5P_DEFAULT);
        if (o < 0) rc = -1;
        else if (H5Iget_type(o) == H5I_GROUP) rc = table_truncate(o, path, last, why, whylen);
        else if (has_step && (rows_readable(o, path, keep, why, whylen) < 0 || H5Dset_extent(o, &keep) < 0)) rc = -1;
        if (o >= 0) H5Oclose(o);
        if (rc && !why[0]) snprintf(why, whylen, "%s", path);
    }
    return rc;
}

static int eval_truncate(hid_t file, int64_t last, char *why, size_t whylen)
{
    if (H5Lexists(file, "/eval", H5P_DEFAULT) <= 0) return 0;
    hid_t g = H5Gopen2(file, "/eval", H5P_DEFAULT);
    int rc = g < 0 ? -1 : table_truncate(g, "/eval", last, why, whylen);
    if (g >= 0) H5Gclose(g);
    return rc;
}

int metrics_eval(struct metrics_file *mf, int64_t step, double loss, int64_t tokens)
{
    static const struct column col[3] = {
        {"step", "1", "the step after which the held-out loss was measured", 1},
        {"loss", "nats", "mean cross-entropy over the held-out tokens", 0},
        {"tokens", "tokens", "held-out tokens the loss covers", 1},
    };
    if (mf->file < 0) return 0;
    double v[3] = {(double)step, loss, (double)tokens};
    int rc = table_append(mf, "/eval", 3, col, v);
    if (rc != 0) give_up(mf, "writing the evaluation after step", step);
    return rc;
}

int metrics_task(struct metrics_file *mf, int64_t step, const struct task_score *t)
{
    static const struct column col[4] = {
        {"step", "1", "the step after which the task was evaluated", 1},
        {"acc", "1", "the fraction of examples whose most likely choice is the label (by the sum of its tokens' "
                     "log-probabilities)", 0},
        {"acc_norm", "1", "the same by the mean of its tokens' log-probabilities (length-normalised)", 0},
        {"examples", "1", "the examples scored", 1},
    };
    if (mf->file < 0) return 0;
    char group[128];
    snprintf(group, sizeof group, "/eval/%s", t->name);
    double v[4] = {(double)step, t->acc, t->acc_norm, (double)t->examples};
    int rc = table_append(mf, group, 4, col, v);
    if (rc != 0) give_up(mf, "writing a task's evaluation after step", step);
    return rc;
}

/* Re-open the datasets of an existing file and keep rows with step <= last,
 * read through first; -1 with the dataset's path in why where one does not
 * read back. */
static int reopen_datasets(struct metrics_file *mf, int64_t last, char *why, size_t whylen)
{
    for (int i = 0; i < M_COUNT; i++) {
        char path[64];
        snprintf(path, sizeof path, "/metrics/%s", mnames[i]);
        mf->dset[i] = H5Lexists(mf->file, path, H5P_DEFAULT) > 0 ? H5Dopen2(mf->file, path, H5P_DEFAULT) : -1;
        if (mf->dset[i] < 0 && i > M_COMM_S) { /* a file of an older version: the column starts here (0 before) */
            hsize_t zero = 0, maxdims = H5S_UNLIMITED, chunk = 256;
            hid_t space = H5Screate_simple(1, &zero, &maxdims), dcpl = series_dcpl(1, &chunk);
            mf->dset[i] = H5Dcreate2(mf->file, path, mtype(i), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
            H5Pclose(dcpl);
            H5Sclose(space);
            if (mf->dset[i] >= 0) describe(mf->dset[i], munits[i][0], munits[i][1]);
        }
        if (mf->dset[i] < 0) return -1;
    }
    mf->moe_tokens = -1;
    /* the rows of steps 1 .. last, in order; a row out of order (zeros left by
     * a write that failed) ends them */
    hid_t g = H5Gopen2(mf->file, "/metrics", H5P_DEFAULT);
    hsize_t keep = 0;
    int rc = g < 0 ? -1 : kept_rows(g, "/metrics", last, 1, &keep, why, whylen);
    if (g >= 0) H5Gclose(g);
    if (rc) return -1;
    char path[64];
    for (int i = 0; i < M_COUNT; i++) {
        snprintf(path, sizeof path, "/metrics/%s", mnames[i]);
        if (rows_readable(mf->dset[i], path, keep, why, whylen) < 0 || H5Dset_extent(mf->dset[i], &keep) < 0)
            return -1;
    }
    if (H5Lexists(mf->file, "/metrics/moe_tokens", H5P_DEFAULT) > 0) { /* (cut to the rows by metrics_moe) */
        hid_t d = H5Dopen2(mf->file, "/metrics/moe_tokens", H5P_DEFAULT);
        rc = d < 0 ? -1 : rows_readable(d, "/metrics/moe_tokens", keep, why, whylen);
        if (d >= 0) H5Dclose(d);
        if (rc) return -1;
    }
    mf->rows = keep;
    mf->rows_at_open = keep;
    return 0;
}

int metrics_open(struct metrics_file *mf, const char *run_dir, const char *deck, int64_t first_step,
                 int flush_every, char *err, size_t errlen)
{
    memset(mf, 0, sizeof *mf);
    mf->file = -1;
    mf->moe_tokens = -1;
    mf->flush_every = flush_every;
    snprintf(mf->dir, sizeof mf->dir, "%s", run_dir);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported here, once, not by HDF5's stack dump */
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.h5", run_dir);
    struct stat st;
    int exists = stat(path, &st) == 0;
    int rc = 0;
    if (exists && first_step > 0) {
        mf->file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        if (mf->file < 0 && file_locked_by_another(path)) { /* in use, not damaged: leave it as it is */
            snprintf(err, errlen, "cannot continue %s: another program has it open with HDF5's file lock (h5py, "
                     "h5dump, HDFView, ... opened without HDF5_USE_FILE_LOCKING=FALSE); nothing was changed",
                     path);
            return -2;
        }
        char bad[600] = "";
        rc = mf->file < 0 ? -1 : reopen_datasets(mf, first_step, bad, sizeof bad);
        if (rc == 0) rc = eval_truncate(mf->file, first_step, bad, sizeof bad);
        if (rc != 0) { /* damaged (a full disk in an earlier run, a changed byte): keep it aside, start anew */
            for (int i = 0; i < M_COUNT; i++)
                if (mf->dset[i] > 0) H5Dclose(mf->dset[i]), mf->dset[i] = -1;
            if (mf->file >= 0) H5Fclose(mf->file);
            mf->file = -1;
            char aside[4200];
            for (int k = 1; k < 1000; k++) {
                snprintf(aside, sizeof aside, "%s.damaged.%d", path, k);
                if (stat(aside, &st) != 0) break;
            }
            if (rename(path, aside) != 0) {
                snprintf(err, errlen, "cannot continue %s and cannot move it aside: %s", path, strerror(errno));
                return -1;
            }
            if (bad[0])
                log_warn("%s could not be continued (damaged: %s cannot be read back, a changed byte that fails its "
                         "checksum or an earlier run's failed write): moved to %s; a new metrics.h5 starts at step "
                         "%lld", path, bad, aside, (long long)first_step + 1);
            else
                log_warn("%s could not be continued (damaged: an earlier run's disk was full?): moved to %s; a new "
                         "metrics.h5 starts at step %lld", path, aside, (long long)first_step + 1);
            exists = 0;
            rc = 0;
        }
    }
    if (mf->file < 0) {
        mf->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        rc = mf->file < 0 ? -1 : create_datasets(mf);
    }
    if (rc == 0) rc = write_string_attr(mf->file, "deck", deck);
    if (rc < 0) {
        snprintf(err, errlen, "cannot %s %s (is the directory writable, the file an HDF5 file?)",
                 exists && first_step > 0 ? "continue" : "create", path);
        return -1;
    }
    if (mpi_live()) { /* (HDF5's own attribute is set: the library started above) */
        if (at_finalize == MPI_KEYVAL_INVALID)
            MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, close_at_exit, &at_finalize, NULL));
        MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, at_finalize, mf));
    }
    return 0;
}

/* HDF5 1.10 cannot close a file one of whose flushes failed: its
 * metadata cache stays half flushed ("slist already enabled?"), H5Fclose
 * fails, and the library's own close in MPI_Finalize crashes on the file.
 * So before each flush the run's folder is asked whether it still takes
 * writes (a probe file: a file system gone read-only after an error, as
 * ext4's errors=remount-ro does, or full), and a refusal stops the writing
 * before HDF5 writes anything. */
static int flush_file(struct metrics_file *mf)
{
    if ((mf->refused = file_write_probe(mf->dir)) != 0) return -1;
    return H5Fflush(mf->file, H5F_SCOPE_GLOBAL) < 0 ? -1 : 0;
}

/* The writing failed: the file is never touched again; the rows flushed
 * before stay readable.  Refused by the probe, the file is closed with a
 * file in memory put in place of its descriptor, where what HDF5 still
 * holds to write goes (readonly_fs.sh).  After a write that failed in HDF5
 * it is left open (the close would fail and leave it half torn down), and
 * the job ends through MPI_Abort (exit_by_abort): HDF5's own close of it in
 * MPI_Finalize crashes (io_errors.sh). */
static void give_up(struct metrics_file *mf, const char *what, int64_t step)
{
    int e = mf->refused ? mf->refused : file_write_probe(mf->dir);
    snprintf(mf->failed, sizeof mf->failed, "%s %lld to metrics.h5 failed%s%s%s; the rows flushed before are kept",
             what, (long long)step, e ? " (" : "", file_write_words(e), e ? ")" : "");
    if (mf->refused) {
        /* (a file in memory takes HDF5's writes, reads and truncation alike; /dev/null its writes) */
        int *fd = NULL, stand_in = -1;
#ifdef HAVE_MEMFD_CREATE
        stand_in = memfd_create("metrics.h5 given up", 0);
#endif
        if (stand_in < 0) stand_in = open("/dev/null", O_RDWR);
        if (stand_in >= 0 && H5Fget_vfd_handle(mf->file, H5P_DEFAULT, (void **)&fd) >= 0 && fd) dup2(stand_in, *fd);
        if (stand_in >= 0) close(stand_in);
        for (int i = 0; i < M_COUNT; i++)
            if (mf->dset[i] > 0) H5Dclose(mf->dset[i]);
        if (mf->moe_tokens >= 0) H5Dclose(mf->moe_tokens);
        H5Fclose(mf->file);
    } else {
        exit_by_abort();
    }
    mf->file = -1;
    drop_at_exit();
}

int metrics_append(struct metrics_file *mf, const struct step_metrics *s)
{
    if (mf->file < 0) return 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double v[M_COUNT] = {0, s->loss, s->lr, s->grad_norm, s->loss_scale, s->tokens_per_s, s->mfu, s->step_time, 0,
                         s->comm_bytes[CG_TP], s->comm_bytes[CG_DP], s->comm_bytes[CG_PP], s->comm_seconds,
                         (double)now.tv_sec + 1e-9 * (double)now.tv_nsec, s->busy_min, s->busy_median, s->busy_max, 0,
                         s->comm_bytes[CG_CP], s->moe_aux, s->moe_z, s->moe_dropped};
    hsize_t newsize = mf->rows + 1, start = mf->rows, one = 1;
    hid_t mem = H5Screate_simple(1, &one, NULL);
    int rc = 0;
    for (int i = 0; i < M_COUNT && rc == 0; i++) {
        if (H5Dset_extent(mf->dset[i], &newsize) < 0) { rc = -1; break; }
        hid_t fs = H5Dget_space(mf->dset[i]);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL);
        const void *src = i == M_STEP ? (const void *)&s->step : i == M_SKIPPED ? (const void *)&s->skipped
                          : i == M_SLOWEST ? (const void *)&s->slowest_rank : (const void *)&v[i];
        if (H5Dwrite(mf->dset[i], mtype(i), mem, fs, H5P_DEFAULT, src) < 0) rc = -1;
        H5Sclose(fs);
    }
    H5Sclose(mem);
    if (rc == 0 && mf->moe_tokens >= 0 && s->moe_tokens) { /* the row (L, E) */
        hsize_t dims[3] = {newsize, mf->moe_dims[1], mf->moe_dims[2]}, at[3] = {start, 0, 0};
        hsize_t count[3] = {1, mf->moe_dims[1], mf->moe_dims[2]};
        hid_t fs = H5Dset_extent(mf->moe_tokens, dims) < 0 ? -1 : H5Dget_space(mf->moe_tokens);
        hid_t ms = H5Screate_simple(3, count, NULL);
        if (fs < 0 || H5Sselect_hyperslab(fs, H5S_SELECT_SET, at, NULL, count, NULL) < 0 ||
            H5Dwrite(mf->moe_tokens, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, s->moe_tokens) < 0)
            rc = -1;
        if (fs >= 0) H5Sclose(fs);
        H5Sclose(ms);
    }
    mf->rows = newsize;
    if (rc == 0 && mf->flush_every > 0 && mf->rows % (hsize_t)mf->flush_every == 0) rc = flush_file(mf);
    if (rc != 0) give_up(mf, "writing step", s->step);
    return rc;
}

int metrics_moe(struct metrics_file *mf, int L, int E)
{
    if (mf->file < 0) return 0;
    const char *path = "/metrics/moe_tokens";
    hsize_t dims[3] = {mf->rows, (hsize_t)L, (hsize_t)E};
    if (H5Lexists(mf->file, path, H5P_DEFAULT) > 0) {
        mf->moe_tokens = H5Dopen2(mf->file, path, H5P_DEFAULT);
        hsize_t had[3] = {0, 0, 0};
        hid_t sp = mf->moe_tokens < 0 ? -1 : H5Dget_space(mf->moe_tokens);
        if (sp >= 0 && H5Sget_simple_extent_ndims(sp) == 3) H5Sget_simple_extent_dims(sp, had, NULL);
        if (sp >= 0) H5Sclose(sp);
        if (had[1] != dims[1] || had[2] != dims[2]) { /* another model's: begin the column anew */
            if (mf->moe_tokens >= 0) H5Dclose(mf->moe_tokens);
            mf->moe_tokens = -1;
            if (H5Ldelete(mf->file, path, H5P_DEFAULT) < 0) return -1;
        } else if (H5Dset_extent(mf->moe_tokens, dims) < 0)
            return -1;
    }
    if (mf->moe_tokens < 0) {
        hsize_t zero[3] = {0, dims[1], dims[2]}, maxdims[3] = {H5S_UNLIMITED, dims[1], dims[2]};
        hsize_t chunk[3] = {16, dims[1], dims[2]};
        hid_t space = H5Screate_simple(3, zero, maxdims), dcpl = series_dcpl(3, chunk);
        mf->moe_tokens = H5Dcreate2(mf->file, path, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5Pclose(dcpl);
        H5Sclose(space);
        if (mf->moe_tokens < 0 ||
            describe(mf->moe_tokens, "tokens", "mixture of experts: the token choices each expert of each layer "
                                               "took in the step, over the global batch (step, layer, expert), "
                                               "before the capacity") ||
            (mf->rows && H5Dset_extent(mf->moe_tokens, dims) < 0)) /* (rows of older steps: 0) */
            return -1;
    }
    mf->moe_dims[0] = dims[0], mf->moe_dims[1] = dims[1], mf->moe_dims[2] = dims[2];
    return 0;
}

/* /comm/{bytes,calls,seconds} [communicator][operation] of the whole run. */
static int write_comm(hid_t file, const struct comm_counts *cc)
{
    if (H5Lexists(file, "/comm", H5P_DEFAULT) > 0) H5Ldelete(file, "/comm", H5P_DEFAULT);
    hid_t g = H5Gcreate2(file, "/comm", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    hsize_t dims[2] = {CG_COUNT, CO_COUNT};
    hid_t space = H5Screate_simple(2, dims, NULL);
    double calls[CG_COUNT][CO_COUNT];
    for (int i = 0; i < CG_COUNT; i++)
        for (int o = 0; o < CO_COUNT; o++) calls[i][o] = (double)cc->calls[i][o];
    const char *names[3] = {"bytes", "calls", "seconds"};
    const void *data[3] = {cc->bytes, calls, cc->seconds};
    int rc = 0;
    for (int k = 0; k < 3; k++) {
        static const char *const cunits[3][2] = {{"bytes", "payload bytes rank 0 moved in the run"},
                                                  {"calls", "calls rank 0 made in the run"},
                                                  {"s", "seconds rank 0 spent in them"}};
        hid_t d = H5Dcreate2(g, names[k], H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d >= 0 && describe(d, cunits[k][0], cunits[k][1])) rc = -1;
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data[k]) < 0) rc = -1;
        if (d >= 0) H5Dclose(d);
    }
    char rows[256] = "", cols[256] = "";
    for (int i = 0; i < CG_COUNT; i++)
        snprintf(rows + strlen(rows), sizeof rows - strlen(rows), "%s%s", i ? " " : "", comm_group_name(i));
    for (int o = 0; o < CO_COUNT; o++)
        snprintf(cols + strlen(cols), sizeof cols - strlen(cols), "%s%s", o ? " " : "", comm_op_name(o));
    if (write_string_attr(g, "rows", rows) || write_string_attr(g, "columns", cols)) rc = -1;
    H5Sclose(space);
    H5Gclose(g);
    return rc;
}

int metrics_memory(struct metrics_file *mf, const unsigned long long *per_rank, int world)
{
    if (mf->file < 0) return mf->failed[0] ? -1 : 0;
    if (H5Lexists(mf->file, "memory", H5P_DEFAULT) > 0) H5Ldelete(mf->file, "memory", H5P_DEFAULT); /* a restart's */
    hsize_t dims[2] = {(hsize_t)world, 4};
    hid_t g = H5Gcreate2(mf->file, "memory", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(2, dims, NULL);
    int rc = g < 0 || space < 0 ? -1 : 0;
    hid_t d = rc ? -1 : H5Dcreate2(g, "allocated", H5T_NATIVE_ULLONG, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0 || H5Dwrite(d, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, per_rank) < 0 ||
        write_string_attr(d, "columns", "parameters gradients optimizer activations") ||
        describe(d, "bytes", "bytes each rank (row) allocated at start-up, by kind (columns)"))
        rc = -1;
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
    if (g >= 0) H5Gclose(g);
    if (rc) give_up(mf, "writing /memory at step", (int64_t)mf->rows);
    return rc;
}

int metrics_per_rank(struct metrics_file *mf, const char *name, const char *description,
                     const unsigned long long *per_rank, int world)
{
    if (mf->file < 0) return mf->failed[0] ? -1 : 0;
    hsize_t n = (hsize_t)world;
    hid_t g = H5Lexists(mf->file, "/memory", H5P_DEFAULT) > 0 ? H5Gopen2(mf->file, "/memory", H5P_DEFAULT)
                                                             : H5Gcreate2(mf->file, "/memory", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g >= 0 && H5Lexists(g, name, H5P_DEFAULT) > 0) H5Ldelete(g, name, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = g < 0 ? -1 : H5Dcreate2(g, name, H5T_NATIVE_ULLONG, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = d < 0 || H5Dwrite(d, H5T_NATIVE_ULLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, per_rank) < 0 ||
             describe(d, "bytes", description)
                 ? -1 : 0;
    if (d >= 0) H5Dclose(d);
    H5Sclose(space);
    if (g >= 0) H5Gclose(g);
    return rc;
}

int metrics_flush(struct metrics_file *mf)
{
    if (mf->file < 0) return mf->failed[0] ? -1 : 0;
    if (flush_file(mf) != 0) {
        give_up(mf, "flushing up to step", (int64_t)mf->rows);
        return -1;
    }
    return 0;
}

/* The datasets and the file closed; the folder probed first, as before
 * every flush (flush_file), since the close flushes. */
static int close_file(struct metrics_file *mf, int rc)
{
    if ((mf->refused = file_write_probe(mf->dir)) != 0) {
        give_up(mf, "writing the rows up to step", (int64_t)mf->rows);
        rc = -1;
    } else {
        for (int i = 0; i < M_COUNT; i++)
            if (mf->dset[i] > 0) H5Dclose(mf->dset[i]);
        if (mf->moe_tokens >= 0) H5Dclose(mf->moe_tokens);
        if (H5Fclose(mf->file) < 0) rc = -1;
        mf->file = -1;
    }
    drop_at_exit();
    return rc;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes, the newest first: this
 * one, set after HDF5's own, closes a metrics file that an exit on an error
 * left open before HDF5's shutdown would (its rows flushed where the
 * folder still takes writes; else, as give_up, onto a file in memory: see
 * flush_file), and says what was lost. */
static int close_at_exit(MPI_Comm comm, int key, void *value, void *extra)
{
    (void)comm, (void)key, (void)extra;
    struct metrics_file *mf = value;
    at_finalize = MPI_KEYVAL_INVALID; /* (being deleted: close_file must not delete it again) */
    if (mf->file >= 0 && close_file(mf, 0) != 0)
        fprintf(stderr, "error: %s\n", mf->failed[0] ? mf->failed : "closing metrics.h5 failed");
    return MPI_SUCCESS;
}

int metrics_close(struct metrics_file *mf, const double *timer_totals_all, int world,
                  const struct comm_counts *comm_totals)
{
    if (mf->file < 0) return 0;
    int rc = comm_totals ? write_comm(mf->file, comm_totals) : 0;
    if (timer_totals_all) {
        if (H5Lexists(mf->file, "/timers", H5P_DEFAULT) > 0) H5Ldelete(mf->file, "/timers", H5P_DEFAULT);
        hid_t g = H5Gcreate2(mf->file, "/timers", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hsize_t n = (hsize_t)world;
        hid_t space = H5Screate_simple(1, &n, NULL);
        double *col = xmalloc((size_t)world * sizeof *col);
        for (int t = 0; t < NUM_TIMERS; t++) {
            for (int r = 0; r < world; r++) col[r] = timer_totals_all[(size_t)r * NUM_TIMERS + t];
            char name[32], what[96]; /* the phase's name without spaces */
            snprintf(name, sizeof name, "%s", timer_name((enum timer_id)t));
            for (char *q = name; *q; q++) *q = *q == ' ' ? '_' : *q;
            snprintf(what, sizeof what, "each rank's total seconds in %s", timer_name((enum timer_id)t));
            hid_t d = H5Dcreate2(g, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
            if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, col) < 0 || describe(d, "s", what))
                rc = -1;
            if (d >= 0) H5Dclose(d);
        }
        /* the steps the totals cover: this run's, not an earlier one's that a restart continues */
        double ran = (double)(mf->rows - mf->rows_at_open);
        hsize_t one = 1;
        hid_t s1 = H5Screate_simple(1, &one, NULL);
        hid_t d = H5Dcreate2(g, "steps", H5T_NATIVE_DOUBLE, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &ran) < 0 ||
            describe(d, "1", "the steps the timers' totals cover (this run's, after a restart)"))
            rc = -1;
        if (d >= 0) H5Dclose(d);
        H5Sclose(s1);
        free(col);
        H5Sclose(space);
        H5Gclose(g);
    }
    return close_file(mf, rc);
}

static void fmt_duration(char *buf, size_t n, double s)
{
    if (s < 0) s = 0;
    if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), ((int)s % 3600) / 60);
}

void metrics_print_step(FILE *f, const struct step_metrics *s, int64_t total_steps, double elapsed_s, double eta_s)
{
    char eta[32], elapsed[32];
    fmt_duration(eta, sizeof eta, eta_s);
    fmt_duration(elapsed, sizeof elapsed, elapsed_s);
    char val[40] = "", slow[64] = "", moe[64] = "", tasks[512] = "";
    if (s->val_loss == s->val_loss) snprintf(val, sizeof val, " | val loss %.6f", s->val_loss);
    for (int i = 0, n = 0; i < s->ntasks && n < (int)sizeof tasks; i++)
        n += snprintf(tasks + n, sizeof tasks - (size_t)n, " | %s acc %.4f norm %.4f", s->tasks[i].name,
                      s->tasks[i].acc, s->tasks[i].acc_norm);
    if (s->moe_tokens)
        snprintf(moe, sizeof moe, " | aux %.4f | dropped %.1f%%", s->moe_aux, 100.0 * s->moe_dropped);
    if (s->straggler >= 0)
        snprintf(slow, sizeof slow, " | straggler rank %d (+%.0f%%)", s->straggler,
                 100.0 * (s->busy_max / (s->busy_median > 0 ? s->busy_median : 1) - 1));
    fprintf(f, "step %6lld/%lld | loss %.6f%s%s%s | lr %.3e | grad norm %.4f | %9.0f tok/s | MFU %5.1f%% | %7.1f ms | "
            "elapsed %s | ETA %s%s%s\n",
            (long long)s->step, (long long)total_steps, s->loss, val, tasks, moe, s->lr, s->grad_norm, s->tokens_per_s,
            100.0 * s->mfu, 1e3 * s->step_time, elapsed, eta, s->skipped ? " | skipped" : "", slow);
    fflush(f);
}

/* The elements of a 1-d float64 dataset of f, read into *out (malloc'ed). */
static int read_column(hid_t f, const char *name, double **out, hsize_t *n)
{
    *out = NULL; /* (NULL on every failure: the caller frees it either way) */
    hid_t d = H5Lexists(f, name, H5P_DEFAULT) > 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
    if (d < 0) return -1;
    hid_t space = H5Dget_space(d);
    int rc = space >= 0 && H5Sget_simple_extent_ndims(space) == 1 ? 0 : -1;
    if (rc == 0) H5Sget_simple_extent_dims(space, n, NULL);
    *out = rc == 0 ? xmalloc((size_t)(*n ? *n : 1) * sizeof **out) : NULL;
    if (rc == 0 && *n && H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) < 0) rc = -1;
    if (space >= 0) H5Sclose(space);
    H5Dclose(d);
    if (rc) free(*out), *out = NULL;
    return rc;
}

int metrics_read_timers(const char *run_dir, int world, double *seconds, int64_t *steps)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.h5", run_dir);
    if (access(path, R_OK) != 0) return -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    static const char *const names[3] = {"/timers/forward", "/timers/backward", "/timers/weight_grad"};
    double *col = NULL;
    hsize_t n = 0;
    int rc = read_column(f, H5Lexists(f, "/timers/steps", H5P_DEFAULT) > 0 ? "/timers/steps" : "/metrics/step", &col,
                         &n);
    *steps = rc == 0 && H5Lexists(f, "/timers/steps", H5P_DEFAULT) > 0 && n == 1 ? (int64_t)col[0] : (int64_t)n;
    free(col);
    for (int i = 0; i < 3 && rc == 0; i++) {
        if (i == 2 && H5Lexists(f, names[i], H5P_DEFAULT) <= 0) { /* (a run from before W existed) */
            for (int r = 0; r < world; r++) seconds[3 * r + i] = 0;
            continue;
        }
        rc = read_column(f, names[i], &col, &n);
        if (rc == 0 && n != (hsize_t)world) rc = -1;
        for (int r = 0; rc == 0 && r < world; r++) seconds[3 * r + i] = col[r];
        free(col);
    }
    H5Fclose(f);
    return rc == 0 && *steps > 0 ? 0 : -1;
}
