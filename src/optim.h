/* optim.h -- gradient reduction, clipping, AdamW and the learning-rate schedule. */
#ifndef TRIAD_OPTIM_H
#define TRIAD_OPTIM_H

#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "model.h"

struct optim {
    float *m_mem, *v_mem;          /* first and second moments, laid out like params */
    float *m[NUM_PARAMS], *v[NUM_PARAMS];
    double lr, beta1, beta2, eps, weight_decay, grad_clip;
};

void optim_init(struct optim *o, const struct model *m, const struct config *cfg);
void optim_free(struct optim *o);

/* Learning rate at step s (0-based): linear warm-up, then cosine decay to
 * min_lr at the last step (or constant). */
double lr_at(const struct config *cfg, int64_t step);

/* Complete the gradients of replicated parameters that each tp rank only
 * saw part of (LayerNorms under sequence parallelism). */
void optim_reduce_tp_grads(struct model *m, struct comm *c);

/* optim_reduce_tp_grads, then sum gradients over the data-parallel replicas (each replica's loss is
 * already scaled by 1/global tokens, so the sum is the mean). */
void optim_reduce_grads(struct model *m, struct comm *c);

/* Global gradient L2 norm over the grid, replicated parameters counted once. */
double optim_grad_norm(const struct model *m, struct comm *c);

/* Clip to grad_clip (if > 0) given the norm, then one AdamW step with lr.
 * t = 1-based step for bias correction. */
void optim_update(struct optim *o, struct model *m, double grad_norm, double lr, int64_t t);

#endif
