/* eval.h -- the held-out loss (train.eval_every): the forwards of the
 * training schedule over data.val_path's first train.eval_batches global
 * batches, in order, on the whole grid; nothing of the training state is
 * touched (parameters, gradients, optimizer, the data order), so a run's
 * training numbers are bitwise the same with and without it.  Each batch
 * tells the hang watchdog it made progress (flight_progress), so a long
 * evaluation is not a hang, and a batch that stands still is one. */
#ifndef TRIAD_EVAL_H
#define TRIAD_EVAL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "config.h"
#include "data.h"
#include "model.h"
#include "pipeline_exec.h"
#include "shape.h"

struct eval {
    struct pp_exec exec;      /* the schedule's forwards alone */
    struct data_source *data; /* data.val_path, unshuffled */
    int64_t batches;          /* global batches per evaluation */
    int64_t G;                /* sequences per global batch */
    double slow;              /* diag.slow_seconds before each batch on diag.slow_rank, else 0 */
};

/* Collective: open data.val_path (errors agreed, printed once, status 1).
 * Does nothing (ev->batches = 0) when train.eval_every is 0. */
void eval_init(struct eval *ev, const struct config *cfg, const struct run_shape *s, const struct grid *g, int V,
               int T);
/* Whether any rank's stop request (a signal) is set: collective over the
 * world, a batch boundary of an evaluation; 0 without a collective where
 * stop is NULL (triad eval, or the run's last step). */
int eval_stop_agreed(struct comm *c, const volatile sig_atomic_t *stop);
/* Rank 0: with train.eval_batches = 0 ("all of it": every whole global
 * batch), a note to f of the sequences past the last whole batch, which no
 * evaluation reads, and hint (NULL: none) after it. */
void eval_note_left_out(const struct eval *ev, const struct config *cfg, FILE *f, const char *hint);
/* Collective: the mean token loss over the held-out batches; *tokens gets
 * how many tokens it covered.  Timers: the forward time goes to t.  stop
 * (NULL: none) is a rank's stop request (a signal): when any rank has one at
 * a batch boundary, the ranks give the evaluation up together and it returns
 * NaN with *tokens = 0, so that a stop waits for one batch, not all. */
double eval_run(struct eval *ev, struct model *m, struct comm *c, struct timers *t, int64_t *tokens,
                const volatile sig_atomic_t *stop);
void eval_free(struct eval *ev);

#endif
