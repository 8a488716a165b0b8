/* ckpt_tok.h -- the model's tokenizer kept inside each checkpoint, so that
 * a checkpoint file alone is a whole model: `triad sample` and `triad
 * export` find its tokenizer there when the files it came from are gone
 * (docs/formats.md, "The tokenizer").
 *
 * The files of the tokenizer (those of enum ckpt_tok_file that exist in the run
 * directory, where the run's start copied them: hf_keep_tokenizer) are
 * stored as one-dimensional uint8 datasets /tokenizer/<name>, each with the
 * FNV-1a hash of its bytes as its "checksum" attribute. */
#ifndef TRIAD_CKPT_TOK_H
#define TRIAD_CKPT_TOK_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "topo.h"

/* The files a tokenizer is made of, in the order they are stored:
 * Hugging Face's tokenizer.json, the two that describe it and the model
 * folder's generation_config.json (the ids that end a generation, which
 * triad sample stops at), or GPT-2's vocab.json and merges.txt (the GPT-2
 * ones from CKPT_TOK_VOCAB on). */
enum ckpt_tok_file {
    CKPT_TOK_JSON, CKPT_TOK_CONFIG, CKPT_TOK_SPECIAL, CKPT_TOK_GENERATION, CKPT_TOK_VOCAB, CKPT_TOK_MERGES,
    CKPT_TOK_NFILES
};
/* The file name of each ("tokenizer.json", ...). */
const char *ckpt_tok_name(enum ckpt_tok_file i);

/* The bytes of the tokenizer files of dir (0: none), as
 * ckpt_write_tokenizer would store them. */
int64_t ckpt_tokenizer_bytes(const char *dir);

/* Store the tokenizer files of dir (rank 0 reads them, in pieces of 1 MiB)
 * in f, open for writing on every rank; nothing when dir holds none.
 * Collective over the world; 0, or -1 with err on every rank
 * (CKPT_WRITE_FAILED on rank 0 where its write into f failed). */
int ckpt_write_tokenizer(hid_t f, const char *dir, const struct grid *g, char *err, size_t errlen);

/* Check the stored files of f against their checksums (rank 0 reads them).
 * Collective; 0, or -1 with err on every rank. */
int ckpt_verify_tokenizer(hid_t f, const struct grid *g, char *err, size_t errlen);

/* The same on one process (f opened by it alone; ckpt: its name for
 * messages): 0, or -1 with err. */
int ckpt_check_tokenizer(hid_t f, const char *ckpt, char *err, size_t errlen);

/* Write the tokenizer files stored in the checkpoint at ckpt into the
 * folder dir (each through a temporary name, verified against its checksum
 * before it is renamed).  One process.  1 when it held a tokenizer, 0 when
 * it holds none (a file from before tokenizers were kept, or a run without
 * one), -1 with err. */
int ckpt_extract_tokenizer(const char *ckpt, const char *dir, char *err, size_t errlen);

#endif
