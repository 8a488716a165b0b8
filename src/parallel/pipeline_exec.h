/* pipeline_exec.h -- runs this rank's pipeline action list for one step with
 * non-blocking MPI point-to-point over pp_comm (the contract of pipeline.h). */
#ifndef TRIAD_PIPELINE_EXEC_H
#define TRIAD_PIPELINE_EXEC_H

#include <stdint.h>

#include "comm.h"
#include "data.h"
#include "dp.h"
#include "model.h"
#include "pipeline.h"
#include "timers.h"
#include "trace.h"

struct pp_exec {
    enum pp_schedule sched;
    int m, v;                   /* micro-batches per step and replica, chunks per rank */
    struct pp_action *actions;  /* this rank's list */
    int n;
    int *phase_end;             /* [n]: index one past the communication run starting at i */
    struct trace *trace;        /* timeline events, or NULL */
    struct dp *dp;              /* armed around each chunk's last backward, or NULL */
    int forward_only;           /* evaluation: the schedule's forwards alone, each slot freed once its output left */
    float *token_losses;        /* forward only, or NULL: where the head puts each micro-batch's token losses,
                                   (B, T) at mb * B * T, host memory (model_token_losses) */
    int nrecv;                  /* activation receive buffers posted at once, at most (pp_recv_bound) */
    int *recv_busy;             /* [nrecv] which of the model's receive buffers hold a posted receive */
    unsigned char *split;       /* [n] a BWD whose WGT comes later: its B (pp_split_marks) */
    unsigned char *state;       /* [m * v] of each (mb, chunk) this step: EX_* bits */
};

/* Build the list for this rank; returns the buffers the model needs for
 * it: activation slots (a micro-batch's, from its forward to the end of its
 * backward: its W where split), receive buffers beside them (x->nrecv: a
 * chunk's input arrives there ahead of its turn and is copied into its slot
 * when the phase that receives it ends), and pending weight gradients (B
 * done, W not yet).  Dies with the schedule's reason if it cannot run on
 * any rank (agreed: collective over the world; file:
 * parallel.schedule_file, read once here). */
struct model_buffers pp_exec_init(struct pp_exec *x, enum pp_schedule s, const char *file, const struct grid *g,
                                  int v, int m);
void pp_exec_free(struct pp_exec *x);

/* The forwards of schedule s alone (evaluation: no gradients).  Messages
 * flow one way, so any prefix order of the forwards is deadlock-free.
 * Returns the buffers a model needs for them (those of the whole schedule's
 * list, no pending weight gradients): for a model built for evaluation alone. */
struct model_buffers pp_exec_init_forward(struct pp_exec *x, enum pp_schedule s, const char *file,
                                          const struct grid *g, int v, int m);

/* One step: forward and backward of every micro-batch through this rank's
 * chunks, on the global batch of G samples of data from sample `start` (the
 * replica's and each micro-batch's share: data_first_sample).  Returns the sum of the token losses this rank
 * computed (non-zero on the last stage only).  Time spent waiting for
 * messages is added to timers[T_PP_WAIT]. */
double pp_exec_step(struct pp_exec *x, struct model *mdl, struct comm *c, const struct data_source *data,
                    uint64_t start, int64_t global_batch, float dloss, struct timers *t);

#endif
