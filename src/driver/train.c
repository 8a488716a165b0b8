/* train.c -- the training loop (docs/design.md, "One training step") on this rank's part of the grid. */
#include "train.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ckpt.h"
#include "ckpt_async.h"
#include "comm.h"
#include "cpu.h"
#include "data.h"
#include "diag.h"
#include "eval.h"
#include "flight.h"
#include "ranks.h"
#include "hf.h"
#include "lineage.h"
#include "gemm.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"
#include "pipeline_exec.h"
#include "runlock.h"
#include "plan.h"
#include "scaler.h"

/* Set by SIGUSR1/SIGTERM; read at step boundaries, agreed over all ranks. */
static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { stop_requested = sig; }

void train_catch_signals(void)
{
    signal(SIGUSR1, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
}

struct run {
    const struct config *cfg;
    const struct grid *g;
    const char *deck;
    struct comm comm;
    struct model model;
    struct optim optim;
    struct data_source *data;
    struct metrics_file metrics;
    struct timers timers;
    struct run_shape shape;     /* the grid, micro-batches, ZeRO/overlap/staging modes (shape.h) */
    struct pp_exec exec;        /* this rank's pipeline schedule (pp = 1: forward, backward, ...) */
    struct dp dp;               /* the data-parallel gradient reduction (dp.h) */
    struct eval eval;           /* the held-out loss (train.eval_every) */
    struct ranks ranks;         /* the ranks' busy time per step, side by side (stragglers) */
    struct loss_scaler scaler;  /* fp16: the dynamic loss scale */
    int nonfinite_streak;       /* steps in a row whose loss was not finite */
    struct trace trace;
    int64_t step;               /* optimizer steps done */
    int64_t tokens;
    double peak_flops;          /* MFU's reference: the sum over ranks, FLOP/s */
    char peak_text[400];        /* how it was found, and the measured rate beside it (rank 0) */
    char last_ckpt[4096];       /* the newest good checkpoint: written or restarted from ("" if none) */
    int64_t saved_step;         /* the step of the checkpoint written last (-1: none this run) */
    struct ckpt_async async;    /* io.async_checkpoint: the checkpoint being written in the background */
    int64_t failed_step;        /* the step of the checkpoint that failed (checkpoint_failed) */
    double ckpt_seconds;        /* the longest checkpoint so far (a background one: snapshot to seal) */
    int io_stop;                /* metrics.h5 cannot be written, or the disk is nearly full: stop (status 1) */
    char io_why[512];           /* why (rank 0) */
    double ckpt_bytes;          /* about the size of a checkpoint file (ckpt_file_bytes) */
    double t_start;             /* wtime() when training began (the progress line's elapsed time) */
    unsigned long long *allocated; /* rank 0: [world x 4] the bytes each rank allocated (plan_allocated) */
    size_t planned_peak;        /* this rank's peak memory as planned (plan_check) */
};

static void fail_collective(const struct grid *g, int failed, const char *what, const char *hint)
{
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", what);
    if (mpi_agree_error(g->world_comm, failed, msg, sizeof msg) != 0) die_all(hint, "%s", msg);
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[CONFIG_STRLEN];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(buf, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static void make_run_dir(const struct run *r)
{
    char msg[1024] = "";
    int failed = 0;
    if (r->g->rank == 0 && make_dirs(r->cfg->io.run_dir) != 0) {
        snprintf(msg, sizeof msg, "cannot create run directory '%s': %s", r->cfg->io.run_dir, strerror(errno));
        failed = 1;
    }
    fail_collective(r->g, failed, msg, "set io.run_dir to a writable directory");
    /* one job per run directory, before anything in it is read or written */
    char note[1024] = "";
    failed = r->g->rank == 0 && runlock_take(r->cfg->io.run_dir, note, sizeof note, msg, sizeof msg) != 0;
    fail_collective(r->g, failed, msg, "wait for that job, or choose another io.run_dir; if the job is gone (on "
                                       "another host), remove the lock file");
    if (note[0]) log_warn("%s", note);
}

static void open_data(struct run *r)
{
    struct deck_error err;
    memset(&err, 0, sizeof err);
    const struct model_dims *d = &r->model.d;
    r->data = data_open(r->cfg, d->V, d->T, &err);
    char msg[4096] = "";
    if (!r->data) {
        FILE *f = fmemopen(msg, sizeof msg - 1, "w");
        if (f) {
            config_error_print(f, &err);
            fclose(f);
        }
    }
    /* config_error_print already carries the hint; print it verbatim */
    if (mpi_agree_error(r->g->world_comm, r->data == NULL, msg, sizeof msg) != 0) {
        if (r->g->rank == 0) fputs(msg, stderr);
        exit_all(EXIT_ERROR);
    }
}

/* The run directory follows the run's lineage (lineage.h).  Restarted from
 * `path` (loaded): a checkpoint of this directory's lineage becomes its
 * newest, and the later ones, abandoned, are moved aside (never deleted); a
 * checkpoint from elsewhere starts the manifest anew.  A fresh start in a
 * directory that holds another run's output is refused, unless
 * io.overwrite or restart = 'auto' (which found nothing to resume: a job
 * killed before its first checkpoint) asks for it: that output is moved
 * aside into run_dir/superseded.N/.  Rank 0 works; the error is agreed. */
static void settle_run_dir(struct run *r, const char *path, int loaded)
{
    const struct config *cfg = r->cfg;
    const char *dir = cfg->io.run_dir;
    static struct lineage l;
    char msg[4096] = "", what[256] = "", aside[4200] = "";
    int failed = 0;
    if (r->g->rank == 0 && loaded) {
        char pd[4096];
        snprintf(pd, sizeof pd, "%s", path);
        char *slash = strrchr(pd, '/');
        const char *base = slash ? path + (slash - pd) + 1 : path;
        if (slash) *slash = '\0'; else snprintf(pd, sizeof pd, ".");
        long long s;
        char tail[8];
        struct stat a, b; /* the same directory, however it is spelled */
        int here = stat(pd, &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino &&
                   sscanf(base, "ckpt_%lld.h5%7s", &s, tail) == 1;
        if (lineage_read(dir, &l, msg, sizeof msg) != 0) l.n = 0; /* damaged: start it anew */
        msg[0] = '\0';
        int at = here ? lineage_find(&l, s) : -1;
        for (int i = at + 1; at >= 0 && i < l.n && !failed; i++) {
            char name[64];
            snprintf(name, sizeof name, "ckpt_%lld.h5", (long long)l.step[i]);
            if (!aside[0]) lineage_fresh_dir(dir, "abandoned", aside, sizeof aside);
            failed = lineage_move_aside(dir, aside, name, msg, sizeof msg) != 0;
            if (!failed) log_info("%s is later than the restart's checkpoint: moved to %s/\n", name, aside);
        }
        int was = l.n, present = l.present;
        if (at >= 0) l.n = at + 1;
        else if (here) l.step[0] = s, l.n = 1;
        else l.n = 0;
        /* (unchanged: not rewritten, so that a restart on a full disk reads and fails at its first real write) */
        if (!failed && (l.n != was || !present)) failed = lineage_write(dir, &l, msg, sizeof msg) != 0;
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
    if (any == 2)
        fail_collective(r->g, 1, msg, "continue it with io.restart = 'auto', choose another io.run_dir, or set "
                                      "io.overwrite = .true. to start over (its files are then moved aside, not "
                                      "deleted)");
    fail_collective(r->g, any != 0, msg, "check that io.run_dir is writable");
}

static void load_initial_state(struct run *r)
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
        if (loaded < 0)
            die_all("remove the broken checkpoints from io.run_dir to start fresh, or point io.restart at a good one",
                    "restart = 'auto': %s", err);
        if (!loaded) log_info("restart = 'auto': no checkpoint in %s, starting fresh\n", cfg->io.run_dir);
    } else if (cfg->io.restart[0]) {
        snprintf(path, sizeof path, "%s", cfg->io.restart);
        if (ckpt_load_all(path, &r->model, &r->optim, &st, r->g, err, sizeof err) != 0)
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
    } else if (cfg->io.init_from[0]) {
        const char *from = cfg->io.init_from;
        enum weights_kind kind = weights_kind_of(from);
        int nonfinite = cfg->io.allow_nonfinite_weights;
        int rc = kind == WEIGHTS_HF     ? hf_load(from, &r->model, r->g, nonfinite, err, sizeof err)
                 : kind == WEIGHTS_LLMC ? llmc_load(from, &r->model, r->g, nonfinite, err, sizeof err)
                                        : ckpt_load_model(from, &r->model, r->g, err, sizeof err);
        if (rc != 0)
            die_all("io.init_from names a triad checkpoint (HDF5 with /model), a Hugging Face model folder or an "
                    "llm.c GPT-2 checkpoint, of this deck's model (docs/formats.md)",
                    "init_from %s: %s", from, err);
        in_master = kind == WEIGHTS_HDF5 && r->model.shard_mem; /* (ckpt.c reads a ZeRO-3 model into its slice) */
        log_info("initial weights from %s (%s)\n", from,
                 kind == WEIGHTS_HF ? "Hugging Face folder" : kind == WEIGHTS_LLMC ? "llm.c checkpoint" : "HDF5");
    }
    settle_run_dir(r, path, loaded);
    int bad = r->g->rank == 0 && hf_keep_tokenizer(cfg, (int)cfg->model.vocab_size, err, sizeof err) != 0;
    if (mpi_agree_error(r->g->world_comm, bad, err, sizeof err))
        die_all("data.tokenizer names the model's tokenizer (docs/tokenizer.md)", "%s", err);
    if (!loaded && !in_master) optim_master_from_params(&r->optim, &r->model);
    optim_params_from_master(&r->optim, &r->model, &r->comm); /* bf16/fp16: round the compute copy */
}

/* Is there room in run_dir for a checkpoint and some more rows of
 * metrics.h5?  HDF5 1.10 does not survive a write that fails for lack of
 * space (the library crashes in its shutdown, and a collective close can
 * hang), so the run stops while a checkpoint still fits.  Rank 0; 1 if
 * there is, else 0 with the figures in why. */
static int disk_has_room(const struct run *r, char *why, size_t len)
{
    struct statvfs fs;
    double need = r->ckpt_bytes + (256 << 10);
    if (r->async.running && !r->async.reserved) need += r->ckpt_bytes; /* (the one being written fills in) */
    if (statvfs(r->cfg->io.run_dir, &fs) != 0) return 1; /* (cannot tell: the writes will) */
    double avail = (double)fs.f_bavail * (double)fs.f_frsize;
    if (avail >= need) return 1;
    snprintf(why, len, "the file system of %s has %.0f KiB free, less than a checkpoint and some metrics need "
             "(%.0f KiB)", r->cfg->io.run_dir, avail / 1024, need / 1024);
    return 0;
}

/* Rank 0 saw an I/O failure: say it once; the run stops at the step's end
 * (stop_agreed tells every rank). */
static void io_stop(struct run *r, const char *why, const char *then)
{
    if (r->io_stop) return;
    snprintf(r->io_why, sizeof r->io_why, "%s", why);
    fprintf(stderr, "error: %s%s\n", why, then);
    r->io_stop = 1;
}

/* MFU's reference.  On the CPU, the processor's nominal peak (cpu.h:
 * clock x flop/cycle of the SIMD path) for this rank's share of its node's
 * cores: its threads, scaled down when the node's ranks have more threads
 * than cores.  A device without a nominal figure: its measured rate.
 * train.peak_gflops overrides both.  The achievable rate (the start-up
 * sgemm, measured by all ranks at once so that ranks sharing cores add up
 * to their rate) is printed beside it unless the deck gives the peak. */
static void mfu_reference(struct run *r, const struct device *k, enum precision prec)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    double set = cfg->train.peak_gflops, measured = 0, nominal = 0, cores = 0;
    struct cpu_peak cp = {0};
    if (set <= 0) {
        MPI_CHECK(MPI_Barrier(g->world_comm));
        measured = k->peak_gflops(prec);
    }
    if (set <= 0 && !k->on_device) {
        MPI_Comm node;
        MPI_CHECK(MPI_Comm_split_type(g->world_comm, MPI_COMM_TYPE_SHARED, g->rank, MPI_INFO_NULL, &node));
        int threads = omp_get_max_threads(), node_threads = 0;
        MPI_CHECK(MPI_Allreduce(&threads, &node_threads, 1, MPI_INT, MPI_SUM, node));
        MPI_CHECK(MPI_Comm_free(&node));
        int avail = cpu_cores_available();
        cores = node_threads > avail ? (double)threads * avail / node_threads : threads;
        cpu_core_peak(isa_active(), &cp);
        nominal = cores * cp.ghz * cp.flops_per_cycle;
    }
    double mine = set > 0 ? set : nominal > 0 ? nominal : measured, sum = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, g->world_comm));
    r->peak_flops = sum * 1e9;
    if (set > 0)
        snprintf(r->peak_text, sizeof r->peak_text,
                 "%.1f GFLOP/s from the deck (train.peak_gflops); MFU is against it", set);
    else if (nominal > 0)
        snprintf(r->peak_text, sizeof r->peak_text,
                 "nominal %.1f GFLOP/s (%.2f cores x %s), measured sgemm %.1f GFLOP/s (%.0f%% of nominal); "
                 "MFU is against the nominal (train.peak_gflops overrides)",
                 nominal, cores, cp.how, measured, 100 * measured / nominal);
    else
        snprintf(r->peak_text, sizeof r->peak_text,
                 "measured %.1f GFLOP/s (no nominal figure for this device); MFU is against it "
                 "(train.peak_gflops overrides)", measured);
}

