/* sample.h -- `triad sample CKPT [sample.key=value ...]`: text from a
 * checkpoint.  The model's family and shape come from the checkpoint; the
 * launched ranks split it by tensor parallelism (tp = world; heads and the
 * vocabulary split as in training).  One token at a time through every
 * layer, with a cache of each layer's keys and values, so a token costs
 * one pass over the weights; the logits are gathered and every rank draws
 * the same token from counter-based random numbers of sample.seed:
 * temperature, then top_k, then top_p.  Prints the text (a byte-level
 * model) or the token ids. */
#ifndef TRIAD_SAMPLE_H
#define TRIAD_SAMPLE_H

#include "config.h"

/* Collective over MPI_COMM_WORLD; the exit status. */
int sample_checkpoint(const char *ckpt, const struct config *opts);

#endif
