/* metrics.h -- timers, the progress line, metrics.h5. */
#ifndef TRIAD_METRICS_H
#define TRIAD_METRICS_H

#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"

/* Phases of a step; one table, reduced min/avg/max over ranks at the end. */
#define TIMER_LIST(X)          \
    X(T_DATA, "data")          \
    X(T_FORWARD, "forward")    \
    X(T_BACKWARD, "backward")  \
    X(T_PP_WAIT, "pp wait")    \
    X(T_DP_REDUCE, "dp reduce") \
    X(T_OPTIMIZER, "optimizer") \
    X(T_IO, "io")              \
    X(T_STEP, "step total")
#define TIMER_ENUM(id, name) id,
enum timer_id { TIMER_LIST(TIMER_ENUM) NUM_TIMERS };
#undef TIMER_ENUM

struct timers {
    double total[NUM_TIMERS];
    double started[NUM_TIMERS];
};

static inline void timer_start(struct timers *t, enum timer_id id) { t->started[id] = MPI_Wtime(); }
static inline void timer_stop(struct timers *t, enum timer_id id)
{
    t->total[id] += MPI_Wtime() - t->started[id];
}

/* min / avg / max over the world's ranks, printed by rank 0.  Collective. */
void timers_print_summary(const struct timers *t, MPI_Comm world, int steps, FILE *f);

/* The timeline (io.trace): what each rank did when, for Chrome's trace
 * viewer and Perfetto. */
enum trace_kind { TR_FORWARD, TR_BACKWARD, TR_SEND, TR_RECV_WAIT, TR_OPTIMIZER, TR_COUNT };
struct trace_event {
    double t0, t1; /* seconds since the trace began */
    int kind, mb, chunk;
};
struct trace {
    struct trace_event *ev;
    size_t n, cap;
    double origin;
};
void trace_init(struct trace *t);
void trace_add(struct trace *t, enum trace_kind kind, int mb, int chunk, double t0, double t1);
/* Gather every rank's events to rank 0 and write a Chrome-trace JSON file
 * (one track per rank).  Collective.  Returns 0 or -1 with err. */
int trace_write(const struct trace *t, MPI_Comm world, const char *path, char *err, size_t errlen);
void trace_free(struct trace *t);

/* One row of metrics per step. */
struct step_metrics {
    int64_t step;           /* 1-based: the number of optimizer steps done */
    double loss, lr, grad_norm, loss_scale, tokens_per_s, mfu, step_time;
    int skipped;
    double comm_bytes[CG_COUNT]; /* this rank's (rank 0's) traffic in the step */
    double comm_seconds;
};

/* metrics.h5 (rank 0 only; other ranks hold a closed writer). */
struct metrics_file {
    hid_t file;
    hid_t dset[16];
    hsize_t rows;
    int flush_every;
    char failed[256]; /* why writing stopped ("" while it works): then file < 0 */
};

/* Create <run_dir>/metrics.h5, or continue an existing one after a restart,
 * dropping rows with step > first_step - 1.  deck = the effective deck text. */
int metrics_open(struct metrics_file *mf, const char *run_dir, const char *deck, int64_t first_step,
                 int flush_every, char *err, size_t errlen);
int metrics_append(struct metrics_file *mf, const struct step_metrics *s);
/* Flush to disk now (with every checkpoint, so a killed run's metrics reach
 * its last checkpoint). */
int metrics_flush(struct metrics_file *mf);
/* Store per-rank timer totals (gathered) as /timers/<name> [world] and this
 * rank's communication totals as /comm/{bytes,calls,seconds}, then close. */
int metrics_close(struct metrics_file *mf, const double *timer_totals_all, int world,
                  const struct comm_counts *comm_totals);

/* The progress line. */
void metrics_print_step(FILE *f, const struct step_metrics *s, int64_t total_steps, double eta_s);

#endif
