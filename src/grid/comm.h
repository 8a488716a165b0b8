/* comm.h -- every collective the program makes, with byte and time accounting
 * per operation kind and per communicator. */
#ifndef TRIAD_COMM_H
#define TRIAD_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "comm_kind.h"
#include "device.h"
#include "topo.h"

struct trace; /* trace.h */


struct comm_counts {
    double bytes[CG_COUNT][CO_COUNT];   /* payload bytes this rank contributed */
    double seconds[CG_COUNT][CO_COUNT]; /* wall time inside the call */
    long calls[CG_COUNT][CO_COUNT];
};

/* A non-blocking call on device memory staged through the host: finished
 * in comm_wait (a receive copied to the device, its host buffer returned to
 * the pool), which finds it by its request handle, so such a request must be
 * completed by comm_wait alone, never by an MPI_Test or MPI_Wait of the
 * caller's. */
struct comm_staged {
    MPI_Request req;
    int buf;                  /* its host buffer: an index into comm.pool */
    float *dev;               /* where a received result goes (NULL for a send) */
    size_t n, at;             /* its floats, and where they start in the host buffer */
};

/* A host buffer for staging (the device table's host_alloc: pinned on a
 * GPU), kept for reuse: pinning is slow, so a run allocates them once. */
struct comm_hostbuf {
    float *p;
    size_t n;                 /* floats */
    int busy;
};

/* A point-to-point call posted: what the hang report names while it is waited for. */
struct comm_p2p {
    MPI_Request req;
    int peer, tag;
    size_t bytes;
};
enum { COMM_P2P_NOTES = 32 }; /* the last ones posted (a pipeline phase posts at most 12) */

struct comm {
    const struct grid *grid;
    struct comm_counts step;  /* since comm_step_begin */
    struct comm_counts total; /* whole run */
    /* the float collectives move model memory; where it is device memory
     * that MPI cannot read (no CUDA-aware MPI), through host buffers */
    const struct device *k;
    int staged;
    float *stage;             /* the blocking calls' buffer */
    size_t stage_n;
    struct comm_hostbuf *pool; /* the non-blocking calls' buffers */
    int npool;
    struct comm_staged *pend;
    int npend, cap;
    struct trace *trace;      /* io.trace: every call as a span, or NULL */
    struct comm_p2p p2p[COMM_P2P_NOTES];
    unsigned np2p;            /* posted so far (a ring) */
};

void comm_init(struct comm *c, const struct grid *g);
/* The float buffers handed to the calls below are k's memory: MPI takes
 * such pointers itself, or they are staged (device_staged). */
void comm_use_device(struct comm *c, const struct device *k);
void comm_free(struct comm *c);
/* Fold the step's counts into the totals and zero them. */
void comm_step_begin(struct comm *c);
/* Totals of the run so far (folded steps plus the current one). */
void comm_totals(const struct comm *c, struct comm_counts *out);

/* In-place all-reduces over one of the grid's communicators.  The f32 calls
 * take model memory (comm_use_device), the others host memory. */
void comm_allreduce_sum_f32(struct comm *c, enum comm_group g, float *buf, size_t n);
/* The same of floats in host memory (never staged: not model memory). */
void comm_allreduce_sum_host_f32(struct comm *c, enum comm_group g, float *buf, size_t n);
void comm_allreduce_sum_f64(struct comm *c, enum comm_group g, double *buf, size_t n);
void comm_allreduce_max_f32(struct comm *c, enum comm_group g, float *buf, size_t n);
void comm_allreduce_max_int(struct comm *c, enum comm_group g, int *buf, size_t n);
/* Rank i of the group contributes n floats (part; NULL: its block is
 * already in place in full); full (size * n) receives them in rank order. */
void comm_allgather_f32(struct comm *c, enum comm_group g, float *full, const float *part, size_t n);
/* all (n * group size, host memory) = every rank's n values of mine, in
 * group rank order: hashes, counters and per-rank figures, not model data.
 * Collective over g. */
void comm_allgather_u64(struct comm *c, enum comm_group g, uint64_t *all, const uint64_t *mine, size_t n);
void comm_allgather_f64(struct comm *c, enum comm_group g, double *all, const double *mine, size_t n);
/* All-to-all: rank i sends n ints of send (host memory) at send + j * n to
 * rank j, and receives rank j's into recv + j * n (the counts of an
 * exchange).  The f32 one moves model memory: sendcounts[j] floats at
 * send + sdispls[j] to rank j, recvcounts[j] from rank j into recv +
 * rdispls[j] (a mixture's tokens to their experts and back). */
void comm_alltoall_int(struct comm *c, enum comm_group g, const int *send, int *recv, int n);
void comm_alltoallv_f32(struct comm *c, enum comm_group g, const float *send, const int *sendcounts,
                        const int *sdispls, float *recv, const int *recvcounts, const int *rdispls);
/* The same, non-blocking (computation overlaps it): bytes and calls counted
 * here, the time in comm_wait(CO_ALLTOALL), where recv becomes valid.  send,
 * recv and the four arrays must stay untouched until then. */
