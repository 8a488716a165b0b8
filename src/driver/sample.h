/* sample.h -- `triad sample CKPT [sample.key=value ...]`: text from a
 * checkpoint (docs/sample.md).  The model's family and shape come from the
 * checkpoint; the launched ranks split it as parallel.tp, pp and dp say
 * (none given: tp = every rank), on train.device.  The prompts
 * (sample_text.h) are split over the dp replicas, each generating for its
 * share in batches (sample_gen.h); rank 0 prints every prompt's text in
 * order (one prompt: streamed as it grows) and the prefill and decode
 * rates on stderr. */
#ifndef TRIAD_SAMPLE_H
#define TRIAD_SAMPLE_H

#include "config.h"

/* The sampling keys given on the command line: generation_config.json's
 * defaults (hf_generation) stand in for the others. */
enum { SAMPLE_SET_TEMPERATURE = 1, SAMPLE_SET_TOP_K = 2, SAMPLE_SET_TOP_P = 4 };

/* Collective over MPI_COMM_WORLD; the exit status.  set: SAMPLE_SET_*. */
int sample_checkpoint(const char *ckpt, const struct config *opts, int set);

#endif
