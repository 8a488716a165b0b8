/* model.h -- the model's parameters (this rank's shards), activations,
 * forward and backward of this rank's layers, for both block families:
 * gpt2 and llama (docs/design.md, docs/formats.md). */
#ifndef TRIAD_MODEL_H
#define TRIAD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "cp.h"
#include "device.h"
#include "precision.h"
#include "shape.h"
#include "topo.h"

struct moe_state;

/* The parameter tensors.  Per-layer tensors are stored for this rank's
 * layers of the tensor's layer set back to back (param_info.layers: every
 * layer, the MoE layers or the leading dense ones): (that set's local
 * layers, shape...), a layer's part at param_layer_offset.  A family
 * leaves some out (param_present): llama has no wpe and no biases, and its
 * LN weights are RMSNorm's; fc is gate and up stacked, fcproj is down;
 * lm_head is the untied LM head (tie_embeddings = .false.).  A mixture of experts
 * (docs/moe.md) replaces the MLP by a router (router_w), the routed
 * experts, each a SwiGLU (expert fc and fcproj: one slice per expert of
 * this rank), and the shared experts as one SwiGLU in fc and fcproj with
 * the gate shared_gate_w.  A mixture's leading dense layers (model.Ld)
 * keep a dense SwiGLU of width Fd in dfc and dfcproj (checkpoint: fc_w and
 * fcproj_w of those layers); the MoE layers' tensors are absent there. */
enum param_id {
    P_WTE, P_WPE, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
    P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, P_LNFW, P_LNFB, P_LMHEAD, P_DFCW, P_DFCPROJW,
    P_ROUTERW, P_SHGATEW, P_EXPFCW, P_EXPPROJW, NUM_PARAMS /* (the experts' last: the flat layout ends with them) */
};

enum init_kind { INIT_NORMAL, INIT_NORMAL_SCALED, INIT_ZERO, INIT_ONE };

/* How a tensor is split over the tp ranks (Megatron):
 *   SHARD_NONE   replicated (norms, row-parallel biases, wpe)
 *   SHARD_ROWS   a contiguous block of the output rows of each of its row
 *                parts: the vocabulary of wte and lm_head, gpt2's fc; q, k
 *                and v of qkv (whole heads of each); llama's gate and up
 *   SHARD_COLS   one contiguous block of input columns (attproj, fcproj) */
enum shard_kind { SHARD_NONE, SHARD_ROWS, SHARD_COLS };

/* Which layers hold a per-layer tensor: every one; of a mixture only its
 * MoE layers (every layer of a dense model: the MLP's tensors); or only a
 * mixture's leading dense layers. */
enum layer_set { LAYERS_ALL, LAYERS_MOE, LAYERS_DENSE };

/* One row of the tensor table, which allocation, initialisation, the
 * optimizer and the checkpoint all walk. */
struct param_info {
    const char *name;     /* checkpoint name: "wte", or "qkv_w" under /model/h.<l>/ */
    int per_layer;
    int decay;            /* AdamW weight decay applies (2-D weights) */
    enum init_kind init;
    enum shard_kind shard;
    int sp_partial;       /* under sequence parallelism each tp rank's gradient is a partial sum (LayerNorms) */
    int expert;           /* one slice per routed expert of each layer: checkpoint /model/h.<l>/expert.<e>/<name> */
    enum layer_set layers; /* (per-layer tensors) */
};
extern const struct param_info param_table[NUM_PARAMS];

