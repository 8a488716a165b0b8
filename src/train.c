/* train.c -- the training loop (DESIGN.md §2) on this rank's part of the grid. */
#include "train.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt.h"
#include "comm.h"
#include "data.h"
#include "diag.h"
#include "gemm.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"

/* Set by SIGUSR1/SIGTERM; read at step boundaries, agreed over all ranks. */
static volatile sig_atomic_t stop_requested = 0;
static void on_stop_signal(int sig) { stop_requested = sig; }

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
    int micro_batch, n_micro;   /* sequences per micro-batch, micro-batches per step */
    int32_t *inputs, *targets;  /* (micro_batch, T) */
    int64_t step;               /* optimizer steps done */
    int64_t tokens;
    double peak_flops;          /* sum over ranks, FLOP/s */
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
}

static void open_data(struct run *r)
{
    struct config_error err;
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

static void load_initial_state(struct run *r)
{
    const struct config *cfg = r->cfg;
    char err[1024] = "", path[4096] = "";
    if (cfg->io.restart[0]) {
        if (config_is(cfg->io.restart, "auto")) {
            if (!ckpt_find_latest(cfg->io.run_dir, path, sizeof path, r->g)) {
                log_info("restart = 'auto': no checkpoint in %s, starting fresh\n", cfg->io.run_dir);
                path[0] = 0;
            }
        } else {
            snprintf(path, sizeof path, "%s", cfg->io.restart);
        }
        if (path[0]) {
            struct ckpt_state st = {0, 0};
            if (ckpt_load_all(path, &r->model, &r->optim, &st, r->g, err, sizeof err) != 0)
                die_all("check io.restart, or remove it to start fresh", "restart from %s: %s", path, err);
            r->step = st.step;
            r->tokens = st.tokens;
            log_info("restarted from %s at step %lld\n", path, (long long)r->step);
            return;
        }
    }
    if (cfg->io.init_from[0]) {
        if (ckpt_load_model(cfg->io.init_from, &r->model, r->g, err, sizeof err) != 0)
            die_all("io.init_from must name an HDF5 file with a /model group of this model's shape",
                    "init_from %s: %s", cfg->io.init_from, err);
        log_info("initial weights from %s\n", cfg->io.init_from);
    }
}

static void setup(struct run *r)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    comm_init(&r->comm, g);
    struct model_dims d;
    model_dims_init(&d, cfg, g);
    r->micro_batch = config_micro_batch(cfg, g->world);
    r->n_micro = (int)(cfg->train.batch_size / ((int64_t)g->dp * r->micro_batch));
    model_init(&r->model, &d, r->micro_batch, (uint64_t)cfg->train.seed);
    optim_init(&r->optim, &r->model, cfg);
    r->inputs = xmalloc((size_t)r->micro_batch * d.T * sizeof(int32_t));
    r->targets = xmalloc((size_t)r->micro_batch * d.T * sizeof(int32_t));
    make_run_dir(r);
    open_data(r);
    load_initial_state(r);

    double peak = cfg->train.peak_gflops > 0 ? cfg->train.peak_gflops : gemm_peak_gflops();
    double sum = 0;
    MPI_CHECK(MPI_Allreduce(&peak, &sum, 1, MPI_DOUBLE, MPI_SUM, g->world_comm));
    r->peak_flops = sum * 1e9;

    char msg[1024] = "";
    int failed = 0;
    if (g->rank == 0 && metrics_open(&r->metrics, cfg->io.run_dir, r->deck, r->step,
                                     (int)cfg->io.metrics_flush, msg, sizeof msg) != 0)
        failed = 1;
    if (g->rank != 0) r->metrics.file = -1;
    fail_collective(g, failed, msg, "set io.run_dir to a writable directory");

    size_t state = r->model.num_params * sizeof(float) * 4; /* params, grads, m, v */
    log_info("model: L=%d C=%d NH=%d T=%d V=%d (padded %d): %lld parameters, %.1f FLOP/token (x1e6)\n",
             d.L, d.C, d.NH, d.T, d.V, d.Vp, (long long)model_logical_params(&d),
             model_flops_per_token(&d) / 1e6);
    log_info("per rank: %d micro-batch(es) of %d sequences; memory %.1f MiB state + %.1f MiB activations\n",
             r->n_micro, r->micro_batch, state / 1048576.0, r->model.act.bytes / 1048576.0);
    log_info("compute: %d OpenMP thread(s) per rank, matmul: %s, peak %.1f GFLOP/s per rank%s\n",
             omp_get_max_threads(), gemm_backend_name(), peak,
             cfg->train.peak_gflops > 0 ? " (from the deck)" : " (measured)");
    log_info("data: %s\n", data_describe(r->data));
}

