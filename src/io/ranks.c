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

/* Every rank's value into all[world], in world rank order. */
static void gather(struct comm *c, double mine, double *all) { comm_allgather_f64(c, CG_WORLD, all, &mine, 1); }

void ranks_step(struct ranks *k, struct comm *c, const struct device *dev, const struct timers *t,
                struct step_metrics *sm)
{
    if (dev->memory_in_use) {
        size_t used = dev->memory_in_use();
        if (used > k->device_peak) k->device_peak = used;
    }
    int world = c->grid->world;
    double busy = t->total[T_FORWARD] + t->total[T_BACKWARD] + t->total[T_WGRAD] + t->total[T_OPTIMIZER];
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

/* Every rank's figure, as bytes, gathered. */
static void gather_bytes(struct comm *c, double mine, double *all, unsigned long long *bytes)
{
    gather(c, mine, all);
    for (int r = 0; r < c->grid->world; r++) bytes[r] = (unsigned long long)all[r];
}

void ranks_peak_memory(struct ranks *k, struct comm *c, size_t planned, const unsigned long long *allocated,
                       struct metrics_file *mf, FILE *f)
{
    const struct grid *g = c->grid;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    int world = g->world, device = k->device_peak > 0;
    double *all = xmalloc((size_t)world * sizeof *all);
    unsigned long long *rss = xmalloc(3 * (size_t)world * sizeof *rss), *dev = rss + world, *plan = dev + world;
    gather_bytes(c, (double)ru.ru_maxrss * 1024.0, all, rss); /* KiB on Linux */
    gather_bytes(c, (double)k->device_peak, all, dev);
    gather_bytes(c, (double)planned, all, plan);
    if (g->rank == 0) {
        const double mib = 1 << 20;
        fprintf(f, "peak memory per rank (MiB): resident set%s, the plan's peak%s, allocated (the model's state and "
                   "activations)\n", device ? ", device memory in use" : "", device ? " (device)" : "");
        for (int r = 0; r < world; r++) {
            double mine = 0;
            for (int q = 0; allocated && q < 4; q++) mine += (double)allocated[(size_t)r * 4 + q];
            fprintf(f, "  rank %3d: peak %9.1f", r, (double)rss[r] / mib);
            if (device) fprintf(f, "   device %9.1f", (double)dev[r] / mib);
            fprintf(f, "   planned %9.1f   allocated %9.1f\n", (double)plan[r] / mib, mine / mib);
        }
        if (metrics_per_rank(mf, "peak_rss", "each rank's peak resident set size at the end of the run (getrusage)",
                             rss, world) != 0 ||
            (device && metrics_per_rank(mf, "peak_device", "each rank's most device memory in use after a step "
                                        "(the driver's count: cudaMemGetInfo)", dev, world) != 0) ||
            metrics_per_rank(mf, "planned_peak", "each rank's peak memory as the plan predicts it (triad plan)",
                             plan, world) != 0)
            if (!mf->failed[0]) log_warn("writing the peak memory into /memory failed"); /* (else said already) */
    }
    free(rss);
    free(all);
}
