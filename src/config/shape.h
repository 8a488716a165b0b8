/* shape.h -- the shape of a run: everything that follows from the deck and
 * the world size, computed once (run_shape_init) and read by the training
 * loop, the optimizer, the data-parallel reduction, the planner, the
 * diagnostics and the deck checks, so that each rule is written here only:
 * the model's family and the sizes it derives, the data-parallel degree and
 * the micro-batches of a step, the padded vocabulary, the parameter count,
 * and which ZeRO stage, overlap and MPI staging are in effect. */
#ifndef TRIAD_SHAPE_H
#define TRIAD_SHAPE_H

#include <stdint.h>

#include "config.h"
#include "pipeline.h"  /* enum pp_schedule */
#include "precision.h" /* enum precision */

/* The model's family (model.arch) and the keys whose 0 (or unset) means
 * the family's value. */
struct model_family {
    int llama;            /* model.arch = 'llama': RMSNorm, RoPE, GQA, SwiGLU, no biases, no position table */
    int64_t NKV;          /* key/value heads: n_kv_head, or n_head */
    int64_t F;            /* MLP hidden width: ffn_hidden, or 4C (gpt2) or 8C/3 up to a multiple of 256 (llama) */
    int tied;             /* the LM head is wte: tie_embeddings, or .true. for gpt2 and .false. for llama */
    int qkv_bias;         /* q, k and v have biases: gpt2, or llama with qkv_bias */
    int64_t E, K;         /* mixture of experts: routed experts (0: a dense MLP) and experts per token */
    int64_t Fe;           /* an expert's hidden width: moe_ffn_hidden, or F */
    int64_t Fs;           /* the shared experts' hidden width (n_shared_expert * Fe; 0: none) */
    int64_t Ld;           /* of a mixture, the leading blocks with a dense MLP of F (moe_dense_layers) */
};

struct run_shape {
    int world;            /* ranks (0: not known yet, e.g. `triad check` without world=) */
    int tp, pp, dp, v;    /* the grid; v: model chunks per pipeline rank (virtual stages) */
    int cp;               /* context-parallel ranks (each holds seq_len / cp positions) */
    int ep;               /* expert parallelism: groups of ep of the dp * cp ranks share the experts */
    int dpcp;             /* dp * cp: the ranks holding replicas of one shard's parameters, over which
                             the gradients are reduced and ZeRO shards */
    int sp;               /* sequence parallelism in effect (asked and tp > 1) */
    enum pp_schedule sched; /* parallel.schedule */
    const char *schedule_file; /* parallel.schedule_file with sched = PP_FILE (the deck's string), else NULL */
    enum precision prec;  /* train.precision: the storage format of parameters and activations */
    int micro_batch;      /* sequences per micro-batch (0 when dp is unknown) */
    int n_micro;          /* micro-batches per step and replica (0 when dp is unknown) */
    int64_t V, Vp;        /* vocabulary; padded to a multiple of 128 * tp (whole tiles on every tp rank) */
    struct model_family fam;
    int64_t params;       /* logical parameters (V rows of wte; -1 beyond 2^63) */
    int zero_stage;       /* the ZeRO stage in effect: parallel.zero_stage, 0 when dpcp = 1 (one replica,
                             nothing to shard); what is sharded over the dpcp ranks grows with it:
                             1 the optimizer state, 2 the gradients too, 3 the layers' parameters too */
    int staged;           /* MPI reaches model memory only through host buffers */
    int overlap;          /* the dp all-reduce runs in buckets during the backward: asked, dpcp > 1,
                             no ZeRO, not staged (MPI reads the gradients themselves) */
};

/* The shape of cfg on world ranks.  staged: the device's memory is not
 * readable by MPI (comm_use_device; the planner passes what the deck
 * implies).  Fields that need the world size are 0 when world <= 0. */
void run_shape_init(struct run_shape *s, const struct config *cfg, int world, int staged);

/* The data-parallel degree: parallel.dp, or world / (tp * cp * pp) when it
 * is 0; 0 when it cannot be derived (world <= 0, or world not a multiple
 * of tp * cp * pp). */
int shape_dp(const struct config *cfg, int world);

/* The micro-batch size: train.micro_batch_size, or batch_size / dp when it
 * is 0; 0 when dp cannot be derived (shape_dp). */
int shape_micro_batch(const struct config *cfg, int world);

/* The padded vocabulary: V rounded up to a multiple of 128 * tp. */
int64_t shape_padded_vocab(int64_t V, int64_t tp);

/* The family of cfg's model. */
void shape_family(struct model_family *f, const struct config *cfg);

/* The logical parameter count of cfg's model with a vocabulary of V (wte of
 * V rows, gpt2's position table, L blocks, the final norm, an untied head of
 * V rows); -1 beyond 2^63.  Of a mixture of experts, every expert counts;
 * shape_active_params counts those a token is multiplied by (k experts). */
int64_t shape_params(const struct config *cfg, int64_t V);
int64_t shape_active_params(const struct config *cfg, int64_t V);

/* a * b and a + b for a, b >= 0; -1 when the result does not fit in 64 bits
 * (or an operand is already -1). */
static inline int64_t mul64(int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || (b != 0 && a > INT64_MAX / b)) return -1;
    return a * b;
}
static inline int64_t add64(int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || a > INT64_MAX - b) return -1;
    return a + b;
}

#endif