/* One optimizer step; returns the mean loss over the global batch. */
static double train_step(struct run *r, double *grad_norm, double *lr)
{
    const struct config *cfg = r->cfg;
    const struct grid *g = r->g;
    int T = r->model.d.T;
    int64_t G = cfg->train.batch_size;
    float dloss = (float)(1.0 / ((double)G * T));
    double loss = 0;

    model_zero_grad(&r->model);
    for (int mb = 0; mb < r->n_micro; mb++) {
        timer_start(&r->timers, T_DATA);
        uint64_t first = data_first_sample(r->step, G, g->dp, g->dp_rank, r->micro_batch, mb);
        data_batch(r->data, first, r->micro_batch, r->inputs, r->targets);
        timer_stop(&r->timers, T_DATA);
        timer_start(&r->timers, T_FORWARD);
        loss += model_forward(&r->model, &r->comm, r->inputs, r->targets);
        timer_stop(&r->timers, T_FORWARD);
        timer_start(&r->timers, T_BACKWARD);
        model_backward(&r->model, &r->comm, r->inputs, r->targets, dloss);
        timer_stop(&r->timers, T_BACKWARD);
    }
    timer_start(&r->timers, T_DP_REDUCE);
    optim_reduce_grads(&r->model, &r->comm);
    comm_allreduce_sum_f64(&r->comm, CG_DP, &loss, 1);
    timer_stop(&r->timers, T_DP_REDUCE);

    timer_start(&r->timers, T_OPTIMIZER);
    *grad_norm = optim_grad_norm(&r->model, &r->comm);
    *lr = lr_at(cfg, r->step);
    optim_update(&r->optim, &r->model, *grad_norm, *lr, r->step + 1);
    timer_stop(&r->timers, T_OPTIMIZER);
    return loss / ((double)G * T);
}

static void save_checkpoint(struct run *r)
{
    char err[1024] = "";
    struct ckpt_state st = {r->step, r->tokens};
    timer_start(&r->timers, T_IO);
    if (ckpt_save(r->cfg->io.run_dir, &st, &r->model, &r->optim, r->deck, r->g,
                  (int)r->cfg->io.keep_checkpoints, err, sizeof err) != 0)
        die_all("check the free space and permissions of io.run_dir; earlier checkpoints are intact",
                "checkpoint at step %lld failed: %s", (long long)r->step, err);
    timer_stop(&r->timers, T_IO);
    log_info("checkpoint %s/ckpt_%lld.h5 written\n", r->cfg->io.run_dir, (long long)r->step);
}

/* Should all ranks stop now (signal or time limit)?  Collective. */
static int stop_agreed(struct run *r, double t_start, double avg_step)
{
    int want = stop_requested != 0;
    double max_s = r->cfg->io.max_seconds;
    if (max_s > 0 && wtime() - t_start + 2.0 * avg_step > max_s) want = 1;
    comm_allreduce_max_int(&r->comm, CG_WORLD, &want, 1);
    return want;
}

