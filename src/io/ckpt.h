/* ckpt.h -- HDF5 checkpoints (docs/formats.md): every tensor in its full logical
 * shape, each rank writing or reading its own hyperslab (ckpt_layout.h); the
 * counters stored beside them, struct ckpt_state, and the file's size are in
 * ckpt_file.h. */
#ifndef TRIAD_CKPT_H
#define TRIAD_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt_file.h"
#include "model.h"
#include "optim.h"
#include "topo.h"

/* Write <run_dir>/ckpt_<step>.h5 atomically: a temporary name, close, fsync
 * on every rank, read back and verified (every tensor's checksum, the step),
 * then renamed; only then is all but the newest `keep` removed.  Collective
 * over the world.  Returns 0, or -1 with err filled on every rank, naming
 * the first rank that failed (the previous checkpoints are intact). */
int ckpt_save(const char *run_dir, const struct ckpt_state *st, const struct model *m,
              const struct optim *o, const char *deck, const struct grid *g, int keep,
              char *err, size_t errlen);

/* The deck a checkpoint was written with (its model's family and shape),
 * read on one process.  0, or -1 with the reason. */
int ckpt_read_config(const char *path, struct config *cfg, char *err, size_t errlen);
/* The data- and context-parallel degrees the checkpoint at path was
 * trained on (its micro-batch with train.micro_batch_size = 0 was
 * batch_size / dp; each rank held seq_len / cp positions), each 0 where the
 * file does not say. */
void ckpt_trained_grid(const char *path, int64_t *dp, int64_t *cp);

/* Read /model of `path` into m (this rank's part), verifying each dataset's
 * checksum where the file has one.  Collective.  Returns 0 or -1 with err
 * filled alike on every rank (-2: the file holds another model than the
 * deck's, each differing &model key named; -3: a rank cannot read the file
 * at all, which may be intact: ckpt_read_trouble; so do the loaders below). */
int ckpt_load_model(const char *path, struct model *m, const struct grid *g, char *err, size_t errlen);

/* ckpt_load_model, and the counters stored beside the tensors into st
 * (the model judged by triad eval).  Collective. */
int ckpt_load_model_counters(const char *path, struct model *m, struct ckpt_state *st, const struct grid *g,
                             char *err, size_t errlen);

/* Read model, optimizer state and counters for a restart.  Collective. */
int ckpt_load_all(const char *path, struct model *m, struct optim *o, struct ckpt_state *st,
                  const struct grid *g, char *err, size_t errlen);

/* restart = 'auto': load the newest checkpoint of run_dir that reads back
 * completely with matching checksums, reporting (rank 0) and skipping
 * corrupted or truncated ones.  Returns 1 (loaded; its path in path), 0
 * (there is none: start fresh), -1 (all unusable; err says why), -2 (the
 * newest that opens holds another model than the deck's: err names it and
 * the keys; the earlier ones, of the same run, are not tried) or -3 (a rank
 * cannot read one at all: err names it; the earlier ones are not tried,
 * since one of them would lose the steps since and move the newer aside).
 * Collective. */
int ckpt_restart_auto(const char *run_dir, struct model *m, struct optim *o, struct ckpt_state *st,
                      const struct grid *g, char *path, size_t len, char *err, size_t errlen);

#endif
