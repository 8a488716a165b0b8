/* train_start.c -- the training run's start: its directory (created,
 * locked, its lineage settled) and the state it starts from (a restart,
 * io.init_from, or the initial values). */
#include "train_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "file.h"
#include "flight.h"
#include "hf.h"
#include "lineage.h"
#include "log.h"
#include "runlock.h"

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: the lock is given
 * back there, not only at exit (runlock.c's atexit).  A launcher that ends
 * the job's ranks once one has exited (Open MPI's mpirun after a non-zero
 * status, a clean stop's 3 included; srun --kill-on-bad-exit) may kill rank
 * 0 between MPI_Finalize and exit's handlers, which left the lock for the
 * next run to take over.  The watchdog gives it back too as it ends a hung
 * job, before an exit through MPI_Abort and at a guarded mapping's SIGBUS
 * (exit_abruptly: none runs exit handlers). */
static int release_at_finalize(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm, (void)keyval, (void)value, (void)extra;
    runlock_release();
    return MPI_SUCCESS;
}

void train_open_run_dir(const struct run *r)
{
    char msg[2048] = "";
    int failed = 0;
    char why[1024];
    if (r->g->rank == 0 && file_make_dirs(r->cfg->io.run_dir, why, sizeof why) != 0) {
        snprintf(msg, sizeof msg, "io.run_dir = '%s': %s", r->cfg->io.run_dir, why);
        failed = 1;
    }
    die_all_if(r->g->world_comm, failed, msg, "set io.run_dir to a writable directory");
    /* one job per run directory, before anything in it is read or written */
    char note[1024] = "";
    failed = r->g->rank == 0 ? -runlock_take(r->cfg->io.run_dir, note, sizeof note, msg, sizeof msg) : 0;
    MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT, 0, r->g->world_comm));
    die_all_if(r->g->world_comm, failed == 2, msg, "set io.run_dir to a directory this job may write");
    die_all_if(r->g->world_comm, failed != 0, msg, "wait for that job, or choose another io.run_dir; if the job is gone "
                                       "(on another host), remove the lock file");
    if (note[0]) log_warn("%s", note);
    if (r->g->rank == 0) {
        int key;
        MPI_CHECK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, release_at_finalize, &key, NULL));
        MPI_CHECK(MPI_Comm_set_attr(MPI_COMM_SELF, key, NULL));
        exit_abruptly(runlock_release); /* (and where the process ends without exit handlers) */
    }
}

/* The run directory follows the run's lineage (lineage.h).  Restarted from
 * `path` (loaded): a checkpoint of this directory becomes its lineage's
 * newest, and every later checkpoint, abandoned, is moved aside (never
 * deleted); a checkpoint from elsewhere starts the manifest anew, in a
 * directory that holds no other run's output (else refused, unless
 * io.overwrite moves that output aside).  A fresh start in a
 * directory that holds another run's output is refused, unless
 * io.overwrite or restart = 'auto' (which found nothing to resume: a job
 * killed before its first checkpoint) asks for it: that output is moved
 * aside into run_dir/superseded.N/.  Rank 0 works; the error is agreed. */
/* Is the checkpoint at path one of run_dir's, ckpt_<step>.h5 (the same
 * folder, however it is spelled)?  1 with its step in *step, else 0. */
