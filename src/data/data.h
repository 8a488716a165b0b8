/* data.h -- data sources and the deterministic global-batch order (docs/data.md).
 *
 * Sample i (T+1 tokens: T inputs and the T shifted targets) is a pure function
 * of (source, seed, i).  Step s uses samples s*G ... s*G+G-1; DP replica d
 * takes the d-th contiguous slice, cut into micro-batches in order, so every
 * decomposition sees the same global batch. */
#ifndef TRIAD_DATA_H
#define TRIAD_DATA_H

#include <stdint.h>
#include "config.h"

struct data_source;

/* Open the source named by cfg->data for sequences of length T over a
 * vocabulary of V tokens.  Checks everything that can be checked up front
 * (files exist and match the glob, magic, version, size, every token < V,
 * at least one window).  Returns NULL with *err filled (file/line where
 * meaningful, what, hint).  Never prints. */
struct data_source *data_open(const struct config *cfg, int V, int T,
                              struct deck_error *err);
void data_close(struct data_source *ds);

/* Sequences the caller holds: sample i is row i mod n of rows (n, T+1),
 * read where it lies (the caller keeps it, and may rewrite it between
 * batches).  For evaluations that lay out their own sequences. */
struct data_source *data_open_rows(const int32_t *rows, uint64_t n, int V, int T);

/* Short description for the start-up banner, e.g.
 * "tokens: 3 shards, 1234567 tokens, 1205 windows of 1024". */
const char *data_describe(const struct data_source *ds);

/* Number of distinct windows (0 = unbounded, the synthetic task). */
uint64_t data_windows(const struct data_source *ds);

/* Sample i: T+1 tokens into seq. */
void data_sample(const struct data_source *ds, uint64_t i, int32_t *seq);

/* n consecutive samples starting at `first`: inputs and targets (n,T). */
void data_batch(const struct data_source *ds, uint64_t first, int n,
                int32_t *inputs, int32_t *targets);

/* The first sample of replica dp_rank's micro-batch mb in the global batch
 * of global_batch samples that starts at sample `start` (training: the
 * samples the run has consumed, so that a restart with another batch size
 * neither repeats nor skips any). */
/* Is the text of a model of cfg (its deck) its bytes: without a tokenizer,
 * a byte-level model (vocab_size = 256), or one trained on data.kind =
 * 'text' (ids 0 .. 255 the bytes, any above them padding, never text). */
int data_text_is_bytes(const struct config *cfg);

uint64_t data_first_sample(uint64_t start, int64_t global_batch, int dp, int dp_rank,
                           int micro_batch_size, int mb);

#endif
