/* train.c -- the training loop (docs/design.md, "One training step") on this rank's part of the grid. */
#include "train.h"
#include "train_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binding.h"
#include "ckpt.h"
#include "comm.h"
#include "cpu.h"
#include "data.h"
#include "device_profile.h"
#include "diag.h"
#include "eval.h"
#include "flight.h"
#include "ranks.h"
#include "gemm.h"
#include "hash.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "moe.h"
#include "optim.h"
#include "pipeline_exec.h"
#include "plan.h"
#include "scaler.h"

/* Set by SIGUSR1/SIGTERM/SIGINT; read at step boundaries, agreed over all ranks. */
static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { stop_requested = sig; }

void train_catch_signals(void)
{
    signal(SIGUSR1, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    /* Ctrl-C where it reaches triad itself (a run without a launcher, srun):
     * the first stops as SIGTERM does, with a checkpoint, and gives the
     * handler back, so that a second ends the run at once.  Ignored where
     * the shell started triad in the background, as it was. */
    struct sigaction old, sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN && stop_requested != SIGINT)
        sigaction(SIGINT, &sa, NULL);
}

const volatile sig_atomic_t *train_stop_signal(void) { return &stop_requested; }

void train_release_signals(void)
{
    struct sigaction old;
    signal(SIGUSR1, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == on_stop_signal) signal(SIGINT, SIG_DFL);
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

/* MFU's reference.  On the CPU, the processor's nominal peak (cpu.h:
 * clock x flop/cycle of the SIMD path) for the cores this rank's threads
 * get (binding.h: its cores, shared with the node's ranks bound to them;
 * binding_check warns where threads share cores).  A device without a
 * nominal figure: its measured rate.  train.peak_gflops overrides both.
 * The achievable rate (the start-up sgemm, measured by all ranks at once so
 * that ranks sharing cores add up to their rate) is printed beside it
 * unless the deck gives the peak, and on the CPU measured again at the end
 * of the run (probe_again). */
static void mfu_reference(struct run *r, const struct device *k, enum precision prec)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    double set = cfg->train.peak_gflops, measured = 0, nominal = 0, cores = 0;
    struct cpu_peak cp = {0};
    struct binding b = {0};
    if (!k->on_device) binding_check(&b, g);
    if (set <= 0) {
        MPI_CHECK(MPI_Barrier(g->world_comm));
        measured = k->peak_gflops(prec);
        r->probe_gflops = measured;
    }
    if (set <= 0 && !k->on_device) {
        cores = b.cores_used;
        cpu_core_peak(isa_active(), prec == PREC_BF16, &cp);
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
                 "nominal %.1f GFLOP/s (%.2f cores x %s), measured %s %.1f GFLOP/s (%.0f%% of nominal); "
                 "MFU is against the nominal (train.peak_gflops overrides)",
                 nominal, cores, cp.how, prec == PREC_BF16 ? "bf16 gemm" : "sgemm", measured, 100 * measured / nominal);
    else
        snprintf(r->peak_text, sizeof r->peak_text,
                 "measured %.1f GFLOP/s (no nominal figure for this device); MFU is against it "
                 "(train.peak_gflops overrides)", measured);
}

/* parallel.schedule_file read alike by every rank: each reads it (a rank on
 * a node that does not see the file says so) and the FNV-1a of what they
 * read is compared, so that no rank builds another schedule than the one
 * the deck's check proved.  Collective over the world. */
static void agree_schedule_file(const char *path, const struct grid *g)
{
    if (!path) return;
    char msg[1024] = "";
    unsigned char buf[1 << 16];
    uint64_t h[2] = {FNV1A_INIT, 0};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        snprintf(msg, sizeof msg, "rank %d cannot read parallel.schedule_file = '%s' (%s)", g->rank, path,
                 strerror(errno));
    for (size_t n; fp && (n = fread(buf, 1, sizeof buf, fp)) > 0;) h[0] = fnv1a(h[0], buf, n);
    if (fp) fclose(fp);
    die_all_if(g->world_comm, !fp, msg, "put the schedule file where every node reads it (a shared file system)");
    h[1] = ~h[0]; /* (the largest of ~h is ~ the smallest h) */
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, h, 2, MPI_UINT64_T, MPI_MAX, g->world_comm));
    snprintf(msg, sizeof msg, "the ranks read different bytes from parallel.schedule_file = '%s'", path);
    die_all_if(g->world_comm, h[0] != ~h[1], msg, "every node must see the same file, unchanged while the run starts");
}

