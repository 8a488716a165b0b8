/* train_ckpt.c -- the training run's checkpoints: on the interval, in the
 * background, at the end; the disk's room for them, and an I/O failure
 * stopping the run. */
#include "train_internal.h"

#include <errno.h>
#include <stdio.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ckpt.h"
#include "exit_status.h"
#include "file.h"
#include "lineage.h"
#include "log.h"

int train_checkpoint_due(const struct run *r)
{
    const struct config *cfg = r->cfg;
    return cfg->io.checkpoint_every > 0 && r->step % cfg->io.checkpoint_every == 0 && r->step < cfg->train.steps;
}

/* Is there room in run_dir for a checkpoint and some more rows of
 * metrics.h5, after the checkpoint this step writes on the interval, if it
 * does (after_step: at a step's end, not at the start)?  HDF5 1.10 does not
 * survive a write that fails for lack of space (the library crashes in its
 * shutdown, and a collective close can hang), so the run stops while a
 * checkpoint still fits.  Rank 0; 1 if there is, else 0 with the figures in
 * why (-1: not even one checkpoint fits now: the disk was filled by
 * something else). */
int train_disk_has_room(const struct run *r, int after_step, char *why, size_t len)
{
    struct statvfs fs;
    double need = r->ckpt_bytes + (256 << 10);
    if (r->async.running && !r->async.reserved) need += r->ckpt_bytes; /* (the one being written fills in) */
    /* this step's checkpoint comes first: a stop after it needs room for one
     * more, unless the rotation that follows it removes one (the run keeps
     * io.keep_checkpoints of them already) */
    int due = after_step && train_checkpoint_due(r);
    static struct lineage l; /* (large: not on the stack) */
    char lerr[8];
    if (due && lineage_read(r->cfg->io.run_dir, &l, lerr, sizeof lerr) == 0 && l.n >= r->cfg->io.keep_checkpoints)
        due = 0;
    if (due) need += r->ckpt_bytes;
    if (statvfs(r->cfg->io.run_dir, &fs) != 0) return 1; /* (cannot tell: the writes will) */
    double avail = (double)fs.f_bavail * (double)fs.f_frsize;
    if (avail >= need) return 1;
    snprintf(why, len, "the file system of %s has %.0f KiB free, less than %s and some metrics need (%.0f KiB)",
             r->cfg->io.run_dir, avail / 1024, due ? "this step's checkpoint, one more" : "a checkpoint",
             need / 1024);
    return avail >= r->ckpt_bytes ? 0 : -1;
}

/* Rank 0 saw an I/O failure: say it once; the run stops at the step's end
 * (stop_agreed tells every rank). */
void train_io_stop(struct run *r, const char *why, const char *then)
{
    if (r->io_stop) return;
    snprintf(r->io_why, sizeof r->io_why, "%s", why);
    fprintf(stderr, "error: %s%s\n", why, then);
    r->io_stop = 1;
}

/* The checkpoint being written in the background, if there is one: wait for
 * it and seal it.  Returns 0 (sealed, or none), or -1 with the reason in
 * err (every rank alike; the earlier checkpoints are intact). */
int train_async_checkpoint_end(struct run *r, char *err, size_t errlen)
{
    struct ckpt_async *a = &r->async;
    if (!a->running) return 0;
    double t0 = wtime();
    timer_start(&r->timers, T_IO);
    int rc = ckpt_async_end(a, r->cfg->io.run_dir, &r->model, &r->optim, r->g, (int)r->cfg->io.keep_checkpoints,
                            err, errlen);
    timer_stop(&r->timers, T_IO);
    if (rc != 0) {
        r->failed_step = a->step;
        return -1;
    }
    snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s/ckpt_%lld.h5", r->cfg->io.run_dir, (long long)a->step);
    double mib = 3.0 * model_logical_params(&r->model.d) * sizeof(float) / 1048576.0, now = wtime();
    if (now - a->t_begin > r->ckpt_seconds) r->ckpt_seconds = now - a->t_begin;
    log_info("checkpoint %s written in the background and verified: %.1f MiB in %.2f s (%.0f MiB/s), sealed "
             "after step %lld; training stopped %.2f s for the snapshot, %.2f s waiting for the writer and %.2f s "
             "for the seal\n", r->last_ckpt, mib, now - a->t_begin, mib / (now - a->t_begin), (long long)r->step,
             a->t_resumed - a->t_begin, a->waited, now - t0 - a->waited);
    return 0;
}

/* Write the checkpoint of this step, once: in the background if
 * io.async_checkpoint and the run goes on (background), else at once.
 * Returns 0 (written or begun, or nothing to write), or -1 with the reason
 * in err (every rank alike; the earlier checkpoints are intact). */