static void setup(struct run *r)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    comm_init(&r->comm, g);
    char why[256] = "";
    const struct device *k = device_for(cfg->train.device_id == TRAIN_DEVICE_cuda, cfg->diag.stage_through_host, why, sizeof why);
    if (!k) die_all("set train.device = 'cpu', or rebuild with ./configure --with-cuda", "%s", why);
    run_shape_init(&r->shape, cfg, g->world, device_staged(k));
    const struct run_shape *s = &r->shape;
    struct model_dims d;
    model_dims_init(&d, cfg, s, g);
    int nslots = pp_exec_init(&r->exec, pp_schedule_from_name(cfg->parallel.schedule), g, d.v, s->n_micro);
    if (cfg->io.trace) {
        MPI_CHECK(MPI_Barrier(g->world_comm)); /* a common time origin for every track */
        trace_init(&r->trace);
        r->exec.trace = &r->trace;
        r->comm.trace = &r->trace;
    }
    r->planned_peak = plan_check(cfg, g); /* refuse, with the plan's advice, what would not fit */
    struct device_options dopt = {.allow_shared = (int)cfg->train.share_gpus, .tf32 = (int)cfg->train.tf32};
    fail_collective(g, k->open && k->open(g->world_comm, &dopt, why, sizeof why) != 0, why,
                    "one GPU per rank: launch as many ranks per node as it has GPUs, or set train.share_gpus");
    model_init(&r->model, &d, k, s->micro_batch, nslots, r->exec.nrecv, (uint64_t)cfg->train.seed);
    r->ckpt_bytes = ckpt_file_bytes(&r->model);
    comm_use_device(&r->comm, k);
    optim_init(&r->optim, &r->model, cfg, s, g);
    if (cfg->io.async_checkpoint && cfg->io.checkpoint_every > 0) /* (its memory from the start, as planned) */
        ckpt_async_init(&r->async, &r->model, &r->optim, g);
    scaler_init(&r->scaler, cfg);
    dp_init(&r->dp, &r->model, &r->optim, &r->comm, s, cfg->parallel.bucket_mb);
    r->exec.dp = &r->dp;
    eval_init(&r->eval, cfg, s, g, d.V, d.T);
    ranks_init(&r->ranks, g->world);
    make_run_dir(r);
    open_data(r);
    load_initial_state(r);

    mfu_reference(r, k, d.prec);

    char msg[1024] = "";
    int failed = g->rank == 0 && !disk_has_room(r, msg, sizeof msg);
    fail_collective(g, failed, msg, "free space in io.run_dir (or point it elsewhere) before training");
    if (g->rank == 0 && metrics_open(&r->metrics, cfg->io.run_dir, r->deck, r->step,
                                     (int)cfg->io.metrics_flush, msg, sizeof msg) != 0)
        failed = 1;
    if (g->rank != 0) r->metrics.file = -1;
    fail_collective(g, failed, msg, "set io.run_dir to a writable directory");

    r->allocated = plan_allocated(&r->model, &r->optim, g); /* (rank 0: every rank's; NULL elsewhere) */
    unsigned long long state = r->allocated ? r->allocated[0] + r->allocated[1] + r->allocated[2] : 0;
    log_info("model: L=%d C=%d NH=%d T=%d V=%d (padded %d): %lld parameters, %.1f FLOP/token (x1e6)\n",
             d.L, d.C, d.NH, d.T, d.V, d.Vp, (long long)model_logical_params(&d),
             model_flops_per_token(&d) / 1e6);
    log_info("per rank: %d micro-batch(es) of %d sequences, %d in flight; memory %.1f MiB state (parameters, "
             "gradients, optimizer) + %.1f MiB activations (rank 0)\n", s->n_micro, s->micro_batch, nslots,
             state / 1048576.0, r->model.act_bytes / 1048576.0);
    if (r->allocated && metrics_memory(&r->metrics, r->allocated, g->world) != 0) io_stop(r, r->metrics.failed, "");
    if (g->pp > 1) {
        long num, den;
        double b = pp_bubble_formula(g->pp, d.v, s->n_micro, &num, &den);
        log_info("pipeline: %s, %d stages x %d chunk(s), %d layers per chunk; predicted bubble %ld/%ld = %.1f%%\n",
                 pp_schedule_name(r->exec.sched), g->pp, d.v, d.Lc, num, den, 100 * b);
    }
    log_info("device: %s%s\n", k->name,
             r->comm.staged  ? "; MPI through host buffers (no CUDA-aware MPI), no overlapped reduction"
             : k->on_device ? "; MPI on device buffers (CUDA-aware)"
                            : "");
    log_info("compute: %d OpenMP thread(s) per rank, matmul: %s\n", omp_get_max_threads(), k->matmul_name(d.prec));
    log_info("peak (rank 0): %s\n", r->peak_text);
    log_info("data: %s\n", data_describe(r->data));
    if (d.prec != PREC_FP32)
        log_info("precision: %s parameters and activations (round to nearest even), fp32 master weights, "
                 "optimizer state, gradient reductions and loss%s\n", precision_name(d.prec),
                 r->scaler.dynamic ? "; dynamic loss scale" : "");
}

