/* zero3.h -- ZeRO-3's parameter side: the layers' parameters live only in
 * each rank's shares of the flat layout (model.shard_mem, in fp32: 1/dp of
 * the dense tensors, and under expert parallelism 1/edp of its experts');
 * a layer's are all-gathered into one of two buffers just before its
 * forward and again before its backward (model.layer_params), in the
 * compute precision, while the gather of the next layer of the pass runs
 * behind the current one's arithmetic.  The gradients go as ZeRO-2's
 * (dp.h); the tensors outside the layers stay whole on the ranks that use
 * them (optim.c gathers them after each update).
 *
 * Every dp rank of a group runs the same schedule, so the gathers start in
 * the same order on all of them (MPI's rule for non-blocking collectives).
 * A split backward gathers for its B alone: its W reads no parameter (the
 * weight gradients need the layer's inputs and output gradients only), so
 * a layer's gathered copy is released as after any backward. */
#ifndef TRIAD_ZERO3_H
#define TRIAD_ZERO3_H

#include <mpi.h>

#include "comm.h"
#include "model.h"
#include "optim.h"

enum { ZERO3_BUFFERS = 2 }; /* the layer in use, the next one arriving */

struct zero3 {
    struct model *m;
    struct optim *o;
    struct comm *c;
    const struct zero_layers *zl; /* the packed layers' parts, each rank's runs (ZeRO-2's, dp.c) */
    float *buf[ZERO3_BUFFERS];
    int layer[ZERO3_BUFFERS];  /* the local layer a buffer holds or receives (-1: none) */
    unsigned long seen;        /* the parameters' version (model.param_version) they were gathered from */
    int busy[ZERO3_BUFFERS];   /* its gathers are in flight (one a part) */
    MPI_Request req[ZERO3_BUFFERS][2];
    int current;               /* the buffer handed out last */
};

/* Floats of the two gather buffers, and the gathers of each local layer
 * one step makes (into count[], one per layer) on a rank whose schedule is
 * a[0..n) with Lc layers a chunk (for the planner). */
size_t zero3_buffer_floats(const struct model_dims *d);
struct pp_action;
void zero3_gathers(const struct pp_action *a, int n, int Lc, long *count);

/* Set up the buffers and arm m->layer_params (m has zero_stage 3 and
 * layers); the layers' parts and their runs are ZeRO-2's (the gathers
 * invert its reduce-scatters), kept by the caller. */
void zero3_init(struct zero3 *z, struct model *m, struct optim *o, struct comm *c, const struct zero_layers *zl);
/* Start of a step: no layer is taken as gathered (the planner counts from a cold start). */
void zero3_begin(struct zero3 *z);
/* Wait for any gather in flight (before the slice changes, and at the end). */
void zero3_settle(struct zero3 *z);
void zero3_free(struct zero3 *z);

#endif