static void setup(struct run *r)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    comm_init(&r->comm, g);
    char why[1024] = "";
    const struct device *k = device_for(cfg->train.device_id == TRAIN_DEVICE_cuda, cfg->diag.stage_through_host, why, sizeof why);
    die_all_if(g->world_comm, !k, why, "the CUDA backend is loaded only for train.device = 'cuda' (docs/cuda.md, "
                                         "\"Loaded on demand\")");
    if (cfg->diag.profile_ops) k = device_profiled(k);
    run_shape_init(&r->shape, cfg, g->world, device_staged(k));
    const struct run_shape *s = &r->shape;
    agree_schedule_file(s->schedule_file, g);
    struct model_dims d;
    model_dims_init(&d, cfg, s, g);
    struct model_buffers nb = pp_exec_init(&r->exec, s->sched, s->schedule_file, g, d.v, s->n_micro);
    if (cfg->io.trace) {
        MPI_CHECK(MPI_Barrier(g->world_comm)); /* a common time origin for every track */
        trace_init(&r->trace);
        r->exec.trace = &r->trace;
        r->comm.trace = &r->trace;
    }
    r->planned_peak = plan_check(cfg, g); /* refuse, with the plan's advice, what would not fit */
    struct device_options dopt = {.allow_shared = (int)cfg->train.share_gpus, .tf32 = (int)cfg->train.tf32};
    die_all_if(g->world_comm, device_open(k, g->world_comm, &dopt, why, sizeof why) < 0, why,
                    DEVICE_OPEN_HINT);
    model_init(&r->model, &d, k, s->micro_batch, nb, (uint64_t)cfg->train.seed);
    if (cfg->diag.inject_nan_step > 0) diag_check_inject(&r->model, cfg->diag.inject_tensor); /* (not steps later) */
    r->ckpt_bytes = ckpt_file_bytes(&r->model);
    comm_use_device(&r->comm, k);
    optim_init(&r->optim, &r->model, cfg, s);
    if (cfg->io.async_checkpoint && cfg->io.checkpoint_every > 0) /* (its memory from the start, as planned) */
        die_all_if(g->world_comm, ckpt_async_init(&r->async, &r->model, &r->optim, g, why, sizeof why) != 0, why,
                   "give the ranks more memory (the plan counts the snapshot: triad plan DECK), or set "
                   "io.async_checkpoint = .false.");
    scaler_init(&r->scaler, cfg);
    dp_init(&r->dp, &r->model, &r->optim, &r->comm, s, cfg->parallel.bucket_mb);
    r->exec.dp = &r->dp;
    eval_init(&r->eval, cfg, s, g, d.V, d.T);
    if (g->rank == 0) eval_note_left_out(&r->eval, cfg, stdout, NULL);
    ranks_init(&r->ranks, g->world);
    train_open_run_dir(r);
    open_data(r);
    train_initial_state(r);

    mfu_reference(r, k, d.prec);

    char msg[1024] = "";
    int failed = g->rank == 0 && r->step < cfg->train.steps && train_disk_has_room(r, 0, msg, sizeof msg) != 1;
    die_all_if(g->world_comm, failed, msg, "free space in io.run_dir (or point it elsewhere) before training");
    int opened = g->rank == 0 ? metrics_open(&r->metrics, cfg->io.run_dir, r->deck, r->step,
                                             (int)cfg->io.metrics_flush, msg, sizeof msg) : 0;
    if (opened != 0) failed = 1;
    if (g->rank == 0 && !failed && d.E && metrics_moe(&r->metrics, d.L, d.E) != 0) {
        snprintf(msg, sizeof msg, "cannot add /metrics/moe_tokens to %s/metrics.h5", cfg->io.run_dir);
        failed = 1;
    }
    if (g->rank != 0) r->metrics.file = -1;
    die_all_if(g->world_comm, failed, msg,
               opened == -2 ? "close metrics.h5 in that program (readers of a running job set "
                              "HDF5_USE_FILE_LOCKING=FALSE, as tools/plot_metrics.py does), then start the job again"
                            : "set io.run_dir to a writable directory");
    if (d.E) r->moe_sums = xcalloc(5 + (size_t)d.L * d.E, sizeof *r->moe_sums);

    r->allocated = plan_allocated(&r->model, &r->optim, g); /* (rank 0: every rank's; NULL elsewhere) */
    unsigned long long state = r->allocated ? r->allocated[0] + r->allocated[1] + r->allocated[2] : 0;
    log_info("model: L=%d C=%d NH=%d T=%d V=%d (padded %d): %lld parameters, %.1f FLOP/token (x1e6)\n",
             d.L, d.C, d.NH, d.T, d.V, d.Vp, (long long)model_logical_params(&d),
             model_flops_per_token(&d) / 1e6);
    char wait[64] = "";
    if (r->model.nwslots) snprintf(wait, sizeof wait, ", %d weight gradient(s) pending", r->model.nwslots);
    log_info("per rank: %d micro-batch(es) of %d sequences, %d in flight%s; memory %.1f MiB state (parameters, "
             "gradients, optimizer) + %.1f MiB activations (rank 0)\n", s->n_micro, s->micro_batch, r->model.nslots,
             wait, state / 1048576.0, r->model.act_bytes / 1048576.0);
    if (r->allocated && metrics_memory(&r->metrics, r->allocated, g->world) != 0) train_io_stop(r, r->metrics.failed, "");
    if (g->pp > 1) {
        long num, den;
        double b = pp_bubble_predicted(s->sched, s->schedule_file, g->pp, d.v, s->n_micro, &num, &den, NULL);
        log_info("pipeline: %s, %d stages x %d chunk(s), %d layers per chunk; predicted bubble %ld/%ld = %.1f%%\n",
                 cfg->parallel.schedule, g->pp, d.v, d.Lc, num, den, 100 * b);
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
                 "optimizer state, gradient reductions and loss%s\n", cfg->train.precision,
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

/* A mixture of experts' statistics of the step (moe.h) into sm, summed over
 * the ranks: each layer's on the stage holding it, each micro-batch's on its
 * replica and its positions on their cp rank (dp's communicator spans dp x
 * cp), the tp ranks' alike (tp rank 0's counted).  Collective. */
static void moe_step_stats(struct run *r, struct step_metrics *sm)
{
    const struct model_dims *d = &r->model.d;
    if (!d->E) return;
    const struct moe_stats *st = &r->model.moe->stats;
    size_t n = 5 + (size_t)d->L * d->E;
    double *v = r->moe_sums;
    memset(v, 0, n * sizeof *v);
    if (d->tp_rank == 0) { /* (the losses over a micro-batch's tokens: alike on its cp ranks, counted on the first) */
        if (d->cp_rank == 0) v[0] = st->aux, v[1] = st->z, v[2] = st->layers;
        v[3] = st->slots, v[4] = st->dropped;
        for (int j = 0; j < d->Lp; j++)
            for (int e = 0; e < d->E; e++)
                v[5 + (size_t)model_global_layer(d, j) * d->E + e] = st->tokens[(size_t)j * d->E + e];
    }
    if (d->tp > 1) comm_allreduce_sum_f64(&r->comm, CG_TP, v, n);
    if (r->g->pp > 1) comm_allreduce_sum_f64(&r->comm, CG_PP, v, n);
    comm_allreduce_sum_f64(&r->comm, CG_DP, v, n);
    sm->moe_aux = v[2] > 0 ? v[0] / v[2] : 0;
    sm->moe_z = v[2] > 0 ? v[1] / v[2] : 0;
    sm->moe_dropped = v[3] > 0 ? v[4] / v[3] : 0;
    sm->moe_tokens = v + 5;
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
    moe_stats_reset(&r->model);
    if (cfg->diag.slow_rank == r->g->rank) { /* testing aid: a straggler */
        timer_start(&r->timers, T_FORWARD);
        pause_for(cfg->diag.slow_seconds);
        timer_stop(&r->timers, T_FORWARD);
    }
    dp_begin(&r->dp);
    uint64_t start = (uint64_t)r->tokens / (uint64_t)r->model.d.T; /* the samples consumed so far */
    double loss = pp_exec_step(&r->exec, &r->model, &r->comm, r->data, start, G, (float)(scale / tokens),
                               &r->timers);
    timer_start(&r->timers, T_DP_REDUCE);
    dp_finish(&r->dp);
    if (r->g->pp > 1) comm_allreduce_sum_f64(&r->comm, CG_PP, &loss, 1); /* the last stage has it */
    comm_allreduce_sum_f64(&r->comm, CG_DP, &loss, 1);
    moe_step_stats(r, sm);
    timer_stop(&r->timers, T_DP_REDUCE);

    timer_start(&r->timers, T_OPTIMIZER);
    double t0 = wtime();
    if (scale != 1.0) optim_unscale(&r->optim, &r->model, (float)(1.0 / scale));
    if (cfg->diag.inject_overflow_step == r->step + 1 && cfg->diag.inject_rank == r->g->rank) {
        float *gp = optim_some_grad(&r->optim, &r->model), inf = INFINITY;
        if (gp) {
            r->model.k->to_device(gp, &inf, sizeof inf);
            log_warn("diag.inject_overflow_step: put an infinity into a gradient on world rank %d", r->g->rank);
        } else
            log_warn("diag.inject_overflow_step: world rank %d holds no gradient its norm counts (a stage of dense "
                      "layers alone on an ep rank other than 0): nothing injected; choose another diag.inject_rank",
                      r->g->rank);
    }
    int local_bad;
    sm->grad_norm = optim_grad_norm(&r->optim, &r->model, &r->comm, &local_bad, &r->grad_ss);
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
    /* fp16: gradients that overflow at the smallest scale cannot be helped by
     * backing off; every update would be skipped to the end (a loss that is
     * not finite is watch_nonfinite's) */
    int floor = sm->skipped && r->scaler.dynamic && scale <= r->scaler.min_scale && isfinite(loss);
    r->floor_streak = floor ? r->floor_streak + 1 : 0;
    if (r->floor_streak >= cfg->diag.nonfinite_steps)
        die_all("lower train.loss_scale_min (every gradient is multiplied by the scale), lower train.lr, or train in "
                "bf16 (fp32's range); the checkpoints in io.run_dir are intact",
                "steps %lld-%lld: the gradients were not finite at the smallest loss scale, train.loss_scale_min = %g, "
                "%d steps in a row (diag.nonfinite_steps): fp16 cannot hold them, and every update was skipped",
                (long long)r->step + 2 - r->floor_streak, (long long)r->step + 1, r->scaler.min_scale,
                r->floor_streak);
    if (scaler_update(&r->scaler, sm->skipped))
        log_info("step %lld: loss scale %g -> %g\n", (long long)r->step + 1, scale, r->scaler.scale);
    timer_stop(&r->timers, T_OPTIMIZER);
    if (r->exec.trace) trace_add(r->exec.trace, TR_OPTIMIZER, -1, -1, t0, wtime());
    sm->loss = loss / tokens;
}

/* The stop request an evaluation after this step gives itself up for: none
 * at the last step, where a stop ends nothing more (the evaluation, the
 * run's last, runs to its end). */
static const volatile sig_atomic_t *evaluation_stop(const struct run *r)
{
    return r->step < r->cfg->train.steps ? &stop_requested : NULL;
}

/* The held-out loss after this step (train.eval_every): into the step's
 * progress line and metrics.h5's /eval.  Collective. */
static void evaluate(struct run *r, struct step_metrics *sm)
{
    struct timers scratch; /* its forwards are not the step's */
    memset(&scratch, 0, sizeof scratch);
    double t0 = wtime();
    int64_t tokens;
    sm->val_loss = eval_run(&r->eval, &r->model, &r->comm, &scratch, &tokens, evaluation_stop(r));
    if (r->g->rank != 0) return;
    if (tokens == 0) { /* (the step's end stops the run) */
        log_info("step %lld: validation given up after %.2f s: a stop was asked (no /eval row)\n",
                 (long long)r->step, wtime() - t0);
        return;
    }
    log_info("step %lld: validation loss %.6f over %lld tokens of %s (%.2f s)\n", (long long)r->step, sm->val_loss,
             (long long)tokens, r->cfg->data.val_path, wtime() - t0);
    if (metrics_eval(&r->metrics, r->step, sm->val_loss, tokens) != 0) train_io_stop(r, r->metrics.failed, "");
}

/* The multiple-choice tasks after this step (train.mc_eval_every): into
 * the log, the step's progress line and metrics.h5's /eval/<task>.
 * Collective. */
static void evaluate_tasks(struct run *r, struct step_metrics *sm)
{
    double t0 = wtime();
    if (mc_eval_run(&r->mc, &r->model, &r->comm, NULL, evaluation_stop(r))) {
        if (r->g->rank == 0) /* (the step's end stops the run) */
            log_info("step %lld: tasks given up after %.2f s: a stop was asked (no /eval/<task> rows)\n",
                     (long long)r->step, wtime() - t0);
        return;
    }
    sm->tasks = r->mc.score;
    sm->ntasks = r->mc.ntask;
    if (r->g->rank != 0) return;
    for (int i = 0; i < r->mc.ntask; i++) {
        const struct task_score *t = &r->mc.score[i];
        log_info("step %lld: task %s: acc %.6f, acc_norm %.6f over %lld examples (%.2f s)\n", (long long)r->step,
                 t->name, t->acc, t->acc_norm, (long long)t->examples, wtime() - t0);
        if (metrics_task(&r->metrics, r->step, t) != 0) train_io_stop(r, r->metrics.failed, "");
    }
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
             100 * pp_bubble_predicted(r->shape.sched, r->shape.schedule_file, g->pp, r->model.d.v, r->shape.n_micro,
                                       NULL, NULL, NULL),
             r->cfg->parallel.schedule,
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
    if (metrics_append(&r->metrics, sm) != 0) train_io_stop(r, r->metrics.failed, "");
    int room = r->step % cfg->io.metrics_flush == 0 || train_checkpoint_due(r) ? train_disk_has_room(r, 1, why, sizeof why)
                                                                               : 1;
    if (room != 1 && !r->io_stop)
        train_io_stop(r, why, room == 0 ? ": stopping while a checkpoint still fits"
                                        : ": stopping (the disk filled faster than the run checked: no checkpoint of "
                                          "this step fits)");
    timer_stop(&r->timers, T_IO);
    if (r->step % cfg->io.log_every == 0 || r->step == cfg->train.steps)
        metrics_print_step(stdout, sm, cfg->train.steps, wtime() - r->t_start,
                           avg * (double)(cfg->train.steps - r->step));
}

/* The start-up product rate measured again after the last step (all ranks
 * at once, as at start-up), rank 0's printed beside its start-up one: how
 * far the machine's speed moved during the run (its clock, other work on
 * its cores), and what the steps' rate is to be held against
 * (bench/bench.sh: the mean of the two).  Collective. */
static void probe_again(const struct run *r)
{
    if (r->cfg->train.peak_gflops > 0 || r->model.k->on_device) return; /* (every rank alike) */
    MPI_CHECK(MPI_Barrier(r->g->world_comm));
    double end = r->model.k->peak_gflops(r->model.d.prec);
    if (end > 0 && r->probe_gflops > 0) /* (0: the probe's matrices could not be allocated) */
        log_info("%s at the end of the run (rank 0): %.1f GFLOP/s, at start-up %.1f (%+.1f%%)\n",
                 r->model.d.prec == PREC_BF16 ? "bf16 gemm" : "sgemm", end, r->probe_gflops,
                 100 * (end / r->probe_gflops - 1));
}

/* The end of the run: the last checks and checkpoint, then the figures
 * (metrics.h5's timers and traffic, the summaries, the trace).  Returns the
 * exit status.  Collective. */
static int finish_run(struct run *r, int status, int64_t first_step)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    diag_check_consistency(&r->model, &r->comm, cfg, r->step, r->grad_ss);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &r->io_stop, 1, MPI_INT, MPI_MAX, g->world_comm));
    if (r->io_stop) status = EXIT_ERROR;
    char why_not[1024] = "";
    if (((status != EXIT_DONE || cfg->io.save_final) ? train_save_checkpoint(r, 0, why_not, sizeof why_not)
                                                   : train_async_checkpoint_end(r, why_not, sizeof why_not)) != 0)
        train_checkpoint_failed(r, status == EXIT_STOPPED, why_not);
    if (r->io_stop && g->rank == 0)
        fprintf(stderr, "error: the run stopped at step %lld: %s; the checkpoint of "
                "step %lld is written\n  hint: free space in io.run_dir (or check its file system: a write failed) and "
                "restart with io.restart = 'auto' (a damaged metrics.h5 is then moved aside)\n", (long long)r->step,
                r->io_why, (long long)r->step);

    ranks_peak_memory(&r->ranks, &r->comm, r->planned_peak, r->allocated, &r->metrics, stdout);
    double *all = g->rank == 0 ? xmalloc((size_t)g->world * NUM_TIMERS * sizeof(double)) : NULL;
    MPI_CHECK(MPI_Gather(r->timers.total, NUM_TIMERS, MPI_DOUBLE, all, NUM_TIMERS, MPI_DOUBLE, 0, g->world_comm));
    struct comm_counts totals;
    comm_totals(&r->comm, &totals);
    if (g->rank == 0 && metrics_close(&r->metrics, all, g->world, &totals) != 0)
        log_warn("%s\n", r->metrics.failed[0] ? r->metrics.failed : "closing metrics.h5 failed");
    free(all);
    timers_print_summary(&r->timers, g->world_comm, (int)(r->step - first_step), stdout);
    probe_again(r);
    if (cfg->diag.profile_ops)
        device_profile_print(g->world_comm, r->timers.total[T_STEP], (int)(r->step - first_step), stdout);
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
    mc_eval_free(&r->mc);
    ranks_free(&r->ranks);
    free(r->allocated);
    free(r->moe_sums);
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
        device_profile_count(1);
        double t0 = wtime();
        struct step_metrics sm;
        memset(&sm, 0, sizeof sm);
        sm.val_loss = NAN;
        sm.straggler = -1;
        train_step(&r, &sm);
        double dt = wtime() - t0;
        device_profile_count(0);
        timer_stop(&r.timers, T_STEP);
        flight_step(r.step); /* what follows the step (evaluation, checkpoint) has a timeout of its own */
        flight_action(-1, 0, 0);
        r.step++;
        if (r.eval.batches && (r.step % cfg->train.eval_every == 0 || r.step == cfg->train.steps))
            evaluate(&r, &sm);
        if (r.mc.ntask && (r.step % cfg->train.mc_eval_every == 0 || r.step == cfg->train.steps))
            evaluate_tasks(&r, &sm);
        r.tokens += cfg->train.batch_size * r.model.d.T;
        t_steps += dt;
        double avg = t_steps / (double)(r.step - first_step);
        if (r.exec.trace) trace_add(r.exec.trace, TR_STEP, (int)r.step, -1, t0, t0 + dt);
        ranks_step(&r.ranks, &r.comm, r.model.k, &r.timers, &sm);
        record_step(&r, &sm, dt, avg);
        watch_nonfinite(&r, sm.loss);
        if (r.step == 1 && cfg->diag.corrupt_rank == g->rank) diag_corrupt(&r.model);
        if (cfg->diag.check_every > 0 && r.step % cfg->diag.check_every == 0 && r.step < cfg->train.steps)
            diag_check_consistency(&r.model, &r.comm, cfg, r.step, r.grad_ss);
        char err[1024] = "";
        if (train_async_checkpoint_poll(&r, err, sizeof err) != 0 ||
            (train_checkpoint_due(&r) && train_save_checkpoint(&r, 1, err, sizeof err) != 0))
            train_checkpoint_failed(&r, stop_agreed(&r, t_start, avg) != NULL && !r.io_stop, err);
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
