/* plan_internal.h -- what the planner's files share: plan.c (the
 * arithmetic, the in-run check), plan_print.c (the printers) and
 * plan_advice.c (the suggestions). */
#ifndef TRIAD_PLAN_INTERNAL_H
#define TRIAD_PLAN_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

#include "model.h"
#include "plan.h"

/* "1.5 GiB", "12.0 MiB": bytes for people. */
void plan_human(char *buf, size_t n, double bytes);
/* The memory table per stage, and whether the peak fits in avail bytes (source: where avail came from). */
void plan_print_memory(FILE *f, const struct plan *p);
void plan_print_fit(FILE *f, const struct plan *p, double avail, const char *source);

/* The bubble section of triad plan: each schedule the grid could run
 * (1f1b, interleaved, the zero-bubble ones) re-planned, with its simulated
 * bubble, activations and peak; and the advice to take a zero-bubble
 * schedule when the deck's bubble is at least PLAN_BUBBLE_ADVICE and one
 * halves it within the memory (avail bytes; 0: unknown, then at most 5 %
 * above the deck's peak). */
#define PLAN_BUBBLE_ADVICE 0.05
void plan_print_bubble(FILE *f, const struct plan *p, const struct config *cfg, double avail);

/* The dims a rank of stage pp_rank gets (model_dims_init on a grid of the
 * plan's sizes with only that coordinate set). */
void plan_stage_dims(struct model_dims *d, const struct config *cfg, const struct plan *p, int pp_rank);

#endif