static int checkpoint_here(const char *path, const char *run_dir, long long *step)
{
    char pd[4096], tail[8];
    snprintf(pd, sizeof pd, "%s", path);
    char *slash = strrchr(pd, '/');
    const char *base = slash ? path + (slash - pd) + 1 : path;
    if (slash) *slash = '\0';
    else snprintf(pd, sizeof pd, ".");
    struct stat a, b;
    return stat(pd, &a) == 0 && stat(run_dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
           sscanf(base, "ckpt_%lld.h5%7s", step, tail) == 1;
}

static void settle_run_dir(struct run *r, const char *path, int loaded, int here)
{
    const struct config *cfg = r->cfg;
    const char *dir = cfg->io.run_dir;
    static struct lineage l;
    char msg[4096] = "", what[256] = "", aside[4200] = "";
    int failed = 0;
    if (r->g->rank == 0 && loaded) {
        long long s = -1;
        if (here) checkpoint_here(path, dir, &s);
        int ckpts = !here && lineage_dir_in_use(dir, what, sizeof what) && strstr(what, "checkpoint") != NULL;
        if (!here && what[0] && !ckpts) { /* (output, no checkpoint: this job's own, killed before its first) */
            failed = lineage_move_output(dir, aside, sizeof aside, msg, sizeof msg) != 0;
            if (!failed) log_info("%s holds no checkpoint: its %s moved to %s/\n", dir, what, aside);
        }
        if (ckpts) { /* another run's checkpoints, not this one's past */
            if (!cfg->io.overwrite) {
                snprintf(msg, sizeof msg, "io.restart = '%s' is not a checkpoint of io.run_dir = '%s', which holds "
                         "another run's output (%s): the restarted run would replace its checkpoints and metrics",
                         path, dir, what);
                failed = 3;
            } else {
                failed = lineage_move_output(dir, aside, sizeof aside, msg, sizeof msg) != 0;
                if (!failed) log_info("a run restarted from %s in %s: the earlier run's %s moved to %s/\n", path, dir,
                                      what, aside);
            }
        }
        if (!failed) {
            if (lineage_read(dir, &l, msg, sizeof msg) != 0) l.n = 0; /* damaged: start it anew */
            msg[0] = '\0';
            /* every later checkpoint, listed or not, is moved aside: the run writes those steps anew */
            if (here) failed = lineage_move_later(dir, s, aside, sizeof aside, msg, sizeof msg) < 0;
            int at = here ? lineage_find(&l, s) : -1;
            int was = l.n, present = l.present;
            if (at >= 0) l.n = at + 1;
            else if (here) l.step[0] = s, l.n = 1;
            else l.n = 0;
            /* (unchanged: not rewritten, so that a restart on a full disk reads and fails at its first real write) */
            if (!failed && (l.n != was || !present)) failed = lineage_write(dir, &l, msg, sizeof msg) != 0;
        }
    } else if (r->g->rank == 0 && lineage_dir_in_use(dir, what, sizeof what)) {
        if (!cfg->io.overwrite && !config_is(cfg->io.restart, "auto")) {
            snprintf(msg, sizeof msg, "io.run_dir = '%s' holds another run's output (%s): a new run would mix "
                     "with it", dir, what);
            failed = 2;
        } else {
            failed = lineage_move_output(dir, aside, sizeof aside, msg, sizeof msg) != 0;
            if (!failed) log_info("a new run in %s: the earlier run's %s moved to %s/\n", dir, what, aside);
        }
    }
    int any = failed;
    MPI_CHECK(MPI_Bcast(&any, 1, MPI_INT, 0, r->g->world_comm));
    if (any == 3)
        die_all_if(r->g->world_comm, 1, msg, "to continue that run use io.restart = 'auto'; to restart from this "
                                      "checkpoint here set io.overwrite = .true. (the run's files are then moved "
                                      "aside, not deleted), or choose another io.run_dir");
    if (any == 2)
        die_all_if(r->g->world_comm, 1, msg, "continue it with io.restart = 'auto', choose another io.run_dir, or set "
                                      "io.overwrite = .true. to start over (its files are then moved aside, not "
                                      "deleted)");
    die_all_if(r->g->world_comm, any != 0, msg, "check that io.run_dir is writable");
}

/* A restart that feeds the model other data than the checkpoint's run did
 * (another corpus, order or batch: legitimate, as in continued training)
 * says which keys changed (rank 0; nothing where the stored deck does not
 * read: the load has checked the file). */
static void note_data_changes(const struct config *cfg, const char *path)
{
    static struct config was; /* (large: not on the stack) */
    char err[8], list[2048] = "";
    if (ckpt_read_config(path, &was, err, sizeof err) != 0) return;
    const struct { const char *key, *now, *then; } s[] = {
        {"data.kind", cfg->data.kind, was.data.kind}, {"data.path", cfg->data.path, was.data.path},
        {"data.val_path", cfg->data.val_path, was.data.val_path},
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (strcmp(s[i].now, s[i].then) != 0)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s = '%.200s' (was '%.200s')",
                     list[0] ? ", " : "", s[i].key, s[i].now, s[i].then);
    const struct { const char *key; int64_t now, then; } n[] = {
        {"data.seed", cfg->data.seed, was.data.seed}, {"data.shuffle", cfg->data.shuffle, was.data.shuffle},
        {"train.batch_size", cfg->train.batch_size, was.train.batch_size},
    };
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++)
        if (n[i].now != n[i].then)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s = %lld (was %lld)", list[0] ? ", " : "",
                     n[i].key, (long long)n[i].now, (long long)n[i].then);
    if (list[0])
        log_info("the deck feeds other data than %s's run: %s; the run goes on from the samples it consumed\n",
                 path, list);
}

