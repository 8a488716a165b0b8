/* train.h -- the training run: set-up, the step loop, the end. */
#ifndef TRIAD_TRAIN_H
#define TRIAD_TRAIN_H

#include "config.h"
#include "topo.h"

enum exit_status { EXIT_DONE = 0, EXIT_ERROR = 1, EXIT_STOPPED = 3, EXIT_HANG = 4 };

/* SIGUSR1 and SIGTERM ask for a clean stop (status 3) from now on: call it
 * first thing, so a stop during start-up is honoured, not fatal. */
void train_catch_signals(void);

/* Train as the deck says on grid g.  deck = effective deck text (stored in
 * metrics and checkpoints).  Returns an exit status. */
int train_run(const struct config *cfg, const struct grid *g, const char *deck);

#endif
