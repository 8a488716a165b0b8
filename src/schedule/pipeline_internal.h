/* pipeline_internal.h -- what the schedule's files share (pipeline.c: the
 * lists; pp_zb.c: the zero-bubble orders; pp_sim.c: the simulator and the
 * picture). */
#ifndef TRIAD_PIPELINE_INTERNAL_H
#define TRIAD_PIPELINE_INTERNAL_H

#include <stddef.h>

#include "pipeline.h"

/* err = the formatted message; returns -1. */
int pp_fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#ifdef __clang_analyzer__
#define pp_fail(...) (pp_fail(__VA_ARGS__), -1) /* (log.h's errorf) */
#endif

static inline int pp_is_compute(enum pp_kind k) { return k == PP_FWD || k == PP_BWD || k == PP_WGT; }

/* pp_virtual_stage and pp_stage_place by layout. */
int pp_stage_of(enum pp_layout layout, int pp, int rank, int chunk);
void pp_place_of(enum pp_layout layout, int pp, int stage, int *rank, int *chunk);

/* The computes of rank `rank` under zero-bubble schedule s (PP_ZBH1,
 * PP_ZBH2: v = 1; PP_ZBV: v = 2) in the order it runs them, into out
 * (room for 3 v m): FWD, BWD (all split) and WGT, peer -1.  Returns their
 * number, or -1 when out of memory. */
int pp_zb_order(enum pp_schedule s, int pp, int m, int rank, struct pp_action *out);

#endif