/* Did any rank see a gradient that is not finite?  One consensus over the
 * whole grid: the lowest such world rank, or -1. */
static int overflow_consensus(struct run *r, int local)
{
    int first = local ? r->g->rank : INT_MAX;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, r->g->world_comm));
    return first == INT_MAX ? -1 : first;
}

/* One optimizer step: fills the step's metrics (loss: the mean over the
 * global batch).  A step whose gradients are not finite anywhere is skipped
 * on every rank. */
static void train_step(struct run *r, struct step_metrics *sm)
{
    const struct config *cfg = r->cfg;
    int64_t G = cfg->train.batch_size;
    double tokens = (double)G * r->model.d.T, scale = r->scaler.scale;

    if (cfg->diag.inject_nan_step == r->step + 1) diag_inject_nan(&r->model, cfg->diag.inject_tensor);
    model_zero_grad(&r->model);
    if (cfg->diag.slow_rank == r->g->rank) { /* testing aid: a straggler */
        timer_start(&r->timers, T_FORWARD);
        pause_for(cfg->diag.slow_seconds);
        timer_stop(&r->timers, T_FORWARD);
    }
    dp_begin(&r->dp);
    double loss = pp_exec_step(&r->exec, &r->model, &r->comm, r->data, r->step, G, (float)(scale / tokens),
                               &r->timers);
    timer_start(&r->timers, T_DP_REDUCE);
    dp_finish(&r->dp);
    if (r->g->pp > 1) comm_allreduce_sum_f64(&r->comm, CG_PP, &loss, 1); /* the last stage has it */
    comm_allreduce_sum_f64(&r->comm, CG_DP, &loss, 1);
    timer_stop(&r->timers, T_DP_REDUCE);

    timer_start(&r->timers, T_OPTIMIZER);
    double t0 = wtime();
    if (scale != 1.0) optim_unscale(&r->optim, &r->model, (float)(1.0 / scale));
    if (cfg->diag.inject_overflow_step == r->step + 1 && cfg->diag.inject_rank == r->g->rank) {
        float *gp = optim_some_grad(&r->optim, &r->model), inf = INFINITY;
        if (gp) r->model.k->to_device(gp, &inf, sizeof inf);
        log_warn("diag.inject_overflow_step: put an infinity into a gradient on world rank %d", r->g->rank);
    }
    int local_bad;
    sm->grad_norm = optim_grad_norm(&r->optim, &r->model, &r->comm, &local_bad);
    sm->lr = lr_at(cfg, r->step);
    sm->loss_scale = scale;
    int first_bad = overflow_consensus(r, local_bad);
    sm->skipped = first_bad >= 0;
    if (!sm->skipped) optim_update(&r->optim, &r->model, &r->comm, sm->grad_norm, sm->lr);
    if (sm->skipped) {
        log_info("step %lld: gradients not finite (first on world rank %d): update skipped on every rank\n",
                 (long long)r->step + 1, first_bad);
        if (isfinite(sm->grad_norm)) sm->grad_norm = INFINITY; /* this rank's groups summed only finite parts */
    }
    if (scaler_update(&r->scaler, sm->skipped))
        log_info("step %lld: loss scale %g -> %g\n", (long long)r->step + 1, scale, r->scaler.scale);
    timer_stop(&r->timers, T_OPTIMIZER);
    if (r->exec.trace) trace_add(r->exec.trace, TR_OPTIMIZER, -1, -1, t0, wtime());
    sm->loss = loss / tokens;
}

