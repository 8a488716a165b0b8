/* train.h -- the training run: set-up, the step loop, the end. */
#ifndef TRIAD_TRAIN_H
#define TRIAD_TRAIN_H

#include <signal.h>

#include "config.h"
#include "exit_status.h"
#include "topo.h"

/* SIGUSR1 and SIGTERM ask for a clean stop (status 3) from now on: call it
 * first thing, so a stop during start-up is honoured, not fatal. */
void train_catch_signals(void);
/* The signal that asked for a stop since (0: none), for the subcommands
 * that stop at their own boundaries (triad eval, tokenize). */
const volatile sig_atomic_t *train_stop_signal(void);
/* SIGUSR1, SIGTERM and SIGINT end the process again, as by default (triad
 * sample: nothing of it is left half-written). */
void train_release_signals(void);

/* Train as the deck says on grid g.  deck = effective deck text (stored in
 * metrics and checkpoints).  Returns an exit status. */
int train_run(const struct config *cfg, const struct grid *g, const char *deck);

#endif
