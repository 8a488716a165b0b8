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

/* One row of the tensor table, which allocation, initialisation, the
 * optimizer and the checkpoint all walk. */
struct param_info {
    const char *name;     /* checkpoint name: "wte", or "qkv_w" under /model/h.<l>/ */
    int per_layer;
    int decay;            /* AdamW weight decay applies (2-D weights) */
    enum init_kind init;
};
extern const struct param_info param_table[NUM_PARAMS];

struct model_dims {
    int L, C, NH, HS, T, V, Vp; /* logical sizes; Vp = V padded to 128*tp */
    int Lp, l0;                 /* layers on this rank and the first one's global index */
};

/* Logical shape of one tensor (one layer's slice for per-layer tensors). */
void param_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols);

struct activations {
    float *encoded;                 /* (B,T,C) */
    float *ln1, *ln1_mean, *ln1_rstd; /* (Lp,B,T,C), (Lp,B,T) x2 */
    float *qkv;                     /* (Lp,B,T,3C) */
    float *atty;                    /* (Lp,B,T,C) */
    float *att;                     /* (Lp,B,NH,T,T) */
    float *residual2;               /* (Lp,B,T,C) after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fch_gelu;          /* (Lp,B,T,4C) */
    float *residual3;               /* (Lp,B,T,C) block outputs */
    float *lnf, *lnf_mean, *lnf_rstd; /* (B,T,C), (B,T) x2 */
    float *logits;                  /* (B,T,Vp); dlogits in place in backward */
    float *ce_max, *ce_sum, *ce_tlogit, *losses; /* (B,T) */
    /* backward scratch, reused by every layer */
    float *dresidual;               /* (B,T,C) gradient of the residual stream */
    float *dbt_c, *dbt_c2;          /* (B,T,C) */
    float *dqkv;                    /* (B,T,3C) */
    float *dfch, *dfch_gelu;        /* (B,T,4C) */
    float *datt;                    /* (B,NH,T,T) */
    float *scratch;                 /* (B,T,C) forward temporary */
    size_t bytes;
};

struct model {
    struct model_dims d;
    int B;                            /* micro-batch size the activations hold */
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

/* Forward of one micro-batch; returns the sum of its token losses. */
double model_forward(struct model *m, const int32_t *inputs, const int32_t *targets);
/* Backward of the micro-batch last run forward, dloss per token (usually
 * 1/(global tokens)); parameter gradients accumulate. */
void model_backward(struct model *m, const int32_t *inputs, const int32_t *targets, float dloss);
void model_zero_grad(struct model *m);

/* 64-bit hash of this rank's parameter bytes (replica consistency checks). */
uint64_t model_params_hash(const struct model *m);

/* Parameters of the whole logical model (all ranks), and the same without
 * the position table: nanoGPT's N for FLOPs per token. */
int64_t model_logical_params(const struct model_dims *d);
/* Training FLOPs per token: 6N + 12 L C T. */
double model_flops_per_token(const struct model_dims *d);

#endif