struct model_dims {
    int L, C, NH, HS, T, V, Vp; /* logical sizes; Vp = V padded to 128*tp */
    int llama;                  /* the block family (model.arch) */
    int NKV, F;                 /* key/value heads; MLP hidden width (a mixture of experts: the shared
                                   experts', 0 without) */
    int E, K, Fe;               /* mixture of experts: routed experts (0: a dense MLP), experts per token,
                                   an expert's hidden width */
    int Ld, Fd;                 /* a mixture's leading dense layers (0 .. Ld-1) and their MLP's hidden width */
    int Lpd;                    /* of them, those on this rank: its first Lpd local layers (the local layers
                                   run in the global order) */
    int El;                     /* the routed experts this rank holds: E / ep */
    int ep, ep_rank;            /* expert parallelism (grid.ep): this rank holds experts [ep_rank El, +El) */
    int qkv_bias;               /* q, k and v have biases (gpt2; llama with model.qkv_bias) */
    int shared_gate;            /* the shared experts' output is scaled by sigmoid(x . shared_gate_w) */
    int sigmoid_router, norm_topk; /* router scores by sigmoid (else softmax); top-k weights renormalised */
    double aux_coef, z_coef, capacity; /* train.moe_aux_loss, moe_z_loss, moe_capacity */
    int tied;                   /* the LM head is wte */
    float eps;                  /* of the norms */
    double rope_theta;
    struct rope_scaling {       /* model.rope_scaling = 'llama3' (llama3 = 1): the remap of the rotary
                                   frequencies (model_rope_freq); llama3 = 0 leaves them as they are */
        int llama3;
        double factor, low_freq_factor, high_freq_factor, original_max; /* model.rope_factor, ... */
    } rope;
    int64_t params;             /* logical parameters (run_shape) */
    int tp, tp_rank;            /* tensor-parallel split (1, 0 without TP) */
    int sp;                     /* sequence parallel: the residual stream holds N/tp rows */
    int pp, pp_rank, v;         /* pipeline stages, this rank's, model chunks per rank */
    int vshape;                 /* zbv: a rank's two chunks in a V, chunk 1 of rank r at virtual stage
                                   2pp-1-r (rank 0 holds the first stage and the last) */
    int Lc;                     /* layers per chunk: L / (pp * v) */
    int Lp;                     /* layers on this rank: v * Lc */
    int dpcp;                   /* ranks holding replicas of this rank's parameters: dp * cp (the
                                   gradients are reduced and ZeRO shards the flat buffers over them) */
    int dpcp_rank;              /* this rank's place among them (grid.dpcp_rank) */
    int cp, cp_rank;            /* context parallelism: the ranks sharing each sequence, this rank's */
    int Tl;                     /* positions of each sequence on this rank: T / cp, chunks cp_rank and
                                   2cp-1-cp_rank of the 2cp (cp.h) */
    int zero_stage;             /* the shape's: from 2 no full per-layer gradients (the layer_grads hook
                                   hands out buffers), at 3 no full per-layer parameters either (the
                                   layer_params hook gathers them) */
    int recompute;              /* RECOMPUTE_* */
    int Lr;                     /* full recompute: the first Lr layers of each chunk */
    enum precision prec;        /* storage precision of parameters and activations */
    int pack_acts;              /* bf16/fp16: the stored layers packed in 16 bits (train.pack_activations) */
};

enum { RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL };

/* The block's tensor-parallel regions: attention and the MLP, each entered
 * through its norm (model_norm_to_tp) and left by a row-parallel matmul
 * (model_reduce_from_tp) in block_forward and block_backward (model.c).
 * Per region and micro-batch one collective of the (N,C) stream leaves it
 * forward and one enters it backward (with sequence parallelism an
 * all-gather beside each): the planner counts its TP traffic from this,
 * and regression/plan.sh holds the count to the bytes comm.c counts. */
enum { MODEL_TP_REGIONS = 2 };

/* This rank's widths: its query and kv heads, the columns of qkv (its q, k
 * and v heads), of the MLP's first product (llama: gate and up) and of the
 * MLP's hidden activation.  Of a mixture of experts, the last two are per
 * token: the shared experts' columns, then k rows of a routed expert's
 * (each token's k choices, the most the experts of a micro-batch take). */
static inline int model_q_heads(const struct model_dims *d) { return d->NH / d->tp; }
static inline int model_kv_heads(const struct model_dims *d) { return d->NKV / d->tp; }
static inline int model_qkv_cols(const struct model_dims *d) { return (d->NH + 2 * d->NKV) / d->tp * d->HS; }
/* The most routed rows a rank's experts take per token of its micro-batch:
 * its own k choices, or under expert parallelism those of the ep ranks'
 * tokens, each of which sends at most min(k, El) rows to one rank (the
 * dropless bound, which the capacity does not lower). */
static inline int model_moe_rows(const struct model_dims *d)
{
    return d->ep > 1 ? d->ep * (d->K < d->El ? d->K : d->El) : d->K;
}
/* Is global layer l a mixture's MoE layer (not a dense model's, nor one of a
 * mixture's leading dense layers)? */
static inline int model_moe_layer(const struct model_dims *d, int l) { return d->E && l >= d->Ld; }
/* Layer l's widths; model_fc_cols and model_hidden_cols: the most of any
 * layer, the width of a layer's stored activations. */
