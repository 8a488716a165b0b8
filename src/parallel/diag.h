/* diag.h -- consistency checks for the classic failures of parallel
 * training: replicas drifting apart, replicated parameters disagreeing. */
#ifndef TRIAD_DIAG_H
#define TRIAD_DIAG_H

#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "model.h"
#include "topo.h"

/* Check that the data-parallel replicas hold bitwise-identical parameters
 * (every tensor) and that replicated tensors agree across the tp ranks.
 * On a mismatch rank 0 prints which tensor differs on which ranks, with a
 * per-rank table (coordinates, seeds, local gradient norm: the square root
 * of grad_ss, the rank's share of the last step's squared gradient norm,
 * optim_grad_norm's local_ss; parameter hash), and every rank exits with
 * status 1.  Collective. */
void diag_check_consistency(const struct model *m, struct comm *c, const struct config *cfg, int64_t step,
                            double grad_ss);

/* The loss has not been finite for steps first..last: name the first
 * forward output that went non-finite (model->watch found it) and the first
 * non-finite parameter, over the whole grid, and stop every rank with
 * status 1 (the checkpoints already written stay).  Collective. */
void diag_report_nonfinite(const struct model *m, const struct grid *g, int64_t first, int64_t last);

/* Testing aid (diag.inject_nan_step): set element 0 of this rank's part of
 * parameter `name` ("h.3/fc_w", "wte") to NaN where this rank holds it.
 * An unknown name stops the run.  Collective. */
void diag_inject_nan(struct model *m, const char *name);
/* At start-up: the run ends, as diag_inject_nan would at its step, where
 * `name` is no parameter of the model.  Collective. */
void diag_check_inject(const struct model *m, const char *name);

/* Testing aid (diag.corrupt_rank): perturb one replicated parameter here. */
void diag_corrupt(struct model *m);

#endif
