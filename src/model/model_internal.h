/* model_internal.h -- what the model's files share and nothing else uses:
 * model_params.c (the tensors), model_acts.c (the activations), model_tp.c
 * (the TP region operators), model.c (the maths). */
#ifndef TRIAD_MODEL_INTERNAL_H
#define TRIAD_MODEL_INTERNAL_H

#include "model.h"

/* The next n floats of an allocation, every tensor 64-byte aligned. */
float *model_carve(float **cursor, size_t n);

/* The initial values of tensor id's logical slice `slice` (param_slices)
 * on this rank: each element draws the number of its logical position, so
 * every decomposition starts from the serial run's weights. */
void model_init_tensor(float *p, const struct model_dims *d, enum param_id id, int slice, uint64_t seed);

/* Allocate nb's activation slots, receive buffers and pending weight
 * gradients, and the scratch, in one allocation. */
void model_acts_alloc(struct model *m, struct model_buffers nb);

/* Where layer i of a pending weight gradient keeps its fields. */
void model_layer_wgrad(const struct model *m, const struct chunk_wgrad *w, int i, struct layer_wgrad *lw);

/* Where layer i of slot a's chunk keeps its activations: the shared
 * one-layer scratch if it is recomputed in full or stored packed, else its
 * place among the slot's stored layers. */
void model_layer_acts(const struct model *m, const struct chunk_acts *a, int i, struct layer_acts *la);

/* bf16/fp16: store layer i's activations (in the scratch) into the slot's
 * packed memory after its forward, and load them back before its backward
 * (exact both ways); no-ops in fp32 and for recomputed layers.  The store
 * is deferred while the scratch holds the layer: model_pack_pending does
 * it before the scratch is overwritten (each layer's forward), and a
 * backward that finds its layer still there skips the load (the last
 * layer's, when the backward follows the forward), storing it only if
 * keep_packed (a weight-gradient pass will load it again). */
void model_pack_layer(struct model *m, struct chunk_acts *a, int i);
void model_pack_pending(struct model *m);
void model_unpack_layer(struct model *m, struct chunk_acts *a, int i, int keep_packed);

/* The forward's outputs, in the order it computes them: the embedding's
 * (layer -1), each block's, the head's (layer L).  The NaN watch names the
 * first that is not finite. */
enum fwd_out {
    OUT_EMBEDDING,
    OUT_LN1, OUT_QKV, OUT_ATTENTION, OUT_ATTPROJ, OUT_RESIDUAL2, OUT_LN2, OUT_FC, OUT_ACT, OUT_FCPROJ, OUT_BLOCK,
    OUT_LNF, OUT_LOGITS, OUT_LOSSES,
    NUM_FWD_OUTS
};

/* An output in the storage precision (bf16/fp16: rounded), forward with
 * the NaN watch's name and place, backward. */
void model_fwd_out(struct model *m, float *x, size_t n, int layer, enum fwd_out out, const char *what);
void model_bwd_out(const struct model *m, float *x, size_t n);
/* The same for the output of an activation's operation (ops.def's OP_A:
 * a norm's forward, the residual sum, gelu, swiglu, the cross-entropy's
 * backward), which the device may have rounded already (device.h's
 * acts_rounded). */
void model_act_out(struct model *m, float *x, size_t n, int layer, enum fwd_out out, const char *what);
void model_act_bwd_out(const struct model *m, float *x, size_t n);

/* The TP region operators (model_tp.c): Megatron's conjugate pairs over
 * tp_comm.  rows (Ns,C) -> the full (N,C) a column-parallel matmul reads;
 * partial sums (N,C) of a row-parallel matmul -> the stream's rows; the
 * family's norm of the stream's rows gathered in full; and the gradient of a
 * norm's output back into the stream (scr.dresidual), its parameters'
 * gradients now or (keep) their operand kept for a split backward's W
 * (rounded: dln_full already holds values of the run's precision). */
const float *model_gather_to_tp(const struct model *m, struct comm *c, float *full, const float *rows);
const float *model_reduce_from_tp(const struct model *m, struct comm *c, float *rows, float *partial);
void model_norm_to_tp(struct model *m, struct comm *c, float *full, float *mean, float *rstd, const float *inp,
                      const float *w, const float *b, int layer, enum fwd_out which, const char *what);
void model_norm_from_tp(struct model *m, struct comm *c, float *dln_full, float *dw, float *db, const float *inp,
                        const float *w, const float *mean, const float *rstd, float *keep, int rounded);

/* A mixture of experts in place of the MLP (moe.c; no-ops without one).
 * moe_forward: local layer j (global l) on the gathered norm output ln2
 * (N,C): its products into la's fch and fch_gelu (the shared experts' N
 * rows, then the routed rows), its output's partial sum over tp into out
 * (N,C).  moe_backward: from dout (N,C) gathered, the parameter gradients
 * into G, d(ln2) (this rank's partial sum over tp) into dln; dloss, d(loss)
 * / d(token loss) of the step, scales the auxiliary losses' gradients; a
 * split backward's B (lw) computes no parameter gradient and keeps in lw
 * what moe_weight, its W, needs: the output gradient, the first products'
 * gradients, the router's logits and gate and their gradients.
 * moe_replay: a backward's recomputation is under way (on), whose forward
 * counts no statistics. */
void moe_alloc(struct model *m);
void moe_free(struct model *m);
void moe_forward(struct model *m, struct comm *c, const struct layer_acts *la, const float *const *P, int j, int l,
                 float *out);
void moe_backward(struct model *m, struct comm *c, const struct layer_acts *la, const float *const *P,
                  float *const *G, const float *dout, float *dln, float dloss, struct layer_wgrad *lw);
void moe_weight(struct model *m, struct comm *c, const struct layer_acts *la, float *const *G,
                const struct layer_wgrad *lw);
void moe_replay(struct model *m, int on);

#endif