/* (the width of a dense layer's MLP: F of a dense model, Fd of a mixture's leading layers) */
static inline int model_dense_width(const struct model_dims *d) { return d->E ? d->Fd : d->F; }
static inline int model_layer_fc_cols(const struct model_dims *d, int l)
{
    if (!model_moe_layer(d, l)) return (d->llama ? 2 : 1) * model_dense_width(d) / d->tp;
    return (2 * d->F + 2 * model_moe_rows(d) * d->Fe) / d->tp;
}
static inline int model_layer_hidden_cols(const struct model_dims *d, int l)
{
    return model_moe_layer(d, l) ? (d->F + model_moe_rows(d) * d->Fe) / d->tp : model_dense_width(d) / d->tp;
}
static inline int model_fc_cols(const struct model_dims *d)
{
    int a = model_layer_fc_cols(d, 0), b = model_layer_fc_cols(d, d->L - 1);
    return a > b ? a : b;
}
static inline int model_hidden_cols(const struct model_dims *d)
{
    int a = model_layer_hidden_cols(d, 0), b = model_layer_hidden_cols(d, d->L - 1);
    return a > b ? a : b;
}

/* The position in the sequence of this rank's local row l (cp.h). */
static inline int model_position(const struct model_dims *d, int l) { return cp_position(d->cp, d->cp_rank, d->Tl, l); }

/* llama: the rotary frequency of channel pair i (0 <= i < HS/2), theta^(-2i/HS),
 * remapped by d->rope (Hugging Face's rope_type 'llama3'); in double. */
double model_rope_freq(const struct model_dims *d, int i);

/* What ring attention needs of a micro-batch of B sequences (cp.h). */
static inline struct cp_dims model_cp_dims(const struct model_dims *d, int B)
{
    return (struct cp_dims){.rank = d->cp_rank, .size = d->cp, .B = B, .Tl = d->Tl, .NH = model_q_heads(d),
                            .NKV = model_kv_heads(d), .HS = d->HS, .prec = d->prec};
}

/* The virtual stage of this rank's chunk c: c*pp + pp_rank (Megatron's
 * interleaved layout), or in a V (vshape) pp_rank for chunk 0 and
 * 2pp-1-pp_rank for chunk 1. */
int model_virtual_stage(const struct model_dims *d, int chunk);
/* This rank's local layer j (0 .. Lp-1) is global layer
 * model_virtual_stage(chunk) * Lc + j % Lc with chunk = j / Lc. */
int model_global_layer(const struct model_dims *d, int j);
/* The local index of global layer l, or -1 if another rank holds it. */
int model_local_layer(const struct model_dims *d, int l);
/* Does this rank hold the embedding (first virtual stage) / the head (last)? */
int model_has_embedding(const struct model_dims *d);
int model_has_head(const struct model_dims *d);
/* Do two ranks hold the tied wte (the first stage's and the last's), whose
 * gradients are summed over the embedding group? */
int model_wte_on_two_ranks(const struct model_dims *d);

/* The row parts of a SHARD_ROWS tensor, each split over tp on its own (q,
 * k and v of qkv: whole heads of each; llama's gate and up of fc): their
 * logical rows into part[], their number returned. */
int param_row_parts(const struct model_dims *d, enum param_id id, size_t part[3]);
/* Does the family have tensor id at all? */
int param_present(const struct model_dims *d, enum param_id id);

/* The communicator over which tensor id's replicas live, whose gradients
 * are summed over it: the dp * cp ranks (CG_DP), or for an expert's under
 * expert parallelism the replicas of the rank's experts (CG_EDP). */
static inline enum comm_group param_group(const struct model_dims *d, enum param_id id)
{
    return param_table[id].expert && d->ep > 1 ? CG_EDP : CG_DP;
}
/* Where the experts' tensors begin in the flat layout (its end without). */
static inline size_t model_experts_at(const struct model_dims *d, const size_t at[NUM_PARAMS], size_t flat)
{
    return d->ep > 1 ? at[P_EXPFCW] : flat;
}

/* A tensor's slices: one for a global tensor, one per layer of a per-layer
 * tensor, one per layer and expert of an expert's (layer-major).  A slice
 * is the unit of the checkpoint's datasets, of model_set_tensor and of the
 * initial values.  Logical: of the whole model (0 if the family has none);
 * local: of this rank, whose slice j is logical slice param_slice_global. */
