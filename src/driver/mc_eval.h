/* mc_eval.h -- multiple-choice tasks (eval.tasks) scored on the grid, for
 * `triad eval` and train.mc_eval_every.
 *
 * Each choice is one sequence: its example's context, then its own ids.
 * batch_size of them make a global batch through the training schedule's
 * forwards, as the held-out loss (eval.h): nothing of the training state
 * is touched, so a run's training numbers are bitwise the same with and
 * without it.  Each batch's token losses are summed over the grid into one
 * (batch_size, seq_len) table, every position from the one rank that
 * computed it; a choice's log-probability is minus the sum of its tokens'
 * losses, taken in order.  acc counts the examples whose choice of the
 * largest log-probability is the label, acc_norm those whose choice of the
 * largest log-probability over its length is (mc_task's norm: a JSON Lines
 * choice's characters, as lm-evaluation-harness divides; an llm.c file's
 * ids, as llm.c; the first choice wins a tie).  The tasks are read by rank 0 and sent to the
 * others. */
#ifndef TRIAD_MC_EVAL_H
#define TRIAD_MC_EVAL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "comm.h"
#include "config.h"
#include "data.h"
#include "mc_task.h"
#include "metrics.h"
#include "model.h"
#include "pipeline_exec.h"
#include "shape.h"

enum { MC_NAME = 64 };

struct mc_eval {
    int ntask;
    struct mc_task *task;       /* [ntask] */
    char (*name)[MC_NAME];      /* [ntask] each task's name (eval.tasks) */
    struct task_score *score;   /* [ntask] the last evaluation's */
    struct pp_exec exec;        /* the schedule's forwards alone */
    int64_t G;                  /* sequences per global batch */
    int T;
    double slow;                /* diag.slow_seconds before each batch on diag.slow_rank */
    int32_t *rows;              /* (G, T+1) the batch's sequences */
    float *losses;              /* (G, T) their token losses, summed over the grid */
    struct data_source *data;   /* over rows */
};

/* Collective: read the tasks of eval.tasks (rank 0, a JSON Lines task
 * through eval.tokenizer's tokenizer: the model's, ckpt's or with ckpt
 * NULL run_tok, the run's, which rank 0 has opened: hf_run_tokenizer), for
 * a model of V ids and seq_len T, and send them to every rank.  Errors
 * agreed, printed once, status 1.  Nothing (ntask = 0) without tasks. */
void mc_eval_init(struct mc_eval *e, const struct config *cfg, const char *ckpt, struct tokenizer *run_tok,
                  const struct run_shape *s,
                  const struct grid *g, int V, int T);
/* Collective: score every task (e->score); rank 0 writes each choice's
 * line to scores where it is not NULL (eval.scores).  0, or 1 where the
 * tasks were given up because *stop was set before a batch on some rank
 * (stop may be NULL; e->score is then not to be read). */
int mc_eval_run(struct mc_eval *e, struct model *m, struct comm *c, FILE *scores, const volatile sig_atomic_t *stop);
void mc_eval_free(struct mc_eval *e);

#endif