/* The held-out loss after this step (train.eval_every): into the step's
 * progress line and metrics.h5's /eval.  Collective. */
static void evaluate(struct run *r, struct step_metrics *sm)
{
    struct timers scratch; /* its forwards are not the step's */
    memset(&scratch, 0, sizeof scratch);
    double t0 = wtime();
    int64_t tokens;
    sm->val_loss = eval_run(&r->eval, &r->model, &r->comm, &scratch, &tokens);
    if (r->g->rank != 0) return;
    log_info("step %lld: validation loss %.6f over %lld tokens of %s (%.2f s)\n", (long long)r->step, sm->val_loss,
             (long long)tokens, r->cfg->data.val_path, wtime() - t0);
    if (metrics_eval(&r->metrics, r->step, sm->val_loss, tokens) != 0) io_stop(r, r->metrics.failed, "");
}

/* Measured pipeline idle (time waiting for messages) next to the schedule's
 * bubble.  Collective. */
static void report_bubble(const struct run *r)
{
    const struct grid *g = r->g;
    if (g->pp == 1) return;
    double idle = r->timers.total[T_STEP] > 0 ? r->timers.total[T_PP_WAIT] / r->timers.total[T_STEP] : 0;
    double mn, mx, sum;
    MPI_CHECK(MPI_Reduce(&idle, &mn, 1, MPI_DOUBLE, MPI_MIN, 0, g->world_comm));
    MPI_CHECK(MPI_Reduce(&idle, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, g->world_comm));
    MPI_CHECK(MPI_Reduce(&idle, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, g->world_comm));
    log_info("pipeline bubble: predicted %.1f%% (%s, pp %d, v %d, m %d); measured idle (waiting for "
             "activations/gradients) per rank min %.1f%% avg %.1f%% max %.1f%% of the step\n",
             100 * pp_bubble_formula(g->pp, r->model.d.v, r->shape.n_micro, NULL, NULL), pp_schedule_name(r->exec.sched),
             g->pp, r->model.d.v, r->shape.n_micro, 100 * mn, 100 * sum / g->world, 100 * mx);
}