int param_slices(const struct model_dims *d, enum param_id id);
int param_local_slices(const struct model_dims *d, enum param_id id);
int param_slice_global(const struct model_dims *d, enum param_id id, int j);
/* The local index of logical slice g, or -1 if another rank holds it. */
int param_slice_local(const struct model_dims *d, enum param_id id, int g);
/* Does logical slice g exist (a per-layer tensor of a layer set: layer g's
 * or g / E's holds it, param_info.layers)?  Absent slices are skipped
 * wherever the slices are walked: param_slices counts the range. */
int param_slice_exists(const struct model_dims *d, enum param_id id, int g);
/* Local layer j's part of per-layer tensor id (its experts' slices, back to
 * back): its floats (0: the layer has none) and where it starts in the
 * tensor's local storage. */
size_t param_layer_floats(const struct model_dims *d, enum param_id id, int j);
size_t param_layer_offset(const struct model_dims *d, enum param_id id, int j);
/* Its name as the checkpoint's dataset under /model: "wte", "h.3/qkv_w",
 * "h.3/expert.5/fc_w". */
void param_slice_name(const struct model_dims *d, enum param_id id, int g, char *name, size_t len);

/* Is this rank's gradient of tensor id only its share of a sum over tp (a
 * replicated tensor applied to the N/tp rows of sequence parallelism)? */
int param_sp_partial(const struct model_dims *d, enum param_id id);

/* Logical shape of one tensor (one layer's slice for per-layer tensors);
 * vectors are (n, 1).  wte is (Vp, C) here, (V, C) in checkpoints. */
void param_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols);
/* This rank's shard of it. */
void param_local_shape(const struct model_dims *d, enum param_id id, size_t *rows, size_t *cols);
/* Logical (row, col) of local element (r, c) of this rank's shard. */
void param_logical_index(const struct model_dims *d, enum param_id id, size_t r, size_t c,
                         size_t *lr, size_t *lc);

/* What one layer keeps from forward for backward.  N = B*T rows; Ns = N/tp
 * with sequence parallelism, else N.  The residual stream (residual2,
 * LayerNorm statistics) holds Ns rows; LayerNorm outputs are kept gathered
 * (N rows) for the matmuls. */
struct layer_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* (N,C), (Ns) x2 (RMSNorm: no mean) */
    float *qkv;                     /* (N, model_qkv_cols): llama's q and k after the rotary embedding */
    float *atty;                    /* (N,C/tp) */
    float *lse;                     /* (B,NH/tp,T) attention's log-sum-exp per row (fp32) */
    float *residual2;               /* (Ns,C) after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch;                     /* (N, model_fc_cols) the MLP's first product */
    float *fch_gelu;                /* (N, model_hidden_cols) its activation (GELU, SwiGLU) */
};

/* The activations of one model chunk for one micro-batch in flight.  The
 * chunk's stored layers (all but the Lr fully recomputed ones) are packed:
 * each field below holds (Lc - Lr) layers' worth.  Layer outputs are always kept: they are
 * the inputs a recomputation starts from. */
struct chunk_acts {
    int mb, chunk;                  /* what the slot holds; mb = -1 when free */
    int32_t *inputs, *targets;      /* (N) tokens of the micro-batch */
    float *input;                   /* (Ns,C) the chunk's input: embedding or received */
    float *dout;                    /* (Ns,C) gradient of the chunk's output (received) */
    struct layer_acts stored;       /* each field: (Lc - Lr, shape) (fp32) */
    uint16_t *packed;               /* bf16/fp16: the same layers packed in 16 bits, one after the other */
    float *residual3;               /* (Lc,Ns,C) block outputs; the last is the chunk's output */
    /* the head, on the rank holding the last virtual stage */
    float *lnf, *lnf_mean, *lnf_rstd; /* (N,C), (Ns) x2 */
    float *logits;                  /* (N,Vp/tp); after the cross-entropy's sumexp its exponentials in the
                                     * real columns (the padding's logits stay), then dlogits in place in
                                     * backward */
    float *ce_max, *ce_sums, *losses; /* (N), (2N): sum of exp then target logit, (N) */
};

/* What one layer's weight gradients (a zero-bubble pipeline's W) need
 * beyond its chunk's slot, kept by its B: the gradients of the outputs of
 * its matmuls and norms, and (layers recomputed in full, whose activations
 * live only in the scratch) the inputs of those, with the norms'
 * statistics; the fields a W does not read (qkv, lse, fch) stay NULL. */
