/* ops.h -- what the users of ops.def need to expand it (plain C, no MPI: the
 * kernels' own files include it). */
#ifndef TRIAD_OPS_H
#define TRIAD_OPS_H

#include "precision.h"

/* A device operation's parameters: the precision, then those of ops.def. */
#define DEVICE_PARAMS(...) (enum precision p, __VA_ARGS__)
/* The body that forwards to call: `return` for a value, nothing for void. */
#define DEVICE_FORWARD_void(call) call
#define DEVICE_FORWARD_double(call) return call
#define DEVICE_FORWARD(ret, call) DEVICE_FORWARD_##ret(call)

/* attention_forward / attention_backward's flags (backend_ops.h): the
 * causal mask within the call's rows, extending the rows' softmax so far,
 * adding to the gradients. */
enum { ATT_CAUSAL = 1, ATT_MERGE = 2, ATT_ACCUM = 4 };

/* The CPU's attention (kernels_cpu.c) works in blocks of ATT_BLK rows and
 * keeps, per thread, the packed key and value blocks of a whole (sequence,
 * kv head) when they fit ATT_KEEP_BYTES (a longer one packs each block
 * again at each use). */
#ifndef ATT_BLK
#define ATT_BLK 64
#endif
#define ATT_KEEP_BYTES ((size_t)4 << 20)

/* The bytes of packed blocks that attention's forward (bwd 0) or backward
 * (bwd 1) over n rows needs per thread, from the bytes of one block packed
 * as each operand: bt (k^T, v^T as B), bb (k, v, q, dout as B), ba (q,
 * dout as A), bp (an ATT_BLK-square block as A: the probabilities, dS);
 * *keep: whether the key and value blocks are kept for the whole head.
 * (The planner's workspace too.) */
static inline size_t att_room_bytes(int bwd, int n, size_t bt, size_t bb, size_t ba, size_t bp, int *keep)
{
    size_t kv = bwd ? 2 * bt + bb : bt + bb, blocks = (size_t)(n + ATT_BLK - 1) / ATT_BLK;
    size_t own = bwd ? 2 * (ba + bb) + 3 * bp : ba + bp;
    *keep = blocks * kv <= ATT_KEEP_BYTES;
    return (*keep ? blocks : 1) * kv + own;
}

#endif
