/* timers.c -- the phases' names and their summary over ranks. */
#include "timers.h"

#include <errno.h>
#include <time.h>

#include "log.h"

static const char *timer_names[NUM_TIMERS] = {
#define TIMER_NAME(id, name) name,
    TIMER_LIST(TIMER_NAME)
#undef TIMER_NAME
};

const char *timer_name(enum timer_id id) { return timer_names[id]; }

void pause_for(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

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
    for (int i = 0; i < NUM_TIMERS; i++) {
        fprintf(f, "  %-12s %10.3f %10.3f %10.3f", timer_names[i], mn[i], sum[i] / n, mx[i]);
        if (i == T_IO) fprintf(f, "  between steps\n"); /* (not a part of step total: no share of it) */
        else fprintf(f, " %7.1f%%\n", step > 0 ? 100.0 * (sum[i] / n) / step : 0.0);
    }
}