struct layer_wgrad {
    float *dfcproj, *dfch, *dln2;   /* (N,C) gathered, (N, model_fc_cols), (Ns,C) */
    float *dattproj, *dqkv, *dln1;  /* (N,C) gathered, (N, model_qkv_cols), (Ns,C) */
    float *moe_logits, *moe_gate;   /* a mixture of experts: the router's logits (N,E), the shared experts' gate
                                       (N), which W routes again by (it reads no parameter) */
    float *moe_dlogits, *moe_dgate; /* and their gradients (the MLP's output gradient in dfcproj, its experts'
                                       first products' in dfch) */
    struct layer_acts in;           /* recomputed layers: ln1, atty, residual2, ln2, fch_gelu and statistics */
};

/* A backward split in two (B, then W later) keeps this between them for
 * one micro-batch and chunk: each layer's struct layer_wgrad, one after the
 * other, then the head's and the embedding's output gradients where those
 * live.  The rest W reads from the chunk's slot, which is held until W. */
struct chunk_wgrad {
    int mb, chunk;                  /* what it holds; mb = -1 when free */
    float *mem;                     /* the layers' fields (model_layer_wgrad) */
    float *dlnf;                    /* (Ns,C) gradient of the final norm's output (the head) */
    float *demb;                    /* (Ns,C) gradient of the embedding's output (the first stage) */
};

/* Scratch shared by all slots (one forward or backward runs at a time). */
struct scratch {
    float *full;                    /* (N,C) partial sums before a TP reduction */
    float *part;                    /* (Ns,C) this rank's rows of the residual stream */
    float *dresidual;               /* (Ns,C) gradient of the residual stream */
    float *dfull;                   /* (N,C) the gathered dresidual (SP) */
    float *dln_full, *dln_part;     /* (N,C), (Ns,C) */
    float *datty;                   /* (N,C/tp) */
    float *dqkv;                    /* (N, model_qkv_cols) */
    float *dfch, *dfch_gelu;        /* (N, model_fc_cols), (N, model_hidden_cols) */
    float *cp;                      /* ring attention's blocks (cp_scratch_floats; NULL without cp) */
    /* a mixture of experts (moe.c; NULL without): the rows the experts take (N Kx, C; Kx =
     * model_moe_rows) twice, the router's logits (N, E) fp32 and their gradient, the shared experts' gate
     * (N), each choice's weight and routed row (N K), each row's weight (N Kx) and token (N K), the
     * d(weight)s by row then d(gate)s (N Kx + N) */
    float *moe_x, *moe_y, *moe_logits, *moe_gate, *moe_wslot, *moe_wrow, *moe_dot;
    int32_t *moe_row, *moe_token;
    float *moe_send, *moe_wsend, *moe_dwl; /* expert parallelism: this rank's routed rows (N K, C), their weights
                                              and d(weight)s (N K) on the way to and from the experts */
    struct layer_acts layer;        /* one layer's worth, for recomputed and (bf16/fp16) packed layers */
};

/* ZeRO's slices of the flat layout.  Without ZeRO one part, all of it,
 * kept whole.  With ZeRO (zero_stage >= 1) each part [at, at + n) is cut
 * into equal shares over its replicas: the dense tensors over the dp * cp
 * ranks (CG_DP); under expert parallelism the experts' tensors, last in
 * the layout, are a second part over their edp replicas (CG_EDP).  This
 * rank's share of part k is [offset, offset + shard) of the layout, kept
 * at index `state` of the sliced buffers (the optimizer's state, ZeRO-3's
 * parameters: the parts' shares back to back, floats in all). */
struct zero_part {
    enum comm_group group;
    int ranks, rank;
    size_t at, n, shard, offset, state;
};
struct zero_slices {
    int n;
    struct zero_part part[2];
    size_t floats;
};

