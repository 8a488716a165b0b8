/* metrics.c -- timers summary, progress line and metrics.h5. */
#include "metrics.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

static const char *timer_names[NUM_TIMERS] = {
#define TIMER_NAME(id, name) name,
    TIMER_LIST(TIMER_NAME)
#undef TIMER_NAME
};

void timers_print_summary(const struct timers *t, MPI_Comm world, int steps, FILE *f)
{
    double mn[NUM_TIMERS], mx[NUM_TIMERS], sum[NUM_TIMERS];
    int rank, n;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &n));
    MPI_CHECK(MPI_Reduce(t->total, mn, NUM_TIMERS, MPI_DOUBLE, MPI_MIN, 0, world));
    MPI_CHECK(MPI_Reduce(t->total, mx, NUM_TIMERS, MPI_DOUBLE, MPI_MAX, 0, world));
    MPI_CHECK(MPI_Reduce(t->total, sum, NUM_TIMERS, MPI_DOUBLE, MPI_SUM, 0, world));
    if (rank != 0) return;
    fprintf(f, "timing over %d steps (seconds; min / avg / max over %d ranks):\n", steps, n);
    fprintf(f, "  %-12s %10s %10s %10s %8s\n", "phase", "min", "avg", "max", "% step");
    double step = sum[T_STEP] / n;
    for (int i = 0; i < NUM_TIMERS; i++)
        fprintf(f, "  %-12s %10.3f %10.3f %10.3f %7.1f%%\n", timer_names[i], mn[i], sum[i] / n, mx[i],
                step > 0 ? 100.0 * (sum[i] / n) / step : 0.0);
}

/* ------------------------------------------------------------- metrics.h5 */

enum { M_STEP, M_LOSS, M_LR, M_GNORM, M_SCALE, M_TOKS, M_MFU, M_TIME, M_SKIPPED,
       M_COMM_TP, M_COMM_DP, M_COMM_PP, M_COMM_S, M_COUNT };
static const char *mnames[M_COUNT] = {"step", "loss", "lr", "grad_norm", "loss_scale", "tokens_per_s", "mfu",
                                      "step_time", "skipped", "comm_tp_bytes", "comm_dp_bytes",
                                      "comm_pp_bytes", "comm_seconds"};

