/* tokenize.h -- `mpirun -n N triad tokenize [tokenize.key=value ...]`: text
 * files (a document each, documents between separator lines, or JSON Lines)
 * through the model's tokenizer into llm.c token shards: uint16 (magic
 * 20240520, version 1) when the vocabulary fits 16 bits, else uint32 (magic
 * 20240801, version 7); the tokenizer's BOS or end-of-text before every
 * document; a held-out split first; each shard written under a temporary
 * name and renamed (docs/data.md). */
#ifndef TRIAD_TOKENIZE_H
#define TRIAD_TOKENIZE_H

#include "config.h"

/* Collective over MPI_COMM_WORLD; the exit status: 0, or 1 with the error
 * printed once and no shard of this run left, or 3 (EXIT_STOPPED) the same
 * where a signal (SIGTERM, SIGUSR1, a first Ctrl-C) stopped it. */
int tokenize_run(const struct config *cfg);

#endif