/* A loss that is not finite arms the watch for the first non-finite forward
 * output; diag.nonfinite_steps of them in a row stop the run with that
 * tensor's name.  (The loss is the same on every rank.) */
static void watch_nonfinite(struct run *r, double loss)
{
    if (isfinite(loss)) {
        r->nonfinite_streak = 0;
        r->model.watch = 0;
        r->model.bad_order = LONG_MAX;
        return;
    }
    if (++r->nonfinite_streak == 1)
        log_info("step %lld: the loss is %g; watching for the first tensor that goes non-finite\n",
                 (long long)r->step, loss);
    if (r->nonfinite_streak >= r->cfg->diag.nonfinite_steps)
        diag_report_nonfinite(&r->model, r->g, r->step - r->nonfinite_streak + 1, r->step);
    r->model.watch = 1;
}

/* The checkpoint being written in the background, if there is one: wait for
 * it and seal it.  Returns 0 (sealed, or none), or -1 with the reason in
 * err (every rank alike; the earlier checkpoints are intact). */
static int async_checkpoint_end(struct run *r, char *err, size_t errlen)
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
static int save_checkpoint(struct run *r, int background, char *err, size_t errlen)
{
    if (async_checkpoint_end(r, err, errlen) != 0) { /* one at a time, in order */
        if (background) return -1;
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
    if (r->g->rank == 0 && metrics_flush(&r->metrics) != 0) io_stop(r, r->metrics.failed, "");
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
static int async_checkpoint_poll(struct run *r, char *err, size_t errlen)
{
    if (!r->async.running) return 0;
    int busy = !ckpt_async_done(&r->async);
    comm_allreduce_max_int(&r->comm, CG_WORLD, &busy, 1);
    return busy ? 0 : async_checkpoint_end(r, err, errlen);
}

/* A checkpoint that could not be written ends the run.  While stopping (a
 * signal or the time limit) with an earlier good checkpoint, the status is 3
 * all the same: a requeued job resumes from that one. */
static void checkpoint_failed(const struct run *r, int stopping, const char *err)
{
    if (stopping && r->last_ckpt[0]) {
        if (r->g->rank == 0)
            fprintf(stderr, "error: checkpoint at step %lld failed: %s\n", (long long)r->failed_step, err);
        log_info("stopped without a checkpoint of step %lld: the newest good one is %s, which a requeued "
                 "job resumes from (status 3)\n", (long long)r->failed_step, r->last_ckpt);
        exit_all(EXIT_STOPPED);
    }
    char hint[sizeof r->last_ckpt + 160];
    if (r->last_ckpt[0])
        snprintf(hint, sizeof hint, "check the free space and permissions of io.run_dir; the newest good "
                 "checkpoint, %s, is intact and restart = 'auto' resumes from it", r->last_ckpt);
    else
        snprintf(hint, sizeof hint, "check the free space and permissions of io.run_dir; no checkpoint of this "
                 "run was written before");
    die_all(hint, "checkpoint at step %lld failed: %s", (long long)r->failed_step, err);
}

/* Should all ranks stop now?  A signal, the time limit (io.max_seconds, with
 * room for two more steps and the checkpoints still to write: the one in
 * flight and the stop's own, each as long as the longest so far) or the
 * stop file <run_dir>/STOP, which rank 0 removes when it honours it.
 * Returns the reason, or NULL.  Collective. */
static const char *stop_agreed(struct run *r, double t_start, double avg_step)
{
    enum { SIGNAL = 1, TIME = 2, FILE_ = 4, METRICS = 8 };
    int want = stop_requested ? SIGNAL : 0;
    if (r->io_stop) want |= METRICS;
    double max_s = r->cfg->io.max_seconds;
    double margin = 2.0 * avg_step + r->ckpt_seconds * (r->async.running ? 2 : 1);
    if (max_s > 0 && wtime() - t_start + margin > max_s) want |= TIME;
    char stop[CONFIG_STRLEN + 8];
    snprintf(stop, sizeof stop, "%s/STOP", r->cfg->io.run_dir);
    if (r->g->rank == 0 && access(stop, F_OK) == 0 && unlink(stop) == 0) want |= FILE_;
    comm_allreduce_max_int(&r->comm, CG_WORLD, &want, 1); /* the bits are disjoint per cause; max keeps one */
    r->io_stop = (want & METRICS) != 0; /* (rank 0 saw it; now every rank knows) */
    return want & METRICS  ? "metrics.h5 cannot be written, or the disk is nearly full"
           : want & SIGNAL ? "signal"
           : want & TIME   ? "io.max_seconds reached"
           : want & FILE_  ? "stop file"
                           : NULL;
}

/* A stop asked for during start-up (the deck, the plan, a checkpoint read,
 * the probe): nothing new to write; status 3.  Collective. */
static void stop_if_asked_during_startup(const struct run *r)
{
    int asked = stop_requested ? 1 : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &asked, 1, MPI_INT, MPI_MAX, r->g->world_comm));
    if (!asked) return;
    if (r->last_ckpt[0])
        log_info("stop asked during start-up: nothing written; a requeued job resumes from %s (status 3)\n",
                 r->last_ckpt);
    else
        log_info("stop asked during start-up: nothing written; a requeued job starts from the beginning "
                 "(status 3)\n");
    exit_all(EXIT_STOPPED);
}