struct model {
    struct model_dims d;
    const struct device *k;          /* where the buffers below live and what computes on them */
    float *host;                      /* host scratch: (2N) floats or int32 */
    int B;                            /* micro-batch size the activations hold */
    int N, Ns;                        /* B*T rows, and the residual stream's rows */
    size_t size[NUM_PARAMS];          /* elements of each tensor on this rank (0: held elsewhere) */
    size_t num_params;                /* elements on this rank */
    size_t flat;                      /* floats of the flat layout of every tensor on this rank: each
                                         16-aligned, the total a multiple of 16 * dp (ZeRO's equal shards) */
    size_t at[NUM_PARAMS];            /* where each tensor starts in it */
    float *params_mem, *grads_mem;    /* the flat layout, or (grads_mem under ZeRO-2, params_mem under
                                         ZeRO-3) the tensors outside the layers, one after the other */
    float *param[NUM_PARAMS], *grad[NUM_PARAMS]; /* NULL for per-layer tensors under ZeRO-3 (param) and
                                                    ZeRO-2 (grad) */
    int grads_cleared;                /* every grad[] left zero by the last update (optim_update without
                                         ZeRO): model_zero_grad skips them once */
    struct zero_slices zs;            /* ZeRO's slices of the flat layout (one part, whole, without ZeRO) */
    /* ZeRO-3: this rank's shares of the flat layout (zs) in fp32, the one
     * copy of the layers' parameters (the optimizer's master weights);
     * NULL otherwise */
    float *shard_mem;
    unsigned long param_version;      /* bumped when the parameters change (a gathered copy is stale) */
    float *dwte_embed;                /* the embedding's share of wte's gradient; the head's
                                         accumulates in grad[P_WTE] (tied); optim adds them per step */
    /* Host tables (the tokens are host memory): the rows of this rank's
     * vocabulary shard the embedding's backward wrote into dwte_embed since
     * it was last zeroed, 1 a row; the merge and the zeroing visit those
     * rows alone (every other row is zero).  NULL: the whole table. */
    unsigned char *wte_rows;
    float *rope_cos, *rope_sin;       /* llama: (T, HS/2) the rotary embedding's angles */
    int nslots;                       /* micro-batches in flight this rank can hold */
    struct chunk_acts *slot;
    int nrecv;                        /* the pipeline's activation receive buffers, Ns x C floats each */
    float *recv;
    int nwslots;                      /* split backwards (B done, W pending) this rank can hold */
    struct chunk_wgrad *wslot;
    struct scratch scr;
    /* Packed activations: the stored layer whose activations the scratch
     * still holds, its packing deferred until the scratch is needed again
     * (model_acts.c), and its index; NULL: none. */
    struct chunk_acts *scr_pending;
    int scr_pending_layer;
    size_t act_bytes;                 /* activations, what pending weight gradients keep, scratch */
    /* called after the backward of local layer j, when set (overlap of the
     * data-parallel reduction with the rest of the backward) */
    void (*layer_done)(void *ctx, int j);
    void *layer_done_ctx;
    /* ZeRO-2: a zeroed buffer for local layer j's parameter gradients, its
     * per-layer tensors back to back in table order (model_layer_floats) */
    float *(*layer_grads)(void *ctx, int j);
    void *layer_grads_ctx;
    /* ZeRO-3: local layer j's parameters gathered, its per-layer tensors
     * back to back in table order (model_layer_floats), valid until the
     * next call; `next` is the layer the caller needs after it (-1: not
     * known), whose gather may start meanwhile */
    const float *(*layer_params)(void *ctx, int j, int next);
    void *layer_params_ctx;
    struct moe_state *moe;            /* a mixture of experts' routing and statistics (moe.h); NULL without */
    struct cp_time cp_time; /* ring attention's messages: hidden and waited for (cp.h) */
    /* watching for the first forward output that is not finite (set after a
     * non-finite loss): its place in forward order, and its name */
    int watch;
    long bad_order;                   /* LONG_MAX: none seen */
    char bad_name[64];
};

/* Floats of one activation slot and of the shared scratch, for the planner
 * and the allocator alike. */
size_t model_slot_floats(const struct model_dims *d, int B);
size_t model_scratch_floats(const struct model_dims *d, int B);
/* Floats that one pending weight gradient keeps (struct chunk_wgrad). */
size_t model_wslot_floats(const struct model_dims *d, int B);
/* Floats of one pipeline receive buffer (a chunk's input: B T C, / tp under SP). */
size_t model_recv_floats(const struct model_dims *d, int B);
/* A range [at, at + n) of the flat layout (model.flat). */
struct flat_range {
    size_t at, n;
};

/* The part [*lo, *hi) of range [a, a + n) that lies in [at, at + len) (a
 * ZeRO slice); 0 if none. */
