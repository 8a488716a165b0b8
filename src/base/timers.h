/* timers.h -- the phases of a step, timed on every rank. */
#ifndef TRIAD_TIMERS_H
#define TRIAD_TIMERS_H

#include <mpi.h>
#include <stdio.h>

/* Phases of a step; one table, reduced min/avg/max over ranks at the end.
 * backward: whole backwards, or a split one's B (input gradients); weight
 * grad: a split one's W (zero-bubble schedules); io: the metrics row, the
 * disk check and checkpoints, between the steps (outside step total). */
#define TIMER_LIST(X)          \
    X(T_DATA, "data")          \
    X(T_FORWARD, "forward")    \
    X(T_BACKWARD, "backward")  \
    X(T_WGRAD, "weight grad")  \
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

/* Sleep this long (resumed after a signal): the testing aids' delays. */
void pause_for(double seconds);

/* A phase's name ("dp reduce"): the summary's row, metrics.h5's /timers/<name>. */
const char *timer_name(enum timer_id id);

/* min / avg / max over the world's ranks, printed by rank 0.  Collective. */
void timers_print_summary(const struct timers *t, MPI_Comm world, int steps, FILE *f);

#endif