void comm_ialltoallv_f32(struct comm *c, enum comm_group g, const float *send, const int *sendcounts,
                         const int *sdispls, float *recv, const int *recvcounts, const int *rdispls,
                         MPI_Request *req);
/* full (size * n) summed over the group; rank i keeps block i in part (n). */
void comm_reduce_scatter_f32(struct comm *c, enum comm_group g, float *part, const float *full, size_t n);
/* ZeRO's two collectives over a flat buffer made of the group's slices
 * (rank i's n floats at full + i * n), in pieces of at most `piece` floats
 * per rank: piece t of every slice is copied into pack (size * piece
 * floats, model memory) and reduced or gathered there, so that neither
 * this program nor MPI ever holds a buffer of full's size.  With n <=
 * piece, one call on full itself (pack unused, may be NULL).  The
 * reduce-scatter keeps rank i's sums of slice i in part (n); the
 * all-gather spreads every rank's slice (in place in full) to all.
 * (Why ZeRO-1 packs where ZeRO-2's ring works in place: piece t of a
 * balanced step lies at i * n + t in every slice, strided by the whole
 * slice.  comm_ring's runs are int offsets into one span, which these pass
 * at 2^31 floats of gradients, and a staged ring copies its whole span to
 * the host, here the whole buffer for every piece; a ring over contiguous
 * pieces instead puts each piece in one rank's slice and serialises the
 * ring, dp times slower.  ZeRO-2's gradients are written into packed
 * per-layer buffers in the first place, so they need no copy.) */
void comm_reduce_scatter_sliced(struct comm *c, enum comm_group g, float *part, const float *full, size_t n,
                                size_t piece, float *pack);
void comm_allgather_sliced(struct comm *c, enum comm_group g, float *full, size_t n, size_t piece, float *pack);
/* In place: rank i's counts[i] floats at buf + displs[i] spread to every
 * rank of the group (ZeRO-3's parameter gathers).  Non-blocking: bytes and
 * calls counted here, the time in comm_wait; the blocking one waits. */
void comm_iallgatherv_f32(struct comm *c, enum comm_group g, float *buf, const int *counts, const int *displs,
                          MPI_Request *req);
void comm_allgatherv_f32(struct comm *c, enum comm_group g, float *buf, const int *counts, const int *displs);
/* A reduce-scatter by a ring of point-to-point messages, in place: buf
 * holds the sum of counts floats, rank i's run at displs[i]; when done,
 * rank i's run holds the group's sum (the other runs are left partial).
 * Step s sends run me-s-1 to the next rank and adds run me-s-2 from the
 * previous one, in chunks of `piece` floats; recv (model memory, piece
 * floats) is the only scratch: MPI's reduce-scatters hold about twice the
 * whole buffer.  Counted as one reduce-scatter of the buffer (its waits'
 * time too); distinct tags for rings in flight at once on one communicator. */
struct comm_ring {
    enum comm_group g;
    float *buf, *recv;   /* what the steps read and write (staged: host copies from the pool) */
    float *dev;          /* staged: the model buffer the result returns to */
    int hbuf, hrecv;     /* staged: their pool buffers */
    const int *counts, *displs;
    int size, me, step, chunk, chunks, tag, active;
    size_t n, piece;
    MPI_Request req[2];
};
void comm_ring_start(struct comm *c, struct comm_ring *r, enum comm_group g, float *buf, const int *counts,
                     const int *displs, float *recv, size_t piece, int tag);
/* Advance a ring as far as its messages have arrived (block: to the end);
 * 1 once it is done (or none is active). */
int comm_ring_progress(struct comm *c, struct comm_ring *r, int block);

/* Non-blocking in-place all-reduce (sum) of n floats of model memory that
 * MPI reads itself (never staged: the caller checks device_staged); bytes
 * and calls counted here, the time in comm_wait. */
void comm_iallreduce_sum_f32(struct comm *c, enum comm_group g, float *buf, size_t n, MPI_Request *req);
/* Let MPI progress n requests in flight (MPI_Testall).  A staged request is
 * left alone: it completes in comm_wait only. */
void comm_progress(struct comm *c, int n, MPI_Request *reqs);
/* Non-blocking point-to-point of n floats (bytes and calls counted here, the
 * time in comm_wait). */
void comm_isend_f32(struct comm *c, enum comm_group g, const float *buf, size_t n, int peer, int tag,
                    MPI_Request *req);
void comm_irecv_f32(struct comm *c, enum comm_group g, float *buf, size_t n, int peer, int tag, MPI_Request *req);
/* Wait for n requests of kind op (CO_SEND or CO_RECV); returns the seconds waited. */
double comm_wait(struct comm *c, enum comm_group g, enum comm_op op, int n, MPI_Request *reqs);

/* Table of the run's totals (bytes, calls, seconds per communicator and kind),
 * reduced to min/avg/max over ranks; printed by rank 0.  Collective. */
void comm_print_summary(const struct comm *c, FILE *f);

#endif