int train_run(const struct config *cfg, const struct grid *g, const char *deck)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.g = g;
    r.deck = deck;
    setup(&r);
    signal(SIGUSR1, on_stop_signal);
    signal(SIGTERM, on_stop_signal);

    const double flops_tok = model_flops_per_token(&r.model.d);
    const int64_t step_tokens = cfg->train.batch_size * r.model.d.T;
    const int64_t first_step = r.step;
    double t_start = wtime(), t_steps = 0;
    int status = EXIT_DONE;
    while (r.step < cfg->train.steps) {
        comm_step_begin(&r.comm);
        timer_start(&r.timers, T_STEP);
        double t0 = wtime(), gnorm, lr;
        double loss = train_step(&r, &gnorm, &lr);
        double dt = wtime() - t0;
        timer_stop(&r.timers, T_STEP);
        r.step++;
        r.tokens += step_tokens;
        t_steps += dt;
        if (!isfinite(loss))
            die_all("lower train.lr or raise train.warmup_steps; check the data",
                    "the loss is %f at step %lld", loss, (long long)r.step);

        struct step_metrics sm = {r.step, loss, lr, gnorm, 1.0, step_tokens / dt,
                                  flops_tok * step_tokens / dt / r.peak_flops, dt, 0, {0}, 0};
        for (int cg = 0; cg < CG_COUNT; cg++)
            for (int op = 0; op < CO_COUNT; op++) {
                sm.comm_bytes[cg] += r.comm.step.bytes[cg][op];
                sm.comm_seconds += r.comm.step.seconds[cg][op];
            }
        double avg = t_steps / (double)(r.step - first_step);
        if (g->rank == 0) {
            timer_start(&r.timers, T_IO);
            if (metrics_append(&r.metrics, &sm) != 0) log_warn("writing metrics.h5 failed at step %lld", (long long)r.step);
            timer_stop(&r.timers, T_IO);
            if (r.step % cfg->io.log_every == 0 || r.step == cfg->train.steps)
                metrics_print_step(stdout, &sm, cfg->train.steps, avg * (double)(cfg->train.steps - r.step));
        }
        if (r.step == 1 && cfg->diag.corrupt_rank == g->rank) diag_corrupt(&r.model);
        if (cfg->diag.check_every > 0 && r.step % cfg->diag.check_every == 0 && r.step < cfg->train.steps)
            diag_check_consistency(&r.model, g, cfg, r.step);
        if (cfg->io.checkpoint_every > 0 && r.step % cfg->io.checkpoint_every == 0 && r.step < cfg->train.steps)
            save_checkpoint(&r);
        if (r.step < cfg->train.steps && stop_agreed(&r, t_start, avg)) {
            log_info("stopping at step %lld (%s); writing a checkpoint\n", (long long)r.step,
                     stop_requested ? "signal" : "io.max_seconds reached");
            status = EXIT_STOPPED;
            break;
        }
    }
    diag_check_consistency(&r.model, g, cfg, r.step);
    if (status == EXIT_STOPPED || cfg->io.save_final) save_checkpoint(&r);

    double *all = g->rank == 0 ? xmalloc((size_t)g->world * NUM_TIMERS * sizeof(double)) : NULL;
    MPI_CHECK(MPI_Gather(r.timers.total, NUM_TIMERS, MPI_DOUBLE, all, NUM_TIMERS, MPI_DOUBLE, 0, g->world_comm));
    struct comm_counts totals;
    comm_totals(&r.comm, &totals);
    if (g->rank == 0 && metrics_close(&r.metrics, all, g->world, &totals) != 0) log_warn("closing metrics.h5 failed");
    free(all);
    timers_print_summary(&r.timers, g->world_comm, (int)(r.step - first_step), stdout);
    comm_print_summary(&r.comm, stdout);
    fflush(stdout);

    data_close(r.data);
    free(r.inputs);
    free(r.targets);
    optim_free(&r.optim);
    model_free(&r.model);
    return status;
}
