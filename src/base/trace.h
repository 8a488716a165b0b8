/* trace.h -- the timeline of a run (io.trace). */
#ifndef TRIAD_TRACE_H
#define TRIAD_TRACE_H

#include <mpi.h>
#include <stddef.h>

/* The timeline (io.trace): what each rank did when, for Chrome's trace
 * viewer and Perfetto.  TR_BACKWARD is a whole backward, or a split one's B
 * (input gradients); TR_WGRAD its W (weight gradients). */
enum trace_kind { TR_FORWARD, TR_BACKWARD, TR_WGRAD, TR_SEND, TR_RECV_WAIT, TR_OPTIMIZER, TR_STEP, TR_COMM, TR_COUNT };
struct trace_event {
    double t0, t1; /* seconds since the trace began */
    int kind, mb, chunk; /* TR_STEP: mb = the step; TR_COMM: mb = the communicator, chunk = the operation */
    double bytes;        /* TR_COMM: the payload */
};
struct trace {
    struct trace_event *ev;
    size_t n, cap;
    double origin;
};
void trace_init(struct trace *t);
void trace_add(struct trace *t, enum trace_kind kind, int mb, int chunk, double t0, double t1);
/* One communication call (comm.c): communicator g, operation op (comm.h), its payload. */
void trace_comm(struct trace *t, int g, int op, double bytes, double t0, double t1);
/* Gather every rank's events to rank 0 and write a Chrome-trace JSON file
 * (one track per rank).  Collective.  Returns 0 or -1 with err. */
int trace_write(const struct trace *t, MPI_Comm world, const char *path, char *err, size_t errlen);
void trace_free(struct trace *t);

#endif