int train_save_checkpoint(struct run *r, int background, char *err, size_t errlen)
{
    if (train_async_checkpoint_end(r, err, errlen) != 0) { /* one at a time, in order */
        if (background || exit_aborts()) return -1; /* (a file left open: the job ends through MPI_Abort) */
        /* (the run ends: its own state is written at once, if that still can be) */
        log_info("the background checkpoint of step %lld failed (%s); writing step %lld's at once\n",
                 (long long)r->failed_step, err, (long long)r->step);
        r->saved_step = -1;
    }
    if (r->saved_step == r->step) return 0; /* a stop at a checkpoint step: already written */
    if (r->nonfinite_streak > 0) { /* the same on every rank: the loss is global */
        log_info("no checkpoint at step %lld: the loss is not finite, the state is suspect (the earlier "
                 "checkpoints are kept)\n", (long long)r->step);
        return 0;
    }
    struct ckpt_state st = {r->step, r->tokens, r->optim.updates, r->scaler.scale, r->scaler.good_steps,
                            r->scaler.hysteresis_left, r->scaler.dynamic};
    double t0 = wtime();
    timer_start(&r->timers, T_IO);
    if (r->g->rank == 0 && metrics_flush(&r->metrics) != 0) train_io_stop(r, r->metrics.failed, "");
    int rc = background && r->cfg->io.async_checkpoint
                 ? ckpt_async_begin(&r->async, r->cfg->io.run_dir, &st, &r->model, &r->optim, r->deck, r->g,
                                    r->cfg->diag.slow_checkpoint, err, errlen)
                 : ckpt_save(r->cfg->io.run_dir, &st, &r->model, &r->optim, r->deck, r->g,
                             (int)r->cfg->io.keep_checkpoints, err, errlen);
    timer_stop(&r->timers, T_IO);
    if (rc != 0) {
        r->failed_step = r->step;
        return -1;
    }
    r->saved_step = r->step;
    if (r->async.running) return 0; /* (reported when it is sealed) */
    snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s/ckpt_%lld.h5", r->cfg->io.run_dir, (long long)r->step);
    double dt = wtime() - t0, mib = 3.0 * model_logical_params(&r->model.d) * sizeof(float) / 1048576.0;
    if (dt > r->ckpt_seconds) r->ckpt_seconds = dt;
    log_info("checkpoint %s written and verified: %.1f MiB in %.2f s (%.0f MiB/s)\n", r->last_ckpt, mib, dt,
             mib / dt);
    return 0;
}

/* A background write that has finished on every rank is sealed at once, so
 * that it is usable as soon as it can be.  Collective (while one is in
 * flight: the ranks agree on it). */
int train_async_checkpoint_poll(struct run *r, char *err, size_t errlen)
{
    if (!r->async.running) return 0;
    int busy = !ckpt_async_done(&r->async);
    comm_allreduce_max_int(&r->comm, CG_WORLD, &busy, 1);
    return busy ? 0 : train_async_checkpoint_end(r, err, errlen);
}

/* A checkpoint that could not be written ends the run.  While stopping (a
 * signal or the time limit) with an earlier good checkpoint, the status is 3
 * all the same: a requeued job resumes from that one, unless io.run_dir's
 * file system has gone read-only (after an error it stays so until it is
 * checked and mounted again: then the checkpoint must move first).  A job
 * that ends through MPI_Abort (a file left open) gives it as MPI_Abort's
 * code, which Open MPI's mpirun returns (io_errors.sh). */
void train_checkpoint_failed(struct run *r, int stopping, const char *err)
{
    int ro = r->g->rank == 0 && file_write_probe(r->cfg->io.run_dir) == EROFS;
    comm_allreduce_max_int(&r->comm, CG_WORLD, &ro, 1);
    /* (the newest good one may have gone with io.run_dir itself: never promise it; rank 0 looks) */
    int gone = r->g->rank == 0 && r->last_ckpt[0] && access(r->last_ckpt, R_OK) != 0;
    comm_allreduce_max_int(&r->comm, CG_WORLD, &gone, 1);
    if (gone)
        die_all("restore io.run_dir (or its checkpoints) and restart = 'auto' resumes from the newest; a requeued "
                "job without them would start from the beginning",
                "checkpoint at step %lld failed: %s; the newest checkpoint this run wrote, %s, is gone too: "
                "nothing of this run is left to resume from",
                (long long)r->failed_step, err, r->last_ckpt);
    if (stopping && r->last_ckpt[0] && !ro) {
        if (r->g->rank == 0)
            fprintf(stderr, "error: checkpoint at step %lld failed: %s\n", (long long)r->failed_step, err);
        log_info("stopped without a checkpoint of step %lld: the newest good one is %s, which a requeued "
                 "job resumes from (status 3)\n", (long long)r->failed_step, r->last_ckpt);
        exit_all(EXIT_STOPPED);
    }
    char hint[2 * sizeof r->last_ckpt + 320];
    if (ro && r->last_ckpt[0])
        snprintf(hint, sizeof hint, "io.run_dir's file system went read-only, as after an error (it stays so until it "
                 "is checked and mounted again); the newest good checkpoint, %s, is intact: copy it and metrics.h5 "
                 "to a writable folder and restart there (io.run_dir = that folder, io.restart = 'auto')",
                 r->last_ckpt);
    else if (ro)
        snprintf(hint, sizeof hint, "io.run_dir's file system went read-only, as after an error; no checkpoint of "
                 "this run was written before");
    else if (r->last_ckpt[0])
        snprintf(hint, sizeof hint, "check the free space and permissions of io.run_dir; the newest good "
                 "checkpoint, %s, is intact and restart = 'auto' resumes from it", r->last_ckpt);
    else
        snprintf(hint, sizeof hint, "check the free space and permissions of io.run_dir; no checkpoint of this "
                 "run was written before");
    die_all(hint, "checkpoint at step %lld failed: %s", (long long)r->failed_step, err);
}
