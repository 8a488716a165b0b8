/* zero2.h -- ZeRO stage 2: each data-parallel rank keeps only its slice of
 * the gradients.  The per-layer gradients of a micro-batch's backward go,
 * layer by layer, into small working buffers; as soon as a layer is done its
 * buffer is reduce-scattered over dp_comm (non-blocking) and each rank adds
 * its part to the optimizer's gshard.  The tensors outside the layers (wte,
 * wpe, the final LayerNorm) stay whole and are reduce-scattered once per step
 * (optim_reduce_grads).  Peak gradient memory: those tensors, a few layers in
 * flight and the 1/dp slice, instead of every gradient. */
#ifndef TRIAD_ZERO2_H
#define TRIAD_ZERO2_H

#include "comm.h"
#include "model.h"
#include "optim.h"

enum { ZERO2_BUFFERS = 2 }; /* one filling, one in flight */

struct zero2 {
    int enabled;
    struct model *m;
    struct optim *o;
    struct comm *c;
    size_t layer_floats;          /* one layer's per-layer tensors, packed */
    struct flat_range *ranges;    /* per local layer: its NUM_PARAMS-range list */
    int nranges;                  /* ranges per layer */
    int *counts;                  /* per local layer: dp counts */
    float *work[ZERO2_BUFFERS];   /* a layer's gradients; after its reduction this rank's part, in front */
    int layer[ZERO2_BUFFERS];     /* the local layer a buffer holds; -1 free */
    MPI_Request req[ZERO2_BUFFERS];
    int next;                     /* the buffer handed out next (round robin: the oldest) */
    double wait_s;
};

/* Armed for good when the run has zero_stage = 2 and dp > 1 (else a no-op). */
void zero2_init(struct zero2 *z, struct model *m, struct optim *o, struct comm *c);
void zero2_free(struct zero2 *z);
/* Floats of the working buffers (for the planner). */
size_t zero2_buffer_floats(const struct model_dims *d);
/* Start of a step: gshard = 0. */
void zero2_begin(struct zero2 *z);
/* After the last backward: wait for the layers still in flight. */
void zero2_finish(struct zero2 *z);

#endif
