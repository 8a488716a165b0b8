/* sample_text.h -- `triad sample`'s text in and out: the prompts
 * (sample.prompt, sample.prompt_tokens or one a line of
 * sample.prompt_file) as token ids, checked against the model, and the
 * output as text (through the model's tokenizer), bytes (a byte-level
 * model) or ids, streamed with characters whole. */
#ifndef TRIAD_SAMPLE_TEXT_H
#define TRIAD_SAMPLE_TEXT_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "config.h"
#include "tokenizer.h"

/* Prompts as ids, one after the other. */
struct prompts {
    int n;          /* prompts */
    int *len;       /* (n) ids of each */
    size_t *at;     /* (n) where each starts in ids */
    int32_t *ids;
};

/* Read the prompts of o (rank 0): each text encoded by tok (after its BOS,
 * else its end-of-text, as triad tokenize puts one before every
 * document), or without one its bytes (bytes: data_text_is_bytes), or the ids of
 * sample.prompt_tokens (ids tok can decode, where there is one); each checked to leave room for
 * sample.max_new_tokens within the model's T positions.  0, or -1 with
 * err naming the prompt (its line of the file) and what is wrong. */
int prompts_read(struct prompts *p, const struct config *o, const struct tokenizer *tok, int V, int bytes, int T,
                 char *err, size_t errlen);
/* Rank 0's prompts to every rank of comm.  Collective. */
void prompts_bcast(struct prompts *p, MPI_Comm comm);
void prompts_free(struct prompts *p);

/* The output of one sequence as it grows: with a tokenizer the text of
 * ids[0..n) (special tokens left out) past what is printed already, unless
 * final only what later ids cannot change (tok_decode_settled: a trailing
 * run of byte-fallback tokens held back) and held back while it ends in a
 * character still incomplete (U+FFFD); without one the bytes (a byte-level
 * model) or the ids.  What is printed is thus always the start of the
 * final text.  0, or -1 with err (an id the tokenizer cannot decode,
 * named) and nothing printed. */
struct stream {
    char *printed;
    size_t len;
    int n;     /* ids printed (without a tokenizer) */
    int bytes; /* a byte-level model: the ids are the bytes */
    FILE *out; /* where it goes (NULL: stdout) */
};
int stream_text(struct stream *s, const struct tokenizer *tok, const int32_t *ids, int n, int final, char *err,
                size_t errlen);
void stream_free(struct stream *s);

#endif