static hid_t mtype(int i)
{
    return i == M_STEP ? H5T_NATIVE_INT64 : i == M_SKIPPED ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE;
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

static int create_datasets(struct metrics_file *mf)
{
    hid_t g = H5Gcreate2(mf->file, "/metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) return -1;
    hsize_t dims = 0, maxdims = H5S_UNLIMITED, chunk = 256;
    hid_t space = H5Screate_simple(1, &dims, &maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, &chunk);
    int rc = 0;
    for (int i = 0; i < M_COUNT; i++) {
        mf->dset[i] = H5Dcreate2(g, mnames[i], mtype(i), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        if (mf->dset[i] < 0) rc = -1;
    }
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Gclose(g);
    return rc;
}

/* Re-open the datasets of an existing file and keep rows with step <= last. */
static int reopen_datasets(struct metrics_file *mf, int64_t last)
{
    for (int i = 0; i < M_COUNT; i++) {
        char path[64];
        snprintf(path, sizeof path, "/metrics/%s", mnames[i]);
        mf->dset[i] = H5Dopen2(mf->file, path, H5P_DEFAULT);
        if (mf->dset[i] < 0) return -1;
    }
    hid_t space = H5Dget_space(mf->dset[M_STEP]);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(space, &n, NULL);
    H5Sclose(space);
    int64_t *steps = xmalloc((n ? n : 1) * sizeof *steps);
    if (n && H5Dread(mf->dset[M_STEP], H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, steps) < 0) {
        free(steps);
        return -1;
    }
    hsize_t keep = 0;
    /* the rows of steps 1 .. last, in order; a row out of order (zeros left by
     * a write that failed) ends them */
    while (keep < n && steps[keep] <= last && (keep == 0 ? steps[0] >= 1 : steps[keep] > steps[keep - 1])) keep++;
    free(steps);
    for (int i = 0; i < M_COUNT; i++)
        if (H5Dset_extent(mf->dset[i], &keep) < 0) return -1;
    mf->rows = keep;
    return 0;
}

int metrics_open(struct metrics_file *mf, const char *run_dir, const char *deck, int64_t first_step,
                 int flush_every, char *err, size_t errlen)
{
    memset(mf, 0, sizeof *mf);
    mf->file = -1;
    mf->flush_every = flush_every;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* failures are reported here, once, not by HDF5's stack dump */
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.h5", run_dir);
    struct stat st;
    int exists = stat(path, &st) == 0;
    int rc = 0;
    if (exists && first_step > 0) {
        mf->file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        rc = mf->file < 0 ? -1 : reopen_datasets(mf, first_step);
        if (rc != 0) { /* damaged (a full disk in an earlier run): keep it aside, start anew from here */
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
    return 0;
}

/* A write failed (a full disk): the file is never touched again; the rows
 * flushed before stay readable. */
static void give_up(struct metrics_file *mf, const char *what, int64_t step)
{
    snprintf(mf->failed, sizeof mf->failed, "%s %lld to metrics.h5 failed (disk full?); the rows flushed before "
             "are kept", what, (long long)step);
    /* (not closed: HDF5 1.10's H5Fclose after a failed write leaves the file
     * half torn down, and the library's own shutdown in MPI_Finalize then
     * crashes on it; left open, the shutdown's close fails quietly) */
    mf->file = -1;
}

int metrics_append(struct metrics_file *mf, const struct step_metrics *s)
{
    if (mf->file < 0) return 0;
    double v[M_COUNT] = {0, s->loss, s->lr, s->grad_norm, s->loss_scale, s->tokens_per_s, s->mfu, s->step_time, 0,
                         s->comm_bytes[CG_TP], s->comm_bytes[CG_DP], s->comm_bytes[CG_PP], s->comm_seconds};
    hsize_t newsize = mf->rows + 1, start = mf->rows, one = 1;
    hid_t mem = H5Screate_simple(1, &one, NULL);
    int rc = 0;
    for (int i = 0; i < M_COUNT && rc == 0; i++) {
        if (H5Dset_extent(mf->dset[i], &newsize) < 0) { rc = -1; break; }
        hid_t fs = H5Dget_space(mf->dset[i]);
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL);
        const void *src = i == M_STEP ? (const void *)&s->step : i == M_SKIPPED ? (const void *)&s->skipped
                                                                                : (const void *)&v[i];
        if (H5Dwrite(mf->dset[i], mtype(i), mem, fs, H5P_DEFAULT, src) < 0) rc = -1;
        H5Sclose(fs);
    }
    H5Sclose(mem);
    mf->rows = newsize;
    if (rc == 0 && mf->flush_every > 0 && mf->rows % (hsize_t)mf->flush_every == 0)
        rc = H5Fflush(mf->file, H5F_SCOPE_GLOBAL) < 0 ? -1 : 0;
    if (rc != 0) give_up(mf, "writing step", s->step);
    return rc;
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
        hid_t d = H5Dcreate2(g, names[k], H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
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

int metrics_flush(struct metrics_file *mf)
{
    if (mf->file < 0) return mf->failed[0] ? -1 : 0;
    if (H5Fflush(mf->file, H5F_SCOPE_GLOBAL) < 0) {
        give_up(mf, "flushing up to step", (int64_t)mf->rows);
        return -1;
    }
    return 0;
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
            hid_t d = H5Dcreate2(g, timer_names[t], H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                                 H5P_DEFAULT);
            if (d < 0 || H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, col) < 0) rc = -1;
            if (d >= 0) H5Dclose(d);
        }
        free(col);
        H5Sclose(space);
        H5Gclose(g);
    }
    for (int i = 0; i < M_COUNT; i++)
        if (mf->dset[i] > 0) H5Dclose(mf->dset[i]);
    if (H5Fclose(mf->file) < 0) rc = -1;
    mf->file = -1;
    return rc;
}

static void fmt_duration(char *buf, size_t n, double s)
{
    if (s < 0) s = 0;
    if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), ((int)s % 3600) / 60);
}

void metrics_print_step(FILE *f, const struct step_metrics *s, int64_t total_steps, double eta_s)
{
    char eta[32];
    fmt_duration(eta, sizeof eta, eta_s);
    fprintf(f, "step %6lld/%lld | loss %.6f | lr %.3e | grad norm %.4f | %9.0f tok/s | MFU %5.1f%% | %7.1f ms | ETA %s%s\n",
            (long long)s->step, (long long)total_steps, s->loss, s->lr, s->grad_norm, s->tokens_per_s,
            100.0 * s->mfu, 1e3 * s->step_time, eta, s->skipped ? " | skipped" : "");
    fflush(f);
}

/* ------------------------------------------------------------- the trace */

void trace_init(struct trace *t)
{
    memset(t, 0, sizeof *t);
    t->origin = MPI_Wtime();
}

void trace_add(struct trace *t, enum trace_kind kind, int mb, int chunk, double t0, double t1)
{
    if (!t) return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        struct trace_event *ev = realloc(t->ev, t->cap * sizeof *ev);
        if (!ev) die("out of memory growing the trace to %zu events", t->cap);
        t->ev = ev;
    }
    t->ev[t->n++] = (struct trace_event){t0 - t->origin, t1 - t->origin, kind, mb, chunk};
}

