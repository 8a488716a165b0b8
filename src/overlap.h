/* overlap.h -- the data-parallel gradient all-reduce overlapped with the
 * backward: as soon as a layer's gradients are final (the backward of the
 * step's last micro-batch has passed it) they join a bucket; a full bucket
 * (bucket_mb) starts non-blocking all-reduces, driven by MPI_Testall after
 * every later layer; the rest (embeddings, final LayerNorm, LayerNorms under
 * sequence parallelism) is reduced at the end with the waits. */
#ifndef TRIAD_OVERLAP_H
#define TRIAD_OVERLAP_H

#include <mpi.h>
#include <stddef.h>

#include "comm.h"
#include "model.h"

struct overlap {
    int enabled;
    size_t bucket_bytes;
    struct model *m;
    struct comm *c;
    int *layer_sent;          /* [Lp] this step */
    size_t pending_bytes;     /* ready, not started yet */
    int *pending;             /* local layers waiting in the bucket */
    int npending;
    MPI_Request *req;         /* started all-reduces */
    int nreq, cap;
    double started_at, wait_s, hidden_s; /* for the benchmark: time the collectives ran during backward */
};

void overlap_init(struct overlap *ov, struct model *m, struct comm *c, int enabled, double bucket_mb);
void overlap_free(struct overlap *ov);
/* Arm for the last micro-batch of a chunk: its layers' gradients become final. */
void overlap_arm(struct overlap *ov);
void overlap_disarm(struct overlap *ov);
/* Before the optimizer: start what is left, wait for everything.  Returns 1
 * if the per-layer tensors were reduced here (the caller reduces the rest). */
int overlap_finish(struct overlap *ov);

#endif