/* The step just done (dt seconds; avg: the mean so far): its rates and
 * traffic, metrics.h5's row (with the disk check at each flush), the
 * progress line. */
static void record_step(struct run *r, struct step_metrics *sm, double dt, double avg)
{
    const struct config *cfg = r->cfg;
    const int64_t step_tokens = cfg->train.batch_size * r->model.d.T;
    sm->step = r->step;
    sm->tokens_per_s = step_tokens / dt;
    sm->mfu = model_flops_per_token(&r->model.d) * step_tokens / dt / r->peak_flops;
    sm->step_time = dt;
    for (int cg = 0; cg < CG_COUNT; cg++)
        for (int op = 0; op < CO_COUNT; op++) {
            sm->comm_bytes[cg] += r->comm.step.bytes[cg][op];
            sm->comm_seconds += r->comm.step.seconds[cg][op];
        }
    if (r->g->rank != 0) return;
    timer_start(&r->timers, T_IO);
    char why[512];
    if (metrics_append(&r->metrics, sm) != 0) io_stop(r, r->metrics.failed, "");
    if (r->step % cfg->io.metrics_flush == 0 && !r->io_stop && !disk_has_room(r, why, sizeof why))
        io_stop(r, why, ": stopping while a checkpoint still fits");
    timer_stop(&r->timers, T_IO);
    if (r->step % cfg->io.log_every == 0 || r->step == cfg->train.steps)
        metrics_print_step(stdout, sm, cfg->train.steps, wtime() - r->t_start,
                           avg * (double)(cfg->train.steps - r->step));
}

