/* ranks.h -- what each rank did, side by side: its busy time per step (the
 * forward, backward and optimizer of the step, without the waits) to name a
 * straggler, and its peak memory (resident, and the device's) at the end
 * beside the plan's figures. */
#ifndef TRIAD_RANKS_H
#define TRIAD_RANKS_H

#include "comm.h"
#include "device.h"
#include "metrics.h"
#include "timers.h"

/* A straggler: a rank busy more than STRAGGLER_RATIO times the median for
 * STRAGGLER_STEPS steps in a row. */
enum { STRAGGLER_STEPS = 5 };
#define STRAGGLER_RATIO 1.2

struct ranks {
    double busy_before;  /* this rank's busy seconds up to the step */
    int rank, streak;    /* the slowest rank of the last steps and how many in a row it was */
    double *all;         /* [world] this step's busy time of every rank */
    size_t device_peak;  /* the most device memory in use after a step (bytes; 0: no device) */
};

void ranks_init(struct ranks *k, int world);
void ranks_free(struct ranks *k);
/* Collective: every rank's busy time of the step (from its timers), into
 * sm: min, median, max, the slowest rank, and straggler (the rank, or -1
 * while none has been slow for STRAGGLER_STEPS steps).  Also samples the
 * device's memory in use (dev->memory_in_use, where it has one). */
void ranks_step(struct ranks *k, struct comm *c, const struct device *dev, const struct timers *t,
                struct step_metrics *sm);
/* Collective: each rank's peak resident set (getrusage) and, on a device,
 * its peak device memory in use, printed by rank 0 beside the plan's peak
 * for the rank (planned: this rank's, plan_check) and the bytes each
 * allocated (allocated: [world x 4] or NULL), and stored as metrics.h5's
 * /memory/peak_rss, /memory/peak_device and /memory/planned_peak. */
void ranks_peak_memory(struct ranks *k, struct comm *c, size_t planned, const unsigned long long *allocated,
                       struct metrics_file *mf, FILE *f);

#endif
