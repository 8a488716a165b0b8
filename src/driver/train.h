/* train.h -- the training run: set-up, the step loop, the end. */
#ifndef TRIAD_TRAIN_H
#define TRIAD_TRAIN_H

#include "config.h"
#include "exit_status.h"
#include "topo.h"

/* SIGUSR1 and SIGTERM ask for a clean stop (status 3) from now on: call it
 * first thing, so a stop during start-up is honoured, not fatal. */
void train_catch_signals(void);

/* Train as the deck says on grid g.  deck = effective deck text (stored in
 * metrics and checkpoints).  Returns an exit status. */
int train_run(const struct config *cfg, const struct grid *g, const char *deck);

#endif