/* The end of the run: the last checks and checkpoint, then the figures
 * (metrics.h5's timers and traffic, the summaries, the trace).  Returns the
 * exit status.  Collective. */
static int finish_run(struct run *r, int status, int64_t first_step)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    diag_check_consistency(&r->model, &r->comm, cfg, r->step);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &r->io_stop, 1, MPI_INT, MPI_MAX, g->world_comm));
    if (r->io_stop) status = EXIT_ERROR;
    char why_not[1024] = "";
    if (((status != EXIT_DONE || cfg->io.save_final) ? save_checkpoint(r, 0, why_not, sizeof why_not)
                                                   : async_checkpoint_end(r, why_not, sizeof why_not)) != 0)
        checkpoint_failed(r, status == EXIT_STOPPED, why_not);
    if (r->io_stop && g->rank == 0)
        fprintf(stderr, "error: the run stopped at step %lld: %s; the checkpoint of "
                "step %lld is written\n  hint: free space in io.run_dir and restart with io.restart = 'auto' (a "
                "damaged metrics.h5 is then moved aside)\n", (long long)r->step, r->io_why,
                (long long)r->step);

    ranks_peak_memory(&r->ranks, &r->comm, r->planned_peak, r->allocated, &r->metrics, stdout);
    double *all = g->rank == 0 ? xmalloc((size_t)g->world * NUM_TIMERS * sizeof(double)) : NULL;
    MPI_CHECK(MPI_Gather(r->timers.total, NUM_TIMERS, MPI_DOUBLE, all, NUM_TIMERS, MPI_DOUBLE, 0, g->world_comm));
    struct comm_counts totals;
    comm_totals(&r->comm, &totals);
    if (g->rank == 0 && metrics_close(&r->metrics, all, g->world, &totals) != 0) log_warn("closing metrics.h5 failed");
    free(all);
    timers_print_summary(&r->timers, g->world_comm, (int)(r->step - first_step), stdout);
    if (r->dp.strategy == DP_OVERLAP)
        log_info("overlapped dp reduction (rank 0): in flight during backward %.3f s, waited for after it %.3f s\n",
                 r->dp.hidden_s, r->dp.wait_s);
    if (r->model.d.cp > 1)
        log_info("ring attention (rank 0): messages in flight during block computation %.3f s, waited for after it "
                 "%.3f s\n", r->model.cp_time.hidden_s, r->model.cp_time.wait_s);
    report_bubble(r);
    if (cfg->io.trace) {
        char path[CONFIG_STRLEN + 16], err[256];
        snprintf(path, sizeof path, "%s/trace.json", cfg->io.run_dir);
        if (trace_write(&r->trace, g->world_comm, path, err, sizeof err) != 0) log_warn("%s", err);
        else log_info("timeline written to %s (open in ui.perfetto.dev or chrome://tracing)\n", path);
        trace_free(&r->trace);
    }
    comm_print_summary(&r->comm, stdout);
    fflush(stdout);
    return status;
}