void train_initial_state(struct run *r)
{
    const struct config *cfg = r->cfg;
    char err[1024] = "", path[4096] = "";
    struct ckpt_state st;
    memset(&st, 0, sizeof st);
    double t0 = wtime();
    int loaded = 0, in_master = 0; /* the master weights (ZeRO-3: the slice) hold the model read */
    if (config_is(cfg->io.restart, "auto")) {
        loaded = ckpt_restart_auto(cfg->io.run_dir, &r->model, &r->optim, &st, r->g, path, sizeof path, err,
                                   sizeof err);
        if (loaded == -2)
            die_all("set the deck's &model as the checkpoint's to continue the run, or choose another io.run_dir "
                    "for another model", "restart = 'auto': %s", err);
        if (loaded == -3)
            die_all("check io.run_dir's file system from that rank's node, then restart: nothing in io.run_dir was "
                    "changed (an earlier checkpoint would lose the steps since)", "restart = 'auto': %s", err);
        if (loaded < 0)
            die_all("remove the broken checkpoints from io.run_dir to start fresh, or point io.restart at a good one",
                    "restart = 'auto': %s", err);
        if (!loaded) log_info("restart = 'auto': no checkpoint in %s, starting fresh\n", cfg->io.run_dir);
    } else if (cfg->io.restart[0]) {
        snprintf(path, sizeof path, "%s", cfg->io.restart);
        int rc = ckpt_load_all(path, &r->model, &r->optim, &st, r->g, err, sizeof err);
        if (rc == -3)
            die_all("check the file system from that rank's node, then restart", "restart from %s: %s", path, err);
        if (rc != 0)
            die_all("check io.restart, or use restart = 'auto' to take the newest good checkpoint",
                    "restart from %s: %s", path, err);
        loaded = 1;
    }
    if (loaded) {
        r->step = st.step;
        r->tokens = st.tokens;
        r->optim.updates = st.updates;
        if (st.has_scaler && r->scaler.dynamic) {
            r->scaler.scale = st.loss_scale;
            r->scaler.good_steps = st.good_steps;
            r->scaler.hysteresis_left = st.hysteresis_left;
        }
        log_info("restarted from %s at step %lld (read in %.2f s)\n", path, (long long)r->step, wtime() - t0);
        snprintf(r->last_ckpt, sizeof r->last_ckpt, "%s", path);
        if (r->step > cfg->train.steps) /* (before the run directory is touched) */
            die_all("raise train.steps to train on from it, or restart from an earlier checkpoint",
                    "%s is at step %lld, past train.steps = %lld: there is nothing to train", path,
                    (long long)r->step, (long long)cfg->train.steps);
        if (r->step == cfg->train.steps) {
            log_info("step %lld is train.steps: nothing to train (the checkpoint is the run's last)\n",
                     (long long)r->step);
            r->saved_step = r->step; /* (not written again) */
        }
        if (cfg->io.init_from[0])
            log_info("io.init_from = '%s' is not read: the run resumes from its checkpoint\n", cfg->io.init_from);
        if (r->g->rank == 0) note_data_changes(cfg, path);
    } else if (cfg->io.init_from[0]) {
        const char *from = cfg->io.init_from;
        enum weights_kind kind = weights_kind_of(from);
        int nonfinite = cfg->io.allow_nonfinite_weights;
        int rc = kind == WEIGHTS_HF     ? hf_load(from, &r->model, r->g, nonfinite, err, sizeof err)
                 : kind == WEIGHTS_LLMC ? llmc_load(from, &r->model, r->g, nonfinite, err, sizeof err)
                                        : ckpt_load_model(from, &r->model, r->g, err, sizeof err);
        if (rc != 0)
            die_all(rc == -3 ? "check the file system from that rank's node, then restart"
                             : "io.init_from names a triad checkpoint (HDF5 with /model), a Hugging Face model folder "
                               "or an llm.c GPT-2 checkpoint, of this deck's model (docs/formats.md)",
                    "init_from %s: %s", from, err);
        in_master = kind == WEIGHTS_HDF5 && r->model.shard_mem; /* (ckpt.c reads a ZeRO-3 model into its slice) */
        log_info("initial weights from %s (%s)\n", from,
                 kind == WEIGHTS_HF ? "Hugging Face folder" : kind == WEIGHTS_LLMC ? "llm.c checkpoint" : "HDF5");
    }
    long long s;
    int here = loaded && r->g->rank == 0 && checkpoint_here(path, cfg->io.run_dir, &s);
    int bad = loaded && r->g->rank == 0 && hf_check_resumed_tokenizer(cfg, path, here, err, sizeof err) != 0;
    if (mpi_agree_error(r->g->world_comm, bad, err, sizeof err)) /* (before the run directory is touched) */
        die_all("data.tokenizer names the model's tokenizer (docs/tokenizer.md)", "%s", err);
    /* the tokenizer the run keeps, opened (it fits the model, it reads), and
     * the tasks read through it, before the run directory is touched too: a
     * bad one would have moved its output */
    struct tokenizer *tok = NULL;
    const int V = r->model.d.V;
    bad = r->g->rank == 0 && !(tok = hf_run_tokenizer(cfg, V, loaded ? path : NULL, here, err, sizeof err)) && err[0];
    if (mpi_agree_error(r->g->world_comm, bad, err, sizeof err))
        die_all("the run keeps the model's tokenizer: data.tokenizer, io.init_from's, or the one the run resumes with "
                "(docs/tokenizer.md)", "%s", err);
    if (cfg->train.mc_eval_every > 0) mc_eval_init(&r->mc, cfg, NULL, tok, &r->shape, r->g, V, r->model.d.T);
    tok_close(tok);
    settle_run_dir(r, path, loaded, here);
    bad = r->g->rank == 0 && hf_keep_tokenizer(cfg, (int)cfg->model.vocab_size, loaded ? path : NULL, here, err,
                                               sizeof err) != 0;
    if (mpi_agree_error(r->g->world_comm, bad, err, sizeof err))
        die_all("data.tokenizer names the model's tokenizer (docs/tokenizer.md)", "%s", err);
    if (!loaded && !in_master) optim_master_from_params(&r->optim, &r->model);
    optim_params_from_master(&r->optim, &r->model, &r->comm); /* bf16/fp16: round the compute copy */
}
