/* pp_file.h -- a pipeline schedule read from a file (parallel.schedule =
 * 'file', parallel.schedule_file; docs/pipeline.md, "A schedule from a
 * file"): each rank's forwards and backwards in the order it runs them,
 * written as triad schedule draws them.
 *
 *   # comment (to the end of the line)
 *   rank 0: F0 F1 F2 F3 B0 F4 B1 ...
 *   rank 1: F0 F1 F2+B0 F3+B1 ...
 *
 * F<mb> and B<mb> are the forward and the backward of micro-batch mb, W<mb>
 * its weight gradient (zero bubble: a B with a W of the same micro-batch
 * and chunk after it computes the input gradient alone; without one, both);
 * a suffix c<k> names the model chunk k (needed when virtual_stages > 1, 0
 * otherwise).  Computes joined by '+' are one group: run back to back with
 * one communication phase before (their receives) and one after (their
 * sends), as the interleaved schedule pairs its steady forward and
 * backward.  Every rank has one line; each chunk's forwards, backwards and
 * weight gradients (a W, or a B without one) run in micro-batch order, a W
 * after its B and once (so the gradients add up in the order of every
 * other schedule, and the numbers are the same bits); the rest (deadlock
 * freedom, messages that match) the simulator proves (pipeline.h). */
#ifndef TRIAD_PP_FILE_H
#define TRIAD_PP_FILE_H

#include <stddef.h>

#include "pp_action.h"

struct pp_file {
    int pp;
    int *n;                 /* [pp] computes of each rank */
    struct pp_action **act; /* [pp][n[r]] PP_FWD / PP_BWD / PP_WGT with mb and chunk (peer -1) */
    int **group;            /* [pp][n[r]] the group of each: consecutive computes of one group share it */
};

/* Read path for pp ranks, v chunks and m micro-batches into f.  0, or -1
 * with err naming the file, the line and what is wrong there (f then holds
 * nothing to free). */
int pp_file_read(const char *path, int pp, int v, int m, struct pp_file *f, char *err, size_t errlen);
void pp_file_free(struct pp_file *f);

#endif