static void teardown(struct run *r)
{
    flight_stop();
    ckpt_async_free(&r->async);
    data_close(r->data);
    eval_free(&r->eval);
    ranks_free(&r->ranks);
    free(r->allocated);
    pp_exec_free(&r->exec);
    dp_free(&r->dp);
    optim_free(&r->optim);
    const struct device *k = r->model.k;
    model_free(&r->model);
    comm_free(&r->comm);
    if (k->close) k->close();
}

int train_run(const struct config *cfg, const struct grid *g, const char *deck)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.g = g;
    r.deck = deck;
    r.saved_step = -1;
    train_catch_signals(); /* (main caught them already; a library may have reset them) */
    setup(&r);
    stop_if_asked_during_startup(&r);
    flight_start(cfg->io.run_dir, g->rank, g->world, cfg->diag.hang_timeout);

    const int64_t first_step = r.step;
    double t_start = wtime(), t_steps = 0;
    r.t_start = t_start;
    int status = EXIT_DONE;
    while (r.step < cfg->train.steps) {
        comm_step_begin(&r.comm);
        flight_step(r.step);
        timer_start(&r.timers, T_STEP);
        double t0 = wtime();
        struct step_metrics sm;
        memset(&sm, 0, sizeof sm);
        sm.val_loss = NAN;
        sm.straggler = -1;
        train_step(&r, &sm);
        double dt = wtime() - t0;
        timer_stop(&r.timers, T_STEP);
        flight_step(r.step); /* what follows the step (evaluation, checkpoint) has a timeout of its own */
        r.step++;
        if (r.eval.batches && (r.step % cfg->train.eval_every == 0 || r.step == cfg->train.steps))
            evaluate(&r, &sm);
        r.tokens += cfg->train.batch_size * r.model.d.T;
        t_steps += dt;
        double avg = t_steps / (double)(r.step - first_step);
        if (r.exec.trace) trace_add(r.exec.trace, TR_STEP, (int)r.step, -1, t0, t0 + dt);
        ranks_step(&r.ranks, &r.comm, r.model.k, &r.timers, &sm);
        record_step(&r, &sm, dt, avg);
        watch_nonfinite(&r, sm.loss);
        if (r.step == 1 && cfg->diag.corrupt_rank == g->rank) diag_corrupt(&r.model);
        if (cfg->diag.check_every > 0 && r.step % cfg->diag.check_every == 0 && r.step < cfg->train.steps)
            diag_check_consistency(&r.model, &r.comm, cfg, r.step);
        char err[1024] = "";
        if (async_checkpoint_poll(&r, err, sizeof err) != 0 ||
            (cfg->io.checkpoint_every > 0 && r.step % cfg->io.checkpoint_every == 0 && r.step < cfg->train.steps &&
             save_checkpoint(&r, 1, err, sizeof err) != 0))
            checkpoint_failed(&r, stop_agreed(&r, t_start, avg) != NULL && !r.io_stop, err);
        const char *why = r.step < cfg->train.steps ? stop_agreed(&r, t_start, avg) : NULL;
        if (why) {
            log_info("stopping at step %lld (%s); %s\n", (long long)r.step, why,
                     r.saved_step != r.step ? "writing a checkpoint"
                     : r.async.running      ? "its checkpoint is being written in the background"
                                            : "its checkpoint is written");
            status = r.io_stop ? EXIT_ERROR : EXIT_STOPPED;
            break;
        }
    }
    status = finish_run(&r, status, first_step);
    teardown(&r);
    return status;
}
