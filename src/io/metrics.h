/* metrics.h -- metrics.h5 and the progress line. */
#ifndef TRIAD_METRICS_H
#define TRIAD_METRICS_H

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "timers.h"
#include "trace.h"

/* A multiple-choice task's result (metrics.h5's /eval/<name>). */
struct task_score {
    const char *name;
    double acc, acc_norm;   /* fractions of the examples right by the sum, and by the mean, of the log-probabilities */
    int64_t examples;
};

/* One row of metrics per step. */
struct step_metrics {
    int64_t step;           /* 1-based: the number of optimizer steps done */
    double loss, lr, grad_norm, loss_scale, tokens_per_s, mfu, step_time;
    int skipped;
    double comm_bytes[CG_COUNT]; /* this rank's (rank 0's) traffic in the step */
    double comm_seconds;
    double val_loss;        /* the held-out loss measured after this step, or NaN */
    const struct task_score *tasks; /* the multiple-choice tasks evaluated after this step (ntasks; else 0) */
    int ntasks;
    double busy_min, busy_median, busy_max; /* the ranks' busy seconds in the step (ranks.h) */
    int slowest_rank;       /* the busiest rank */
    int straggler;          /* a rank persistently slower than the others, or -1 */
    /* a mixture of experts (else 0 and NULL): the load-balancing and z losses (means over the MoE
     * layers and micro-batches, before their coefficients), the fraction of token choices dropped by
     * the capacity, and the choices of each expert (L, E) over the global batch */
    double moe_aux, moe_z, moe_dropped;
    const double *moe_tokens;
};

/* metrics.h5 (rank 0 only; other ranks hold a closed writer). */
struct metrics_file {
    hid_t file;
    hid_t dset[24]; /* M_COUNT of metrics.c */
    hsize_t rows;
    hsize_t rows_at_open;  /* the rows an earlier run left (a restart): the timers are this run's alone */
    hid_t moe_tokens;      /* /metrics/moe_tokens (rows, L, E) of a mixture of experts, else -1 */
    hsize_t moe_dims[3];
    int flush_every;
    char failed[256]; /* why writing stopped ("" while it works): then file < 0 */
    char dir[4096];   /* the run's folder, probed before each flush (file_write_probe) */
    int refused;      /* the probe's errno that stopped the writing before HDF5 wrote (0: none) */
};

/* Create <run_dir>/metrics.h5, or continue an existing one after a restart,
 * dropping rows with step > first_step - 1.  deck = the effective deck text.
 * -1 on failure; -2 when another program holds HDF5's lock on the file
 * (left untouched: a reader's lock is no damage). */
int metrics_open(struct metrics_file *mf, const char *run_dir, const char *deck, int64_t first_step,
                 int flush_every, char *err, size_t errlen);
int metrics_append(struct metrics_file *mf, const struct step_metrics *s);
/* A mixture of experts of L layers of E experts: /metrics/moe_tokens, a
 * row (L, E) per step beside the other columns (created, or re-opened and
 * cut to the rows kept).  Rank 0, after metrics_open. */
int metrics_moe(struct metrics_file *mf, int L, int E);
/* A held-out evaluation after step (train.eval_every): a row of
 * /eval/{step, loss, tokens}.  Rank 0. */
int metrics_eval(struct metrics_file *mf, int64_t step, double loss, int64_t tokens);
/* A multiple-choice task evaluated after step (train.mc_eval_every): a
 * row of /eval/<name>/{step, acc, acc_norm, examples}.  Rank 0. */
int metrics_task(struct metrics_file *mf, int64_t step, const struct task_score *t);
/* The bytes every rank allocated (world rows of parameters, gradients,
 * optimizer state, activations: plan_allocated) as /memory/allocated,
 * replacing a restarted run's.  Rank 0. */
int metrics_memory(struct metrics_file *mf, const unsigned long long *per_rank, int world);
/* A figure per rank in bytes as /memory/<name> [world] with its
 * description, replacing a restarted run's (peak_rss, peak_device,
 * planned_peak).  Rank 0. */
int metrics_per_rank(struct metrics_file *mf, const char *name, const char *description,
                     const unsigned long long *per_rank, int world);
/* Flush to disk now (with every checkpoint, so a killed run's metrics reach
 * its last checkpoint). */
int metrics_flush(struct metrics_file *mf);
/* Store per-rank timer totals (gathered) as /timers/<name> [world] and this
 * rank's communication totals as /comm/{bytes,calls,seconds}, then close. */
int metrics_close(struct metrics_file *mf, const double *timer_totals_all, int world,
                  const struct comm_counts *comm_totals);

/* The progress line. */
/* From run_dir/metrics.h5 of a finished run on `world` ranks: each
 * rank's seconds in forward, backward and weight grad (/timers) into
 * seconds[3 * rank + i], and the steps they cover (/timers/steps: the
 * last invocation's, which a restart does not add up).  0, or -1
 * if there is no such file, it holds no timers (a run that has not
 * finished) or they are not of `world` ranks. */
int metrics_read_timers(const char *run_dir, int world, double *seconds, int64_t *steps);

void metrics_print_step(FILE *f, const struct step_metrics *s, int64_t total_steps, double elapsed_s, double eta_s);

#endif
