/* backend.h -- the kernel interface: one pair of plain functions per operation.
 *
 * Conventions (llm.c style): outputs first, then inputs, dimensions last.
 * Row-major.  Linear weights are (OC, C) like PyTorch.  N = B*T rows.
 * "+=" in a comment means the kernel accumulates into that buffer; everything
 * else is overwritten.  Parameter gradients always accumulate (micro-batches).
 *
 * Every operation exists twice: in float (the program) and in double with the
 * suffix _f64 (built only into libkernels64.a, for finite-difference tests).
 */
#ifndef TRIAD_BACKEND_H
#define TRIAD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

#define KREAL float
#define KNAME(n) n
#include "backend_ops.h"
#undef KREAL
#undef KNAME

#define KREAL double
#define KNAME(n) n##_f64
#include "backend_ops.h"
#undef KREAL
#undef KNAME

#endif
