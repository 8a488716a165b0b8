/* cp.h -- context parallelism: the cp ranks of a group share every
 * sequence.  The sequence is cut into 2cp chunks of c = T / (2cp)
 * positions; rank r holds chunks r and 2cp-1-r (its Tl = 2c rows: rows
 * [0, c) are positions r*c ..., rows [c, 2c) positions (2cp-1-r)*c ...),
 * so that under the causal mask every rank has the same work (Megatron's
 * load balancing).  Every layer but attention is local to the rows;
 * attention is ring attention: the packed keys and values of each rank go
 * round the cp ring, one block a step, sent while the block before is
 * computed, each query chunk's softmax extended block by block (the fused
 * kernel's ATT_MERGE); the backward sends the blocks round again with the
 * gradients of their keys and values, which arrive home after cp steps.
 * The gradients of the parameters are partial over the cp ranks and reduced
 * with dp's (CG_DP spans dp * cp). */
#ifndef TRIAD_CP_H
#define TRIAD_CP_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "model.h"

/* The position in the sequence of this rank's local row l (0 <= l < Tl). */
static inline int cp_position(const struct model_dims *d, int l)
{
    int c = d->Tl / 2;
    if (d->cp <= 1) return l;
    return l < c ? d->cp_rank * c + l : (2 * d->cp - 1 - d->cp_rank) * c + (l - c);
}

/* Floats of the ring's buffers in the model's scratch (0 without cp). */
size_t cp_scratch_floats(const struct model_dims *d, int B);

/* Attention of the rows held (qkv (B,Tl,qkv cols) after the rotary
 * embedding) over the whole causal context: out (B,Tl,C/tp) and lse
 * (B,NH/tp,Tl), as attention_forward over the full sequence would give for
 * these rows.  buf: cp_scratch_floats of scratch.  Collective over CG_CP. */
void cp_attention_forward(struct model *m, struct comm *c, float *buf, float *out, float *lse, const float *qkv);
/* dqkv (B,Tl,qkv cols) overwritten with the gradient of the whole ring's
 * loss with respect to this rank's q, k and v.  Collective over CG_CP. */
void cp_attention_backward(struct model *m, struct comm *c, float *buf, float *dqkv, const float *dout,
                           const float *out, const float *qkv, const float *lse);
/* Both add to m->cp_hidden_s the seconds the ring's messages were in
 * flight while this rank computed blocks, and to m->cp_wait_s those it
 * waited for them afterwards. */

#endif
