/* model.h -- GPT-2 parameters (this rank's shards), activations, forward and
 * backward of this rank's layers (DESIGN.md §4). */
#ifndef TRIAD_MODEL_H
#define TRIAD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "topo.h"

/* The parameter tensors.  Per-layer tensors are stored for this rank's
 * layers back to back: (Lp, shape...). */
enum param_id {
    P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, NUM_PARAMS
};

enum init_kind { INIT_NORMAL, INIT_NORMAL_SCALED, INIT_ZERO, INIT_ONE };

/* How a tensor is split over the tp ranks (Megatron):
 *   SHARD_NONE   replicated (LayerNorms, row-parallel biases, wpe)
 *   SHARD_ROWS   one contiguous block of output rows (fc, vocabulary of wte)
 *   SHARD_ROWS3  a block of each of the q, k and v thirds (qkv: whole heads)
 *   SHARD_COLS   one contiguous block of input columns (attproj, fcproj) */
enum shard_kind { SHARD_NONE, SHARD_ROWS, SHARD_ROWS3, SHARD_COLS };

/* One row of the tensor table, which allocation, initialisation, the
 * optimizer and the checkpoint all walk. */
struct param_info {
    const char *name;     /* checkpoint name: "wte", or "qkv_w" under /model/h.<l>/ */
    int per_layer;
    int decay;            /* AdamW weight decay applies (2-D weights) */
    enum init_kind init;
    enum shard_kind shard;
};
extern const struct param_info param_table[NUM_PARAMS];

struct model_dims {
    int L, C, NH, HS, T, V, Vp; /* logical sizes; Vp = V padded to 128*tp */
    int Lp, l0;                 /* layers on this rank and the first one's global index */
    int tp, tp_rank;            /* tensor-parallel split (1, 0 without TP) */
    int sp;                     /* sequence parallel: the residual stream holds N/tp rows */
};

/* Logical shape of one tensor (one layer's slice for per-layer tensors);
 * vectors are (n, 1).  wte is (Vp, C) here, (V, C) in checkpoints. */
void param_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols);
/* This rank's shard of it. */
void param_local_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols);
/* Logical (row, col) of local element (r, c) of this rank's shard. */
void param_logical_index(const struct model_dims *d, enum param_id id, size_t r, size_t c,
                         size_t *lr, size_t *lc);

struct activations {
    /* N = B*T rows; Ns = N/tp with sequence parallelism, else N.  The
     * residual stream (encoded, residual2/3, LayerNorm statistics) holds Ns
     * rows; LayerNorm outputs are kept gathered (N rows) for the matmuls. */
    float *encoded;                 /* (Ns,C) */
    float *ln1, *ln1_mean, *ln1_rstd; /* (Lp,N,C), (Lp,Ns) x2 */
    float *qkv;                     /* (Lp,N,3C/tp) */
    float *atty;                    /* (Lp,N,C/tp) */
    float *att;                     /* (Lp,B,NH/tp,T,T) */
    float *residual2;               /* (Lp,Ns,C) after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;          /* (Lp,N,4C/tp) */
    float *residual3;               /* (Lp,Ns,C) block outputs */
    float *lnf, *lnf_mean, *lnf_rstd; /* (N,C), (Ns) x2 */
    float *logits;                  /* (B,T,Vp/tp); dlogits in place in backward */
    float *ce_max, *ce_sums, *losses; /* (N), (2N): sum of exp then target logit, (N) */
    /* scratch, reused by every layer */
    float *full;                    /* (N,C) partial sums before a TP reduction */
    float *part;                    /* (Ns,C) this rank's rows of the residual stream */
    float *dresidual;               /* (Ns,C) gradient of the residual stream */
    float *dfull;                   /* (N,C) the gathered dresidual (SP) */
    float *dln_full, *dln_part;     /* (N,C), (Ns,C) */
    float *datty;                   /* (N,C/tp) */
    float *dqkv;                    /* (N,3C/tp) */
    float *dfch, *dfch_gelu;        /* (N,4C/tp) */
    float *datt;                    /* (B,NH/tp,T,T) */
    size_t bytes;
};

struct model {
    struct model_dims d;
    int B;                            /* micro-batch size the activations hold */
    int N, Ns;                        /* B*T rows, and the residual stream's rows */
    size_t size[NUM_PARAMS];          /* elements of each tensor on this rank */
    size_t num_params;                /* elements on this rank */
    float *params_mem, *grads_mem;
    float *param[NUM_PARAMS], *grad[NUM_PARAMS];
    struct activations act;
};

/* Dimensions for cfg on this grid (validated beforehand). */
void model_dims_init(struct model_dims *d, const struct config *cfg, const struct grid *g);

/* Allocate parameters, gradients (zeroed) and activations for micro-batch B;
 * initialise the weights from seed as DESIGN.md §4 says. */
void model_init(struct model *m, const struct model_dims *d, int B, uint64_t seed);
void model_free(struct model *m);

/* Forward of one micro-batch; returns the sum of its token losses.  c may
 * be NULL when tp = 1 (no collectives). */
double model_forward(struct model *m, struct comm *c, const int32_t *inputs, const int32_t *targets);
/* Backward of the micro-batch last run forward, dloss per token (usually
 * 1/(global tokens)); parameter gradients accumulate. */
void model_backward(struct model *m, struct comm *c, const int32_t *inputs, const int32_t *targets,
                    float dloss);
void model_zero_grad(struct model *m);

/* Parameters of the whole logical model (all ranks), and the same without
 * the position table: nanoGPT's N for FLOPs per token. */
int64_t model_logical_params(const struct model_dims *d);
/* Training FLOPs per token: 6N + 12 L C T. */
double model_flops_per_token(const struct model_dims *d);

#endif
