/* ranks.c -- per-rank figures side by side (ranks.h). */
#include "ranks.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "log.h"

void ranks_init(struct ranks *k, int world)
{
    memset(k, 0, sizeof *k);
    k->rank = -1;
    k->all = xcalloc((size_t)world, sizeof *k->all);
}

void ranks_free(struct ranks *k)
{
    free(k->all);
    memset(k, 0, sizeof *k);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Every rank's value into all[world] (host memory: the float calls of comm.c
 * take the device's). */
static void gather(struct comm *c, double mine, double *all)
{
    memset(all, 0, (size_t)c->grid->world * sizeof *all);
    all[c->grid->rank] = mine;
    comm_allreduce_sum_f64(c, CG_WORLD, all, (size_t)c->grid->world);
}

void ranks_step(struct ranks *k, struct comm *c, const struct timers *t, struct step_metrics *sm)
{
    int world = c->grid->world;
    double busy = t->total[T_FORWARD] + t->total[T_BACKWARD] + t->total[T_OPTIMIZER];
    gather(c, busy - k->busy_before, k->all);
    k->busy_before = busy;
    double *sorted = xmalloc((size_t)world * sizeof *sorted);
    memcpy(sorted, k->all, (size_t)world * sizeof *sorted);
    qsort(sorted, (size_t)world, sizeof *sorted, by_value);
    int slow = 0;
    for (int r = 1; r < world; r++)
        if (k->all[r] > k->all[slow]) slow = r;
    sm->busy_min = sorted[0];
    sm->busy_median = world % 2 ? sorted[world / 2] : 0.5 * (sorted[world / 2 - 1] + sorted[world / 2]);
    sm->busy_max = sorted[world - 1];
    sm->slowest_rank = slow;
    free(sorted);
    int slow_now = world > 1 && sm->busy_max > STRAGGLER_RATIO * sm->busy_median;
    k->streak = slow_now && slow == k->rank ? k->streak + 1 : slow_now;
    k->rank = slow_now ? slow : -1;
    sm->straggler = k->streak >= STRAGGLER_STEPS ? k->rank : -1;
}

void ranks_peak_memory(struct comm *c, const unsigned long long *allocated, struct metrics_file *mf, FILE *f)
{
    const struct grid *g = c->grid;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double *all = xmalloc((size_t)g->world * sizeof *all);
    gather(c, (double)ru.ru_maxrss / 1024.0, all); /* KiB on Linux -> MiB */
    if (g->rank == 0) {
        unsigned long long *rss = xmalloc((size_t)g->world * sizeof *rss);
        fprintf(f, "peak resident memory per rank (MiB; allocated: the model's state and activations, as planned):\n");
        for (int r = 0; r < g->world; r++) {
            rss[r] = (unsigned long long)((double)all[r] * (1 << 20));
            double planned = 0;
            for (int k = 0; allocated && k < 4; k++) planned += (double)allocated[(size_t)r * 4 + k];
            fprintf(f, "  rank %3d: peak %9.1f   allocated %9.1f\n", r, all[r], planned / (1 << 20));
        }
        if (metrics_peak_rss(mf, rss, g->world) != 0) log_warn("writing /memory/peak_rss failed");
        free(rss);
    }
    free(all);
}
