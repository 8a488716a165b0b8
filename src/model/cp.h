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
#include "device.h"
#include "precision.h"

/* The position in the sequence of local row l (0 <= l < Tl) of cp rank
 * rank of cp. */
static inline int cp_position(int cp, int rank, int Tl, int l)
{
    int c = Tl / 2;
    if (cp <= 1) return l;
    return l < c ? rank * c + l : (2 * cp - 1 - rank) * c + (l - c);
}

/* What the ring needs of the model: this rank's place in the cp group, the
 * micro-batch's rows held and this tp rank's heads (model_cp_dims). */
struct cp_dims {
    int rank, size;    /* cp rank and group size */
    int B, Tl;         /* sequences and local rows */
    int NH, NKV, HS;   /* query heads and key/value heads on this tp rank, head size */
    enum precision prec;
};

/* The seconds the ring's messages were in flight while this rank computed
 * blocks (hidden), and those it waited for them afterwards (wait). */
struct cp_time {
    double hidden_s, wait_s;
};

/* Floats of the ring's buffers in the model's scratch (0 without cp). */
size_t cp_scratch_floats(const struct cp_dims *d);

/* Attention of the rows held (qkv (B,Tl,qkv cols) after the rotary
 * embedding) over the whole causal context: out (B,Tl,C/tp) and lse
 * (B,NH/tp,Tl), as attention_forward over the full sequence would give for
 * these rows.  buf: cp_scratch_floats of scratch.  Collective over CG_CP. */
void cp_attention_forward(const struct cp_dims *d, const struct device *k, struct comm *c, struct cp_time *t,
                          float *buf, float *out, float *lse, const float *qkv);
/* dqkv (B,Tl,qkv cols) overwritten with the gradient of the whole ring's
 * loss with respect to this rank's q, k and v.  Collective over CG_CP. */
void cp_attention_backward(const struct cp_dims *d, const struct device *k, struct comm *c, struct cp_time *t,
                           float *buf, float *dqkv, const float *dout, const float *out, const float *qkv,
                           const float *lse);
/* Both add their seconds to t. */

#endif
