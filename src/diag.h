/* diag.h -- consistency checks for the classic failures of parallel
 * training: replicas drifting apart, replicated parameters disagreeing. */
#ifndef TRIAD_DIAG_H
#define TRIAD_DIAG_H

#include <stdint.h>

#include "config.h"
#include "model.h"
#include "topo.h"

/* Check that the data-parallel replicas hold bitwise-identical parameters
 * (every tensor) and that replicated tensors agree across the tp ranks.
 * On a mismatch rank 0 prints which tensor differs on which ranks, with a
 * per-rank table (coordinates, seeds, local gradient norm, parameter hash),
 * and every rank exits with status 1.  Collective. */
void diag_check_consistency(const struct model *m, const struct grid *g, const struct config *cfg,
                            int64_t step);

/* Testing aid (diag.corrupt_rank): perturb one replicated parameter here. */
void diag_corrupt(struct model *m);

#endif
