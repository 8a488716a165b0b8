/* dp.h -- data parallelism: once per step the gradients are completed (the
 * tied embedding's two shares, the partial sums over tp of sequence
 * parallelism) and summed over the dp replicas, by one of four strategies
 * behind one interface:
 *
 *   DP_FLAT            one all-reduce of the flat gradient buffer after
 *                      the backward;
 *   DP_OVERLAP         as soon as a layer's gradients are final (the
 *                      backward of the step's last micro-batch has passed
 *                      it) they join a bucket (bucket_mb); a full bucket
 *                      starts non-blocking all-reduces, progressed after
 *                      every later layer; the rest (embeddings, the final
 *                      LayerNorm, the tensors partial under SP) after;
 *   DP_SCATTER_FLAT    (ZeRO-1) the flat buffer reduce-scattered into the
 *                      optimizer's slice, a bucket (bucket_mb) at a time
 *                      (comm_reduce_scatter_sliced: no scratch of the
 *                      buffer's size, here or in MPI);
 *   DP_SCATTER_LAYERS  (ZeRO-2 and 3) each layer's gradients go into a
 *                      small working buffer that is reduce-scattered into
 *                      the slice as soon as the layer's backward ends (two
 *                      buffers: one filling, one in flight; a ring of
 *                      messages, comm_ring: no scratch inside MPI); the
 *                      tensors outside the layers once per step, a bucket
 *                      at a time.  Peak gradient memory: those tensors, two
 *                      layers and the slice.  At zero_stage 3 the layers'
 *                      parameters are gathered too (zero3.h).
 *
 * The ZeRO stage is the shape's zero_stage (shape.h), which picks the
 * strategy; the strategy says how the gradients travel.
 *
 * A step: dp_begin; the pipeline calls dp_arm / dp_disarm around each
 * chunk's last backward; dp_finish after the last backward.  Every message
 * goes through comm.c (counted there).  Where a zero-bubble schedule splits
 * a backward, "a layer's backward" here is its W (the weight gradients):
 * the model calls the layer_grads and layer_done hooks from W, and the
 * pipeline arms around the last micro-batch's W. */
#ifndef TRIAD_DP_H
#define TRIAD_DP_H

#include <mpi.h>
#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "optim.h"
#include "shape.h"
#include "zero3.h"

enum dp_strategy { DP_NONE, DP_FLAT, DP_OVERLAP, DP_SCATTER_FLAT, DP_SCATTER_LAYERS };

enum { DP_LAYER_BUFFERS = 2 }; /* one filling, one in flight */

struct dp {
    enum dp_strategy strategy;  /* DP_NONE: one replica (the completion over tp and pp still runs) */
    struct model *m;
    struct optim *o;
    struct comm *c;
    /* DP_OVERLAP */
    size_t bucket_bytes;
    int *layer_sent;            /* [Lp] this step */
    size_t pending_bytes;       /* ready, not started yet */
    int *pending;               /* local layers waiting in the bucket */
    int npending;
    MPI_Request *req;           /* started all-reduces */
    int nreq, cap;
    double started_at, wait_s, hidden_s; /* time the collectives ran during the backward, and waited after it */
    /* DP_SCATTER_LAYERS: a ring for each part of a layer (the dense tensors; the experts' under ep) */
    size_t layer_floats;        /* one layer's per-layer tensors, packed */
    struct zero_layers zl;      /* the packed layers' parts and each rank's runs */
    float *work[DP_LAYER_BUFFERS]; /* a layer's gradients; after its reduction this rank's runs are summed */
    float *recv[DP_LAYER_BUFFERS][2]; /* the rings' scratch: a chunk of ring_piece[part] floats each */
    size_t ring_piece[2];
    int layer[DP_LAYER_BUFFERS];   /* the local layer a buffer holds; -1 free */
    struct comm_ring ring[DP_LAYER_BUFFERS][2];
    int next;                   /* the buffer handed out next (round robin: the oldest) */
    struct zero3 z3;            /* ZeRO-3 (zero_stage 3): the layers' parameter gathers (m set when armed) */
};

/* The strategy of shape s (overlap and ZeRO need dp * cp > 1; a stage
 * without layers reduces flat). */
void dp_init(struct dp *p, struct model *m, struct optim *o, struct comm *c, const struct run_shape *s,
             double bucket_mb);
void dp_free(struct dp *p);

/* Start of a step (ZeRO-2 and 3: the slice's gradient = 0). */
void dp_begin(struct dp *p);
/* Around the last micro-batch's backward of a chunk: its layers' gradients become final. */
void dp_arm(struct dp *p);
void dp_disarm(struct dp *p);
/* After the last backward: the gradients complete and summed over dp (in
 * the slice under ZeRO).  Collective. */
void dp_finish(struct dp *p);

/* Complete the gradients that each tp rank saw only part of (the tensors
 * param_sp_partial names; DP_SCATTER_LAYERS does the layers' as they go). */
void dp_reduce_tp_partial(struct model *m, struct comm *c);

/* Floats of DP_SCATTER_LAYERS's working buffers, and of the scratch of
 * their ring reduce-scatters (a chunk for each buffer and part: a rank's
 * share of a layer's part, at most `piece` floats, optim.piece), for the
 * planner; dp_layer_ring_chunk is one part's chunk. */
size_t dp_layer_buffer_floats(const struct model_dims *d);
size_t dp_layer_ring_chunk(const struct model_dims *d, int part, size_t piece);
size_t dp_layer_ring_floats(const struct model_dims *d, size_t piece);

#endif
