/* hf.h -- weights from other tools (io.init_from): a Hugging Face model
 * folder (config.json and model.safetensors, or the shards of
 * model.safetensors.index.json) of LlamaForCausalLM, GPT2LMHeadModel,
 * MixtralForCausalLM or Qwen2MoeForCausalLM, and
 * llm.c's GPT-2 checkpoint (gpt2_124M.bin); and a checkpoint written out as
 * a Hugging Face folder (`triad export`).  docs/formats.md gives the names
 * and layouts. */
#ifndef TRIAD_HF_H
#define TRIAD_HF_H

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "model.h"
#include "safetensors.h"
#include "topo.h"

struct tokenizer;

/* The Hugging Face architectures triad reads and writes (hf_arch.c):
 * GPT2LMHeadModel, LlamaForCausalLM, and the llama family's mixtures of
 * experts MixtralForCausalLM and Qwen2MoeForCausalLM. */
enum hf_arch { HF_GPT2, HF_LLAMA, HF_MIXTRAL, HF_QWEN2_MOE, HF_NARCH };
/* Its model_type ("mixtral") and its class ("MixtralForCausalLM"). */
const char *hf_model_type(enum hf_arch a);
const char *hf_class(enum hf_arch a);

/* One tensor of a Hugging Face folder: its name (a format taking the
 * layer, then the expert, for per-layer and per-expert tensors), triad's
 * tensor, which of its row parts it is (param_row_parts; -1: all of it),
 * and whether it is stored transposed (GPT-2's Conv1D, [in, out]).
 * hf_tensors gives the architecture's, in the order a folder lists them
 * (globals, then each layer's, an expert's run of rows once per expert,
 * then the rest); both the reader and `triad export` walk it. */
struct hf_tensor {
    const char *name;
    enum param_id id;
    int part, transposed;
};
int hf_tensors(enum hf_arch a, const struct hf_tensor **t);
/* Is tensor `name` of an architecture-a folder a buffer that real files
 * carry and no model parameter (GPT-2's h.L.attn.bias and
 * h.L.attn.masked_bias, the llama family's *.rotary_emb.inv_freq)?  The
 * reader skips these; any other tensor it does not read is an error. */
int hf_is_buffer(enum hf_arch a, const char *name);

/* The deck's &model (d) against config.json (cfg, read from path): the
 * architecture its model_type names into *arch (architectures, where
 * present, naming that class), which must hold the deck's model (family,
 * dense or experts, the switches the architecture fixes, and what triad's
 * blocks compute without a deck key: the activation, the rotary
 * dimensions, GPT-2's LayerNorm epsilon and attention scale), and every
 * key that differs listed with both values (a value of the wrong JSON type
 * is an error, never a default).  0, or -1 with the reason. */
struct json;
int hf_check_config(const struct model_dims *d, const struct json *cfg, const char *path, enum hf_arch *arch,
                    char *err, size_t errlen);
/* The architecture `triad export` writes model d as; -1 with the reason
 * when none expresses it (a sigmoid router, ungated shared experts, ...). */
int hf_arch_of(const struct model_dims *d, char *err, size_t errlen);
/* config.json of model d as architecture a, its tensors in dtype, into fp. */
void hf_print_config(FILE *fp, const struct model_dims *d, enum hf_arch a, enum st_dtype dtype);

/* What io.init_from names: a directory (a Hugging Face folder), an llm.c
 * checkpoint (its magic number), or anything else (triad's HDF5). */
enum weights_kind { WEIGHTS_HDF5, WEIGHTS_HF, WEIGHTS_LLMC };
enum weights_kind weights_kind_of(const char *path);

/* Collective: every rank reads its own shard of every tensor (pread of just
 * those bytes; F16 and BF16 converted), after the deck's &model has been
 * checked against the file's description (each differing key listed with
 * both values; a value of the wrong JSON type is an error, never a default).
 * A NaN or infinite weight is an error naming the tensor and the element,
 * unless allow_nonfinite (io.allow_nonfinite_weights); so is a tensor of
 * the folder that the model does not read (a layer past n_layer, another
 * head), unless hf_is_buffer.  0, or -1 on every
 * rank with the first failing rank's reason in err. */
int hf_load(const char *dir, struct model *m, const struct grid *g, int allow_nonfinite, char *err, size_t errlen);
int llmc_load(const char *path, struct model *m, const struct grid *g, int allow_nonfinite, char *err,
              size_t errlen);

/* The model's tokenizer by the deck: data.tokenizer, else io.init_from's
 * folder, else the copy kept beside the checkpoints (ckpt's folder, or
 * io.run_dir with ckpt NULL).  1 with its path (a file or a folder), 0 if
 * there is none. */
int hf_tokenizer_of(const struct config *cfg, const char *ckpt, char *path, size_t len);
/* The model's tokenizer for the checkpoint ckpt (cfg: its stored deck):
 * the one kept inside the file (ckpt_tok.h), else hf_tokenizer_of's;
 * checked to fit the vocabulary of V ids.  NULL with err "" when the model
 * has none, or with the reason. */