static inline int flat_meet(size_t a, size_t n, size_t at, size_t len, size_t *lo, size_t *hi)
{
    *lo = a > at ? a : at;
    *hi = a + n < at + len ? a + n : at + len;
    return *lo < *hi;
}

/* The flat layout of this rank's tensors: where each starts (at), each
 * 16-aligned; its floats returned, a multiple of 16 * dp (ZeRO's equal
 * shards).  Under expert parallelism the tensors before the experts end on
 * such a multiple too (model_zero_slices). */
size_t model_flat_layout(const struct model_dims *d, size_t at[NUM_PARAMS]);

/* This rank's ZeRO slices of a flat layout of `flat` floats: without ZeRO one
 * part, the whole buffer; with it part 0 (the dense tensors, sliced over
 * dp x cp) and, under expert parallelism, part 1 (the experts, sliced over
 * their own replicas, the expert-data-parallel group). */
void model_zero_slices(const struct model_dims *d, const size_t at[NUM_PARAMS], size_t flat, struct zero_slices *z);
/* The part a flat range lies in (a range never spans two: each is within a tensor). */
static inline const struct zero_part *zero_part_of(const struct zero_slices *z, size_t a)
{
    return z->n > 1 && a >= z->part[1].at ? &z->part[1] : &z->part[0];
}
/* The part [*lo, *hi) of flat range [a, a + n) in this rank's shares, and
 * where *lo is kept (*state); 0 if none. */
static inline int zero_slice_part(const struct zero_slices *z, size_t a, size_t n, size_t *lo, size_t *hi,
                                  size_t *state)
{
    const struct zero_part *p = zero_part_of(z, a);
    if (!flat_meet(a, n, p->offset, p->shard, lo, hi)) return 0;
    *state = p->state + (*lo - p->offset);
    return 1;
}
/* Floats of local layer j's per-layer tensors on this rank; the most of
 * any of its layers (a buffer for one). */
size_t model_layer_floats_of(const struct model_dims *d, int j);
size_t model_layer_floats(const struct model_dims *d);
/* Floats of the tensors outside the layers, one after the other: grads_mem
 * under ZeRO-2, params_mem under ZeRO-3. */
size_t model_rest_floats(const struct model_dims *d);
/* The logical tensors of the family, one per layer of a per-layer tensor
 * (and expert): the datasets of a checkpoint.  The gradient norm's entries:
 * the same over every layer alike (param_slices: 0 where a layer has none). */
int model_logical_tensors(const struct model_dims *d);
int model_norm_terms(const struct model_dims *d);
/* Elements of tensor id on this rank (0 where another stage holds it). */
size_t model_tensor_size(const struct model_dims *d, enum param_id id);

/* Dimensions for cfg of shape s, this rank's coordinates from g (validated beforehand). */
void model_dims_init(struct model_dims *d, const struct config *cfg, const struct run_shape *s, const struct grid *g);

/* How many of each buffer a rank's schedule holds at once: activation
 * sets (micro-batches from forward to the end of their backward), buffers
 * for a chunk's input received ahead of its slot (the pipeline's
 * look-ahead), and pending weight gradients (split backwards between B and
 * W; 0 without a zero-bubble schedule). */
struct model_buffers {
    int slots, recv, wslots;
};

/* Allocate parameters, gradients (zeroed) and nb's buffers for
 * micro-batches of B sequences with k's memory; initialise the weights from
 * seed (model_init_tensor: each element from its logical position). */
void model_init(struct model *m, const struct model_dims *d, const struct device *k, int B, struct model_buffers nb,
                uint64_t seed);
void model_free(struct model *m);

/* A free activation slot for (mb, chunk), or the one holding it already. */
struct chunk_acts *model_slot(struct model *m, int mb, int chunk);
void model_slot_release(struct chunk_acts *a);
/* The micro-batch's tokens (host arrays of B*T) into slot a: this rank's
 * rows of them (N: under cp its two chunks of each sequence). */
void model_set_tokens(struct model *m, struct chunk_acts *a, const int32_t *inputs, const int32_t *targets);

/* Forward of one chunk for the micro-batch in slot a.  The first virtual
 * stage embeds a->inputs; the others start from a->input.  The last virtual
 * stage returns the sum of the micro-batch's token losses (0 elsewhere).
 * c may be NULL when tp = 1. */