void trace_free(struct trace *t)
{
    free(t->ev);
    memset(t, 0, sizeof *t);
}

static const char *trace_names[TR_COUNT] = {"F", "B", "send", "recv wait (idle)", "optimizer"};

int trace_write(const struct trace *t, MPI_Comm world, const char *path, char *err, size_t errlen)
{
    int rank, n;
    MPI_CHECK(MPI_Comm_rank(world, &rank));
    MPI_CHECK(MPI_Comm_size(world, &n));
    int mine = (int)(t->n * sizeof(struct trace_event)), *counts = NULL, *displs = NULL;
    if (rank == 0) {
        counts = xmalloc((size_t)n * sizeof *counts);
        displs = xmalloc((size_t)n * sizeof *displs);
    }
    MPI_CHECK(MPI_Gather(&mine, 1, MPI_INT, counts, 1, MPI_INT, 0, world));
    char *all = NULL;
    if (rank == 0) {
        size_t total = 0;
        for (int r = 0; r < n; r++) {
            displs[r] = (int)total;
            total += (size_t)counts[r];
        }
        all = xmalloc(total ? total : 1);
    }
    MPI_CHECK(MPI_Gatherv(t->ev, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, world));
    int rc = 0;
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        if (!f) {
            snprintf(err, errlen, "cannot write %s", path);
            rc = -1;
        } else {
            fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
            int first = 1;
            for (int r = 0; r < n; r++) {
                fprintf(f, "%s{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": %d, "
                           "\"args\": {\"name\": \"rank %d\"}}", first ? "" : ",\n", r, r);
                first = 0;
                const struct trace_event *ev = (const struct trace_event *)(all + displs[r]);
                for (size_t i = 0; i < (size_t)counts[r] / sizeof *ev; i++) {
                    char name[48]; /* F3, B3, F3c1 for chunk 1 */
                    if (ev[i].kind > TR_BACKWARD) snprintf(name, sizeof name, "%s", trace_names[ev[i].kind]);
                    else if (ev[i].chunk > 0)
                        snprintf(name, sizeof name, "%s%dc%d", trace_names[ev[i].kind], ev[i].mb, ev[i].chunk);
                    else snprintf(name, sizeof name, "%s%d", trace_names[ev[i].kind], ev[i].mb);
                    fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 0, \"tid\": %d, "
                               "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"mb\": %d, \"chunk\": %d}}",
                            name, trace_names[ev[i].kind], r, 1e6 * ev[i].t0, 1e6 * (ev[i].t1 - ev[i].t0),
                            ev[i].mb, ev[i].chunk);
                }
            }
            fprintf(f, "\n]}\n");
            if (fclose(f) != 0) {
                snprintf(err, errlen, "writing %s failed", path);
                rc = -1;
            }
        }
        free(all);
        free(counts);
        free(displs);
    }
    MPI_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, world));
    return rc;
}