struct tokenizer *hf_model_tokenizer(const struct config *cfg, const char *ckpt, int V, char *err, size_t errlen);
/* The tokenizer an option names (eval.tokenizer): 'none', none (NULL, err
 * ""); a path, that tokenizer; '' the model's: ckpt's (hf_model_tokenizer),
 * or with ckpt NULL the run's copy in io.run_dir (hf_keep_tokenizer's), if
 * any.  Checked to fit the vocabulary of V ids.  NULL with err "" when
 * there is none, or with the reason. */
struct tokenizer *hf_open_tokenizer(const char *option, const struct config *cfg, const char *ckpt, int V, char *err,
                                    size_t errlen);
/* What generation_config.json says, beside the tokenizer
 * hf_open_tokenizer(option, cfg, ckpt) finds (kept in ckpt with its
 * tokenizer, or in the folder of the one named): the ids of eos_token_id
 * (an integer or a list: the ids that end a generation, as Hugging Face's
 * generate stops at each), and the sampling defaults the model's makers
 * set (temperature, top_k, top_p: what vLLM takes from the file; < 0 where
 * the file has none, or null).  do_sample is not read (vLLM's rule). */
enum { HF_GENERATION_STOPS = 64 }; /* eos_token_id's ids at most */
struct hf_generation {
    int32_t ids[HF_GENERATION_STOPS];
    int n;                    /* ids of eos_token_id */
    double temperature, top_p;
    long long top_k;
    char whose[4300];         /* the file's place, in words ("" where there is none) */
};
/* 0 (no file: n 0, the sampling defaults < 0), or -1 with err naming the
 * file (not JSON; an id outside 0 .. V-1 or more than HF_GENERATION_STOPS;
 * a temperature outside 0 .. 100, a top_k not a whole number >= 0, a top_p
 * outside 0 .. 1). */
int hf_generation(const char *option, const struct config *cfg, const char *ckpt, int V, struct hf_generation *gen,
                  char *err, size_t errlen);
/* At the start of a run (rank 0): the model's tokenizer checked (it opens,
 * its ids fit vocab_size V) and its files copied into io.run_dir
 * (hf_copy_tokenizer), where every checkpoint of the run stores them
 * (ckpt_tok.h), whatever becomes of the original.  A model initialised
 * from a triad checkpoint with no other tokenizer takes the one kept in it.
 * A run resumed from the checkpoint `resumed` (NULL: a new run; `here`: one
 * of run_dir's) keeps the tokenizer it was trained with: the copy in
 * run_dir, or restarted from elsewhere the one kept in that checkpoint.  0
 * (also without one), or -1 with err. */
int hf_keep_tokenizer(const struct config *cfg, int V, const char *resumed, int here, char *err, size_t errlen);
/* The tokenizer hf_keep_tokenizer keeps, opened before the run directory
 * is touched (rank 0), which shows a bad one in time: resumed in place, the
 * run's copy in run_dir; resumed otherwise, the one kept in the checkpoint
 * `resumed`; else data.tokenizer (which must name one) or io.init_from's
 * folder; else, for a new run, the one kept in io.init_from's triad
 * checkpoint.  NULL with err "" where the run keeps none, or with the
 * reason. */
struct tokenizer *hf_run_tokenizer(const struct config *cfg, int V, const char *resumed, int here, char *err,
                                   size_t errlen);
/* Before a resumed run touches its directory (rank 0): is the tokenizer
 * data.tokenizer names the one the run was trained with (the copy in
 * run_dir for a checkpoint of it, `here`; else the one kept in the
 * checkpoint ckpt), byte for byte?  0 (also where none is named, or there
 * is none to compare), or -1 with err naming both. */
int hf_check_resumed_tokenizer(const struct config *cfg, const char *ckpt, int here, char *err, size_t errlen);
/* The files of the tokenizer at src (a tokenizer.json, or a folder) into
 * dir: tokenizer.json with the tokenizer_config.json and
 * special_tokens_map.json beside it where there are any, or GPT-2's
 * vocab.json and merges.txt.  0, or -1 with err. */
int hf_copy_tokenizer(const char *src, const char *dir, char *err, size_t errlen);
/* src to dst through dst.tmp, fsynced and renamed; 0 or -1 with err. */
int hf_copy_file(const char *src, const char *dst, char *err, size_t errlen);

/* `triad export`: one process writes dir/config.json and dir/model.safetensors
 * (in dtype) from the checkpoint ckpt, whatever grid wrote it, and with the
 * model's tokenizer (the one kept in ckpt, else hf_tokenizer_of the stored
 * deck) its files (hf_copy_tokenizer) and generation_config.json (its BOS
 * and end-of-text ids).  0, or -1 with err and nothing of it left (the
 * folders it made removed): also where *stop (a signal, may be NULL) is set
 * between tensors. */
int hf_export(const char *ckpt, const char *dir, enum st_dtype dtype, const volatile sig_atomic_t *stop, char *err,
              size_t errlen);

#endif
