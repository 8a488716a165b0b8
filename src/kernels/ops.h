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

/* The bytes of packed key and value blocks the CPU's attention keeps per
 * thread for a whole (sequence, kv head) (kernels_cpu.c); a longer one
 * packs each block again at each use. */
#define ATT_KEEP_BYTES ((size_t)4 << 20)

#endif