double model_chunk_forward(struct model *m, struct comm *c, struct chunk_acts *a);
/* After that forward on the last virtual stage: each token's loss, minus
 * the log-probability of its target, into out (B, T) host memory at its
 * position in its sequence (under cp this rank's positions alone; the
 * others are left as they are).  Alike on the tp ranks. */
void model_token_losses(struct model *m, const struct chunk_acts *a, float *out);
/* Backward of that chunk: the last virtual stage starts from the loss with
 * dloss per token, the others from a->dout.  Parameter gradients accumulate;
 * the gradient of the chunk's input is left in m->scr.dresidual (first
 * virtual stage: consumed by the embedding). */
void model_chunk_backward(struct model *m, struct comm *c, struct chunk_acts *a, float dloss);
/* The same backward in two parts (a zero-bubble pipeline's B and W).  B:
 * the input gradients only, left as model_chunk_backward leaves them, and
 * what the weight gradients need kept in w.  W, any time later with the
 * slot and w untouched: the parameter gradients, bit for bit those of
 * model_chunk_backward, the layer_grads and layer_done hooks called as it
 * calls them.  Neither reads the other's scratch. */
void model_chunk_backward_input(struct model *m, struct comm *c, struct chunk_acts *a, struct chunk_wgrad *w,
                                float dloss);
void model_chunk_backward_weight(struct model *m, struct comm *c, struct chunk_acts *a, struct chunk_wgrad *w);
/* A free pending-weight-gradient buffer for (mb, chunk), or the one holding it. */
struct chunk_wgrad *model_wslot(struct model *m, int mb, int chunk);
/* The one a B of (mb, chunk) kept, for its W; dies if there is none. */
struct chunk_wgrad *model_wslot_kept(struct model *m, int mb, int chunk);
void model_wslot_release(struct chunk_wgrad *w);

/* Local layer j's parameters in place (not under ZeRO-3), each per-layer
 * tensor's slice, NULL where the family or the layer has none; a mixture's
 * leading dense layer has its MLP (dfc, dfcproj) in the places of fc and
 * fcproj, as the block reads them. */
void model_layer_params(const struct model *m, int j, const float *W[NUM_PARAMS]);
/* The flat ranges of local layer j's per-layer tensors, in table order
 * (increasing), into r (NUM_PARAMS entries at most); their number returned.
 * Packed back to back they are model_layer_floats long. */
int model_layer_ranges(const struct model *m, int j, struct flat_range *r);

/* Local layer j's slice of tensor id (j = 0 for the others) from host
 * memory (its local shape): into the tensor, or (ZeRO-3, a per-layer
 * tensor) the part of it in this rank's shard. */
void model_set_tensor(struct model *m, enum param_id id, int j, const float *host);
/* Where element i of that slice is stored on this rank, or NULL (ZeRO-3:
 * in another rank's shard; or the rank holds no such tensor). */
float *model_element(const struct model *m, enum param_id id, int j, size_t i);

/* Every gradient to zero for a new step (but those the last update left
 * zero: grads_cleared). */
void model_zero_grad(struct model *m);
/* grad[P_WTE] += dwte_embed: the head's and the embedding's shares of the
 * tied weight's gradient, added once per step (optim then sums the first and
 * last stage's copies over the embedding group); on a host table only the
 * rows the step's tokens wrote (wte_rows: the others add zero). */
void model_merge_embedding_grad(struct model *m);

/* The first parameter tensor holding a NaN or infinity on this rank, named
 * like the checkpoint ("h.3/fc_w"), or 0 if all are finite. */
int model_first_nonfinite_param(const struct model *m, char *name, size_t len);

/* Parameters of the whole logical model (all ranks). */
int64_t model_logical_params(const struct model_dims *d);
/* Training FLOPs per token: 6N + 12 L C T, N the parameters a token is multiplied by (not gpt2's
 * position table, nor the embedding of an untied head). */
double model_flops_per_token(const struct model_dims *d);
/* Estimated FLOPs of one chunk of this rank for one micro-batch of B
 * sequences: its forward, a split backward's B (input gradients, with the
 * attention backward and any recomputation) and W (weight gradients); a
 * fused backward is B + W.  On the rank holding the head its FLOPs are
 * spread over the rank's chunks.  What triad plan and triad schedule weigh
 * F, B and W by when no run has measured them. */
void model_action_flops(const struct model_dims *d, int B, double flops[3]);

#endif
