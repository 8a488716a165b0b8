/* train_internal.h -- what the training run's files share and nothing else
 * uses: train.c (set-up, the step loop, the end), train_start.c (the run
 * directory and the initial state), train_ckpt.c (the run's checkpoints and
 * its I/O failures). */
#ifndef TRIAD_TRAIN_INTERNAL_H
#define TRIAD_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_async.h"
#include "comm.h"
#include "config.h"
#include "data.h"
#include "dp.h"
#include "eval.h"
#include "mc_eval.h"
#include "metrics.h"
#include "model.h"
#include "optim.h"
#include "pipeline_exec.h"
#include "ranks.h"
#include "scaler.h"
#include "shape.h"
#include "timers.h"
#include "topo.h"
#include "trace.h"

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
    struct mc_eval mc;          /* the multiple-choice tasks (train.mc_eval_every) */
    struct ranks ranks;         /* the ranks' busy time per step, side by side (stragglers) */
    struct loss_scaler scaler;  /* fp16: the dynamic loss scale */
    int nonfinite_streak;       /* steps in a row whose loss was not finite */
    int floor_streak;           /* fp16: steps in a row skipped at the smallest loss scale */
    struct trace trace;
    int64_t step;               /* optimizer steps done */
    double grad_ss;             /* this rank's share of the last step's squared gradient norm (the
                                   consistency check's table: the gradients themselves are cleared) */
    int64_t tokens;
    double peak_flops;          /* MFU's reference: the sum over ranks, FLOP/s */
    char peak_text[400];        /* how it was found, and the measured rate beside it (rank 0) */
    double probe_gflops;        /* this rank's start-up product rate, GFLOP/s (0: not measured) */
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
    double *moe_sums;           /* a mixture of experts: the step's statistics summed over the ranks (5 + L E) */
};

/* The run directory (train_start.c): io.run_dir created if need be and
 * locked for this job (one job per directory).  Collective. */
void train_open_run_dir(const struct run *r);

/* The state training starts from (train_start.c): a restart (io.restart,
 * 'auto' or a checkpoint), the weights of io.init_from, or the model's
 * initial values; the run directory's lineage settled to match, the
 * tokenizer kept beside it, the master weights and their compute copy
 * made.  Collective. */
void train_initial_state(struct run *r);

/* Is there room in run_dir for a checkpoint and some more rows of
 * metrics.h5, after this step's own checkpoint (after_step: at its end)?
 * Rank 0; 1 if there is, else 0 with the figures in why (-1: not even one
 * checkpoint fits now) (train_ckpt.c). */
int train_disk_has_room(const struct run *r, int after_step, char *why, size_t len);
/* Does this step end with a checkpoint on the interval (io.checkpoint_every;
 * the last step's is io.save_final's)? */
int train_checkpoint_due(const struct run *r);

/* Rank 0 saw an I/O failure (why, then: what follows): said once, the run
 * stops at the step's end. */
void train_io_stop(struct run *r, const char *why, const char *then);

/* Write the checkpoint of this step, once: in the background if
 * io.async_checkpoint and the run goes on (background), else at once.
 * Returns 0 (written or begun, or nothing to write), or -1 with the reason
 * in err (every rank alike; the earlier checkpoints are intact).
 * Collective. */
int train_save_checkpoint(struct run *r, int background, char *err, size_t errlen);

/* The checkpoint being written in the background, if there is one, waited
 * for and sealed (0), or -1 with the reason in err.  Collective. */
int train_async_checkpoint_end(struct run *r, char *err, size_t errlen);

/* A background write that has finished on every rank sealed at once.
 * Collective. */
int train_async_checkpoint_poll(struct run *r, char *err, size_t errlen);

/* A checkpoint that could not be written ends the run (status 1, or 3
 * while stopping with an earlier good checkpoint).  Collective. */
void train_checkpoint_failed(struct run *r, int stopping, const char *err) __attribute__((noreturn));

#endif
