/* sample_gen.h -- generation on the process grid (docs/sample.md).  The
 * checkpoint's model is split over tp x pp as in training (heads, the MLP
 * and the vocabulary over tp; the layers over pp); each of the dp
 * replicas generates for its own prompts.  A batch of prompts is one set
 * of rows of the products: prefill takes every position of the prompts at
 * once (whole prompts, as many as fit in one forward's rows), each decode
 * step one row per prompt still going; each row carries its prompt's slot
 * and its position, and every layer keeps its keys and values in a cache
 * per slot (attention_cached).  The activations of the rows go stage to
 * stage; the last stage picks each prompt's next token and tells the other
 * stages.  A row's numbers depend on its own prompt alone (the products
 * and the kernels compute each row the same whatever the other rows), and
 * the random number of a draw on the seed, the prompt's index and the
 * position, so the text is the same in any batch and on any grid. */
#ifndef TRIAD_SAMPLE_GEN_H
#define TRIAD_SAMPLE_GEN_H

#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "model.h"
#include "sample_text.h"
#include "topo.h"

/* How the next token is chosen (&sample), and where a document ends. */
struct gen_opts {
    int max_new;           /* tokens to generate */
    double temperature;    /* 0: greedy */
    int64_t top_k;         /* 0: all */
    double top_p;          /* 1: all */
    uint64_t seed;
    const int32_t *stop;   /* [nstop] ids that end a document (the tokenizer's, sample.stop_ids) */
    int nstop;
    const unsigned char *drawable; /* (V) 1 for each id a draw may give; NULL: every id (no tokenizer) */
};

/* What the batches so far took on this rank. */
struct gen_stats {
    double prefill_s, decode_s;   /* wall time */
    long long prefill_tokens;     /* prompt positions */
    long long decode_tokens;      /* rows of the decode steps (a token each) */
};

/* A token a draw may give: its id, its logit and its probability before normalisation. */
struct gen_cand {
    int id;
    float logit;
    double p;
};

struct gen {
    struct config cfg;             /* the checkpoint's deck in the sampling layout */
    struct grid *g;
    struct model m;                /* this stage's layers on this rank's device, fp32 */
    struct comm c;
    int S;                         /* prompt slots of a batch */
    int R;                         /* rows of one forward: max(S, seq_len) */
    int Tc;                        /* positions of the cache of the batch under way */
    /* device memory: the rows' activations, (R, width) each */
    float *x, *h, *part, *qkv, *att, *fc, *act, *mean, *rstd, *rope_cos, *rope_sin;
    int32_t *tok, *seq, *pos, *last; /* the rows' tokens, slots, positions (R); the rows whose logits are
                                        wanted (S) */
    float *head, *lnf, *logits, *logits_all; /* (S, C) x2, (S, Vp/tp), (tp, S, Vp/tp) */
    float *kcache, *vcache;        /* (Lp, S, Tc, kv heads of this rank * HS) */
    /* host */
    int32_t *htok, *hseq, *hpos, *hlast, *hnext; /* (R) x3, (S) x2 */
    float *hlogits, *hrow;          /* (tp, S, Vp/tp), (V) */
    struct gen_cand *cand;          /* (V) */
    struct gen_stats st;
};

/* Rank 0 reads the checkpoint's deck (its model's family and shape), every
 * rank gets it.  Collective; 0, or -1 with err on every rank. */
int gen_read_config(const char *ckpt, struct config *cfg, char *err, size_t errlen);

/* The grid of o (parallel.tp, pp and dp as in training; none given: tp =
 * the launched ranks) checked against the model of cfg, this rank's
 * device (train.device) opened, the model's parts loaded, and buffers for
 * batches of S prompts (G->S: a replica's share of nprompts, at most
 * sample.batch_size).  Collective; 0, or -1 with err on every rank. */
int gen_open(struct gen *G, const char *ckpt, const struct config *cfg, const struct config *o, struct grid *g,
             int nprompts, char *err, size_t errlen);
void gen_close(struct gen *G);

/* The ids a draw may give from logits[0..V) (o->temperature > 0), as
 * Hugging Face's generate samples: among the ids o->drawable allows (all
 * where NULL), the softmax of logits / temperature; top_k keeps the ids
 * whose logit reaches the k-th largest (every id tied with it too; 0 or k
 * past the ids: all), then top_p keeps, of those renormalised, the most
 * likely ones while the probability before each is below top_p (always
 * one; top_p = 1: all).  Into c[0..n) (V of room) most likely first, ties
 * in id order, the kept ones first; their number, and their unnormalised
 * probabilities' sum in *mass. */
int gen_candidates(const float *logits, int V, const struct gen_opts *o, struct gen_cand *c, double *mass);

/* Generate for prompts [first, first + n) of p (n <= S), every rank of one
 * replica alike.  Prompt i's ids then its new ones into out + i T (T the
 * model's seq_len), their number into len[i].  grew (NULL: none) is
 * called with prompt first's ids each time one is added.  Collective over
 * the replica. */
void gen_batch(struct gen *G, const struct gen_opts *go, const struct prompts *p, int first, int n, int32_t *out,
               int *len, void (*grew)(void *ctx, const int32_t *ids, int n), void *ctx);

#endif
