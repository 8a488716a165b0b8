/* mc_task.h -- a multiple-choice task (docs/formats.md, "Multiple-choice
 * tasks"): examples of a context, its candidate completions (the choices)
 * and the index of the right one (the label), as token ids.
 *
 * Read from llm.c's eval files (the format of dev/data/data_common.py's
 * write_evalfile, for HellaSwag and MMLU: 256 int32 of header -- magic
 * 20240522, version 1, the examples, the longest example's bytes -- then
 * each example a stream of uint16: 65535, its bytes, its index, the label,
 * the choices, the context's length and ids, each choice's length and ids)
 * or from JSON Lines, one {"context": "...", "choices": ["...", ...],
 * "label": k} a line, through the model's tokenizer.  Every example is
 * checked before any is used: at least two choices, the label one of them,
 * a context and choices that are not empty, every id in the model's
 * vocabulary, the context and each choice within seq_len.  Each choice
 * also gets the length acc_norm divides its log-probability by (norm). */
#ifndef TRIAD_MC_TASK_H
#define TRIAD_MC_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

struct mc_task {
    int64_t n;        /* examples */
    int64_t rows;     /* their choices: one sequence each */
    int32_t *stream;  /* per example: label, choices, context length, the context's ids, then each choice's
                         length and ids */
    size_t len;       /* int32 of stream */
    size_t *at;       /* [n] where each example starts in stream */
    int32_t *norm;    /* [rows] each choice's length, acc_norm's divisor: a JSON Lines choice's characters
                         (Unicode code points) after its leading whitespace, as lm-evaluation-harness counts
                         len(choice) without the target delimiter; an llm.c file's choice its ids, as llm.c */
};

/* Is path a JSON Lines task (its name ends in .jsonl or .json)?  Else an
 * llm.c eval file. */
int mc_task_is_jsonl(const char *path);

/* Read the task at path for a model of V ids and seq_len T: its first
 * max_examples (0: all).  A JSON Lines file is encoded by tok (the
 * context after the id that starts a document: the tokenizer's BOS, else
 * its end-of-text, as triad tokenize puts one before every document), or
 * without one its bytes are the ids where `bytes` (data_text_is_bytes).
 * 0, or -1 with err (the file, the example or line, what is wrong, the
 * fix). */
int mc_task_read(struct mc_task *t, const char *path, const struct tokenizer *tok, int V, int bytes, int T,
                 int64_t max_examples, char *err, size_t errlen);

/* Index t->stream[0..t->len) (another rank's, received): n, rows, at.
 * -1 out of memory. */
int mc_task_index(struct mc_task *t);
void mc_task_free(struct mc_task *t);

/* Example e's label, its number of choices, its context (n ids) and its
 * choice c (n ids). */
static inline int mc_label(const struct mc_task *t, int64_t e) { return t->stream[t->at[e]]; }
static inline int mc_choices(const struct mc_task *t, int64_t e) { return t->stream[t->at[e] + 1]; }
static inline const int32_t *mc_context(const struct mc_task *t, int64_t e, int *n)
{
    *n = t->stream[t->at[e] + 2];
    return t->stream + t->at[e] + 3;
}
const int32_t *mc_choice(const struct mc_task *t, int64_t e, int c, int *n);

#endif
